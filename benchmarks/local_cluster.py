"""A real two-node Ray cluster on this machine, for the tests and benchmarks of ``--ray-address``.

Two ``ray start`` processes on loopback, one CPU each; every process they start carries the marker
``PFXAB_LOCAL_CLUSTER``, so stopping the cluster stops exactly those (not the user's other Ray processes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pfxab_flower.simulations.flower.flwr_run_launcher import free_port
from pfxab_flower.simulations.flower.leftover_processes import processes_with_marker, stop_processes
from pfxab_flower.simulations.flower.simulation_environment import QUIET_ENV

MARKER = "PFXAB_LOCAL_CLUSTER"
START_TIMEOUT = 120.0


def ray_executable() -> str:
    """The ``ray`` command next to this Python (so the cluster's workers import this environment's packages)."""
    candidate = Path(sys.executable).parent / "ray"
    return str(candidate) if candidate.exists() else shutil.which("ray") or "ray"


def _start(args: list[str], env: dict[str, str]) -> None:
    result = subprocess.run([ray_executable(), "start", *args], env=env, capture_output=True, text=True,
                            timeout=START_TIMEOUT)
    if result.returncode != 0:
        raise RuntimeError(f"ray start {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")


def _alive_nodes(address: str, env: dict[str, str]) -> int:
    code = (f"import ray, logging; ray.init(address={address!r}, logging_level=logging.ERROR); "
            "print(sum(1 for n in ray.nodes() if n['Alive'])); ray.shutdown()")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    lines = result.stdout.strip().splitlines()
    return int(lines[-1]) if result.returncode == 0 and lines and lines[-1].isdigit() else 0


@dataclass(frozen=True)
class Cluster:
    """A running local cluster: its head's address and where the head keeps its session."""

    address: str
    head_dir: Path

    def drivers(self) -> int:
        """How many driver processes have connected so far (Ray logs each in the head's session)."""
        return len(list(self.head_dir.glob("session_latest/logs/python-core-driver-*.log")))


@contextmanager
def two_node_cluster(cpus_per_node: int = 1) -> Iterator[Cluster]:
    """Start a head and a worker node (``cpus_per_node`` each); yield the running :class:`Cluster`; stop both."""
    base = Path(tempfile.mkdtemp(prefix="pfxab-rc-", dir="/tmp"))
    marker = str(base)
    env = {**os.environ, **QUIET_ENV, MARKER: marker}
    env.pop("RAY_ADDRESS", None)  # the cluster is a new one, not whatever the caller's environment points at
    port = free_port()
    address = f"127.0.0.1:{port}"
    try:
        _start(["--head", "--port", str(port), "--node-ip-address", "127.0.0.1", "--num-cpus",
                str(cpus_per_node), "--num-gpus", "0", "--temp-dir", str(base / "head"), "--include-dashboard=false",
                "--disable-usage-stats"], env)
        _start(["--address", address, "--node-ip-address", "127.0.0.1", "--num-cpus",
                str(cpus_per_node), "--num-gpus", "0", "--disable-usage-stats"], env)
        deadline = time.monotonic() + START_TIMEOUT
        while _alive_nodes(address, env) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("the two-node Ray cluster did not come up")
            time.sleep(1.0)
        yield Cluster(address, base / "head")
    finally:
        left = stop_processes(marker)
        shutil.rmtree(base, ignore_errors=True)
        if left or processes_with_marker(marker):
            raise RuntimeError(f"Ray processes left after stopping the local cluster: {left}")
