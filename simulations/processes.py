"""Find and stop the processes one ``flwr run`` left behind, by a marker in their environment.

Our temporary ``FLWR_HOME`` in a process's environment names exactly the processes a run started;
signals become :class:`Interrupted` so the clean-up runs, and a :func:`watchdog` cleans up after a
SIGKILL (docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from pfxab_flower.processes.lifetime import wait_for_parent_exit

if TYPE_CHECKING:
    import psutil
# psutil is imported where it is used: every ``pfxab`` command loads this module (its signal handling), and
# only the commands that start processes look for them (``pfxab run`` starts faster without it).


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie, dead but not yet reaped, is not)."""
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:  # no such process, or not ours to see
        return False


def start_time(pid: int) -> str | None:
    """When ``pid`` started (psutil's creation time): with the pid, names one process for good."""
    import psutil

    try:
        return repr(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def owner_token() -> str:
    """``"<pid> <start time>"`` of this process: what :func:`owner_gone` checks."""
    return f"{os.getpid()} {start_time(os.getpid())}"


def owner_gone(token: str) -> bool:
    """Whether the process an :func:`owner_token` names has ended (a reused pid is another process)."""
    pid, _, started = token.strip().partition(" ")
    return not (pid.isdecimal() and alive(int(pid)) and start_time(int(pid)) == started)


def processes_with_marker(marker: str) -> list[int]:
    """Live processes (zombies excluded) whose environment or command line contains ``marker``.

    The environment is searched as ``NAME=value`` entries, so a marker such as ``FLWR_HOME=/tmp/x`` matches.
    """
    import psutil

    found = []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        try:
            named = marker in _environment(process) or marker in "\0".join(process.cmdline())
            if named and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except psutil.Error:  # the process ended, or is not ours to read
            continue
    return sorted(found)


def _environment(process: psutil.Process) -> str:
    """``process``'s environment as its ``NAME=value`` entries, NUL-separated ("" when it is not ours to read)."""
    import psutil

    try:
        return "\0".join(f"{name}={value}" for name, value in process.environ().items())
    except psutil.Error:
        return ""


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


def clean_up(marker: str, directories: Sequence[str | Path]) -> list[int]:
    """Stop the processes carrying ``marker``, then remove ``directories``; the processes still alive."""
    left = stop_processes(marker)
    for directory in directories:
        shutil.rmtree(directory, ignore_errors=True)
    return left


@contextlib.contextmanager
def watchdog(marker: str, directories: Sequence[str | Path]) -> Iterator[subprocess.Popen[bytes]]:
    """For the block: a watcher that runs :func:`clean_up` if this process dies (even by SIGKILL).

    When the block ends normally the caller has cleaned up, and the watcher is
    stopped. The watcher has a session of its own, so a signal sent to our
    process group (Ctrl-C, a closed terminal) does not stop it before us.
    """
    watcher = subprocess.Popen(
        [sys.executable, "-m", "pfxab_flower.simulations.processes"], stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    assert watcher.stdin is not None
    watcher.stdin.write(json.dumps({"parent": os.getpid(), "marker": marker,
                                    "directories": [str(d) for d in directories]}).encode())
    watcher.stdin.close()
    try:
        yield watcher
    finally:
        watcher.kill()
        watcher.wait()


def _watch(parent: int, marker: str, directories: list[str]) -> None:
    """The watcher's life: wait until ``parent`` is gone (we are re-parented), then clean up after it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    wait_for_parent_exit(parent)
    clean_up(marker, directories)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP, raised as Ctrl-C is (so every ``except KeyboardInterrupt`` clean-up runs),
    with the exit status the shell expects: ``128 + signum`` (130, 143, 129)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.status = 128 + signum
        self.name = signal.Signals(signum).name


#: The signals that stop a command: Ctrl-C, ``kill``, a closed terminal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def exit_on_signals(signals: Sequence[signal.Signals] = STOP_SIGNALS) -> Iterator[None]:
    """For the block: ``signals`` raise :class:`Interrupted` (status 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).

    The exception unwinds through the caller's ``finally`` blocks (and ``except KeyboardInterrupt``
    ones), which stop what was started; further signals are ignored meanwhile, so a second one
    cannot cut the clean-up short. Outside the main thread (where Python allows no handlers) the
    block runs unchanged.
    """
    def handler(signum: int, frame: FrameType | None) -> None:
        for sig in signals:
            signal.signal(sig, signal.SIG_IGN)
        raise Interrupted(signum)

    try:
        previous = {sig: signal.signal(sig, handler) for sig in signals}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


if __name__ == "__main__":  # the watcher started by watchdog()
    _orders = json.loads(sys.stdin.read())
    _watch(_orders["parent"], _orders["marker"], _orders["directories"])
