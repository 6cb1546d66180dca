"""Find and stop the processes one ``flwr run`` left behind, by a marker in their environment.

``flwr run`` starts a detached SuperLink, which starts ``flower-superexec``, which
starts ``flwr-simulation``, which starts Ray (GCS, raylet, workers, agents). None
of them is our child, and some outlive ``flwr run``; all of them inherit the
environment, so a unique value in it (our temporary ``FLWR_HOME``) names exactly
the processes this run started, and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # the process ended, or is not ours to read
        return b""


def _is_zombie(pid: int) -> bool:
    stat = _read(Path(f"/proc/{pid}/stat"))
    return b") Z " in stat


def processes_with_marker(marker: str) -> list[int]:
    """Live processes (zombies excluded) whose environment or command line contains ``marker``."""
    needle = marker.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        if (needle in _read(entry / "environ") or needle in _read(entry / "cmdline")) and not _is_zombie(pid):
            found.append(pid)
    return sorted(found)


def stop_processes(marker: str, grace: float = 5.0) -> list[int]:
    """SIGTERM every process carrying ``marker``, then SIGKILL what is left after ``grace`` seconds.

    Returns the processes still alive at the end (empty on success).
    """
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        pids = processes_with_marker(marker)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = processes_with_marker(marker)
        if not pids:
            return []
    return processes_with_marker(marker)
