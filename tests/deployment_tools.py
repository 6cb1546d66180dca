"""What the deployment tests do to a running :class:`~pfxab_flower.simulations.flower.local_deployment.Deployment`.

Streaming ``flwr run``'s log to react to it, killing a SuperNode as a machine dies, and the
processes' log tails for a failing assertion's message: only tests need them, so they live here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from pfxab_flower.processes.lifetime import with_parent
from pfxab_flower.simulations.flower.flwr_run_launcher import flwr_executable
from pfxab_flower.simulations.flower.local_deployment import FEDERATION, Deployment, SiteKeys
from tests.patience import patient


def flwr_run_streaming(
    running: Deployment, app_dir: Path, run_config: str, timeout: float, on_line: Callable[[str], None]
) -> tuple[int, str]:
    """Like :meth:`Deployment.flwr_run`, calling ``on_line`` on each line of the streamed log as it comes."""
    command = [flwr_executable(), "run", str(app_dir), FEDERATION, "--stream", "--run-config", run_config]
    process = subprocess.Popen(with_parent(command), cwd=app_dir, env=running.env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            on_line(line)
            if time.monotonic() > deadline:
                raise TimeoutError(f"flwr run took more than {timeout:.0f} s")
        return process.wait(timeout=max(1.0, deadline - time.monotonic())), "".join(lines)
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def kill_node(running: Deployment, partition_id: int) -> None:
    """SIGKILL SuperNode ``partition_id`` and everything in its process group (a machine that dies)."""
    signal_node(running.processes[1 + partition_id], signal.SIGKILL)  # processes[0] is the SuperLink


def log_tail(running: Deployment, lines: int = 20) -> str:
    """The last lines of every process log (for a failing test's message)."""
    parts = []
    for path in sorted(running.logs.glob("*.log")):
        text = path.read_text(errors="replace").splitlines()[-lines:]
        parts.append(f"== {path.name}\n" + "\n".join(text))
    return "\n".join(parts)


def node_status(running: Deployment, node_id: int) -> str | None:
    """What the SuperLink says of a node (``online``, ``offline``, ...; ``None`` if it does not list it)."""
    nodes = running.flwr("supernode", "list")["nodes"]
    return next((node["status"] for node in nodes if int(node["node-id"]) == node_id), None)


def start_until_accepted(running: Deployment, name: str, node_config: str, keys: SiteKeys,
                         timeout: float | None = None) -> subprocess.Popen:
    """Start a site's SuperNode with its key, again and again, until the SuperLink lists it online.

    After a SIGKILL the SuperLink still holds the dead node as online until its heartbeats
    lapse, and refuses the same key meanwhile (the new process exits); after a SIGTERM the
    node signed off and is accepted at once.
    """
    node_id = running.node_ids[keys.site]
    timeout = patient(150.0) if timeout is None else timeout
    deadline = time.monotonic() + timeout
    attempt = 0
    while time.monotonic() < deadline:
        process = running.start_supernode(f"{name}-{attempt}", node_config, keys)
        while process.poll() is None and time.monotonic() < deadline:
            if node_status(running, node_id) == "online":
                return process
            time.sleep(0.5)
        attempt += 1
        time.sleep(2.0)
    raise TimeoutError(f"the SuperLink did not accept {keys.site}'s SuperNode within {timeout:.0f} s")


def sign_off(process: subprocess.Popen, timeout: float | None = None) -> None:
    """SIGTERM a SuperNode's process group (it signs off from the SuperLink) and wait for it to exit."""
    signal_node(process, signal.SIGTERM, patient(30.0) if timeout is None else timeout)


def signal_node(process: subprocess.Popen, sig: signal.Signals, timeout: float | None = None) -> None:
    """Send ``sig`` to a SuperNode's whole process group and wait for the SuperNode to exit."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
    process.wait(timeout=timeout)
