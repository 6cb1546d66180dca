"""Whose Ray is this simulation on? One line naming the cause and the fix when it is not its own.

Flower's Ray backend may join a cluster named in Ray's default temporary directory instead of
starting its own (docs/flower.md, "A Ray already running on the machine"). :func:`foreign_cluster`
stops such a run within :data:`INIT_WAIT` seconds with one line; :func:`silence_cause` says what Ray
shows when the first exchange got no reply. Both only read Ray's state.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

#: Seconds to wait for Flower's backend to finish ``ray.init`` once a cluster file is found:
#: joining a live cluster takes a few seconds; longer means Ray waits for a cluster that is gone.
INIT_WAIT = 30.0
#: The fix, for the shell that starts ``flwr run`` (the local SuperLink passes its environment on).
FIX = ("`export RAY_ADDRESS=local` before `flwr run` starts the local SuperLink (stop a SuperLink already "
       "running first)")


@dataclass(frozen=True)
class ClusterFile:
    """The cluster Ray's ``ray.init()`` joins by itself: the address in ``ray_current_cluster``."""

    address: str
    path: Path


def ray_temp_dir() -> Path:
    """Ray's default temporary directory, by Ray 2.55's rule (``ray._common.utils.get_default_ray_temp_dir``).

    Written out rather than imported: this runs in the ServerApp's thread while Flower's
    backend may be importing Ray in the main thread, and importing Ray from both at once
    fails with a module-lock ``_DeadlockError`` (measured).
    """
    if "RAY_TMPDIR" in os.environ:
        base = os.environ["RAY_TMPDIR"]
    elif sys.platform.startswith("linux") and "TMPDIR" in os.environ:
        base = os.environ["TMPDIR"]
    elif sys.platform.startswith(("linux", "darwin")):
        base = "/tmp"
    else:
        base = tempfile.gettempdir()
    return Path(base) / "ray"


def announced_cluster() -> ClusterFile | None:
    """The cluster a bare ``ray.init()`` in this process would join, or ``None`` (it would start its own).

    ``None`` also when ``RAY_ADDRESS`` is set: then joining is what was asked for.
    """
    if os.environ.get("RAY_ADDRESS"):
        return None
    path = ray_temp_dir() / "ray_current_cluster"
    try:
        address = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return ClusterFile(address, path) if address else None


def loaded_ray() -> ModuleType | None:
    """The ``ray`` module once this process has finished importing it, else ``None``; never imports it.

    A module still being imported is in ``sys.modules`` with ``__spec__._initializing``
    set (CPython's own test before it waits on the import lock).
    """
    module = sys.modules.get("ray")
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module


def ray_is_up() -> bool:
    ray = loaded_ray()
    return ray is not None and bool(ray.is_initialized())


def foreign_cluster(simulation: bool, wait: float = INIT_WAIT) -> str | None:
    """Why this simulation must not go on, in one line (cause and fix), or ``None``.

    ``simulation``: the ServerApp runs in the process of Flower's Ray backend (its grid is
    the simulation's in-memory grid). Returns at once when no cluster file is found;
    otherwise waits up to ``wait`` seconds for the backend's ``ray.init`` to finish.
    """
    if not simulation:
        return None
    found = announced_cluster()
    if found is None:
        return None
    deadline = time.monotonic() + wait
    while not ray_is_up() and time.monotonic() < deadline:
        time.sleep(0.2)
    where = f"the Ray cluster at {found.address} named in {found.path} (written by an earlier `ray start`)"
    if not ray_is_up():
        return (f"this simulation's Ray has waited {wait:g} s to join {where} instead of starting its own; "
                f"that cluster may be gone; fix: {FIX}, or delete {found.path} if nothing runs there")
    joined = joined_address()
    if joined is None or _port(joined) != _port(found.address):
        return None  # Ray started its own (a private temp dir was given), or joined another cluster on purpose
    return (f"this simulation's Ray joined {where} instead of starting its own, so its clients run on "
            f"someone else's cluster (its Python environment, its CPUs) and may never answer; fix: {FIX}, "
            f"or `export RAY_ADDRESS={found.address}` to use that cluster on purpose")


def joined_address() -> str | None:
    """The GCS address of the cluster this process's Ray joined; ``None`` if it started its own (or is not up)."""
    ray = loaded_ray()
    if ray is None or not ray.is_initialized():
        return None
    try:
        node = ray._private.worker._global_node  # Ray's own record; no public API says who started the cluster
        return None if node is None or node.is_head() else str(node.gcs_address)
    except AttributeError:
        return None


def silence_cause() -> str:
    """What this process can see when no client answered the first exchange: the usual causes, checked."""
    ray = loaded_ray()
    if ray is not None and ray.is_initialized():
        joined = joined_address()
        if joined is not None:
            return (f"this simulation's Ray runs on the existing Ray cluster at {joined}: its nodes must run this "
                    f"Python environment with free CPUs; for a private Ray: {FIX}")
        cpus = ray.cluster_resources().get("CPU", 0.0)
        return (f"the simulation's private Ray is up ({cpus:g} CPUs): a ClientApp slower than the round timeout, "
                f"or client resources that fit no node (client-resources-num-cpus at most {cpus:g})")
    found = announced_cluster()
    if found is not None and "flwr.simulation" in sys.modules:
        return f"Ray may be waiting for the Ray cluster at {found.address} named in {found.path}; fix: {FIX}"
    return ("the usual causes: SuperNodes not running or unable to load the ClientApp (see their logs), or a "
            "ClientApp slower than the round timeout")


def _port(address: str) -> str:
    return address.rsplit(":", 1)[-1]
