"""Find and stop the processes one ``flwr run`` left behind, by a marker in their environment.

Our temporary ``FLWR_HOME`` in a process's environment names exactly the processes a run started;
signals become :class:`Interrupted` so the clean-up runs, and a :func:`watchdog` cleans up after a
SIGKILL (docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from pfxab_flower.processes.lifetime import wait_for_parent_exit

if TYPE_CHECKING:
    import subprocess

    import psutil
# psutil, shutil and subprocess are imported where they are used: every ``pfxab`` command loads this module
# (its signal handling), and only the commands that start processes look for them (``pfxab run`` starts faster
# without them).


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
    """Live processes (zombies excluded) whose environment, command line or open files' paths contain ``marker``.

    The environment is searched as ``NAME=value`` entries, so a marker such as ``FLWR_HOME=/tmp/x`` matches.
    For a process Ray renamed (``setproctitle``: ``ray::DashboardAgent``, which overwrites its command line
    and environment) the paths of its open files count too: the log files it holds below its temporary
    directory still name it. Missing them left two agents running for a minute after an interrupted run.
    (Only Ray's: a user's ``tail -f`` of a log there is not ours to stop.)
    """
    import psutil

    found = []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        try:
            named = (marker in _environment(process) or marker in "\0".join(process.cmdline())
                     or (process.name().startswith(RAY_RENAMED) and any(marker in path
                                                                         for path in _open_paths(process.pid))))
            if named and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except psutil.Error:  # the process ended, or is not ours to read
            continue
    return sorted(found)


#: How Ray names the processes it renames (its workers and agents).
RAY_RENAMED = "ray::"


def _open_paths(pid: int) -> list[str]:
    """What ``pid``'s open file descriptors point at (``/proc/PID/fd``); [] if they cannot be read."""
    paths = []
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                paths.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    except OSError:
        pass
    return paths


def _environment(process: psutil.Process) -> str:
    """``process``'s environment as its ``NAME=value`` entries, NUL-separated ("" when it is not ours to read)."""
    import psutil

    try:
        return "\0".join(f"{name}={value}" for name, value in process.environ().items())
    except psutil.Error:
        return ""


#: How long a clean-up looks again once no marked process is left (a dying raylet may be starting an agent).
SETTLE_SECONDS = 0.5


def stop_processes(marker: str, grace: float = 5.0) -> list[int]:
    """SIGTERM every process carrying ``marker``, then SIGKILL what is left after ``grace`` seconds.

    Returns the processes still alive at the end (empty on success).
    """
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        pids = processes_with_marker(marker)
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            for pid in pids:  # again each time: a process started meanwhile (Ray's agents, late) gets it too
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            time.sleep(0.1)
            pids = processes_with_marker(marker)
        if not pids:
            time.sleep(SETTLE_SECONDS)  # one that a dying parent was starting shows itself within this
            pids = processes_with_marker(marker)
            if not pids:
                return []
    return processes_with_marker(marker)


def clean_up(marker: str, directories: Sequence[str | Path]) -> list[int]:
    """Stop the processes carrying ``marker``, then remove ``directories``; the processes still alive."""
    import shutil

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
    import subprocess

    watcher = subprocess.Popen(
        [sys.executable, "-m", "pfxab_flower.simulations.flower.leftover_processes"], stdin=subprocess.PIPE,
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
def exit_on_signals(signals: Sequence[signal.Signals] = STOP_SIGNALS, label: str = "pfxab") -> Iterator[None]:
    """For the block: ``signals`` raise :class:`Interrupted` (status 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).

    The exception unwinds through the caller's ``finally`` blocks (and ``except KeyboardInterrupt``
    ones), which stop what was started; further signals are ignored meanwhile, so a second one
    cannot cut the clean-up short. Inside :func:`exits_at_once` the process cleans up and ends at once
    instead, with the line ``{label}: interrupted (SIGTERM)``. Outside the main thread (where Python
    allows no handlers) the block runs unchanged.

    Python runs the handler wherever the main thread is, also inside code whose exceptions it reports
    and drops (``sys.unraisablehook``): a ``__del__``, a weakref callback, an ``os.register_at_fork``
    hook (logging's, at every fork of a pool worker). Dropped there, the interrupt was lost (its
    signals ignored: the sweep ran to its end, status 0, after a traceback); so such a dropped
    :class:`Interrupted` is raised again, silently: its handler runs once more a moment later (from a
    thread; dropped again, again), where it can unwind.
    """
    owed: set[int] = set()  # the signals of dropped interrupts, to be raised again

    def handler(signum: int, frame: FrameType | None) -> None:
        owed.clear()
        for sig in signals:
            signal.signal(sig, signal.SIG_IGN)
        if _at_once:  # inside exits_at_once(): no exception may unwind through what runs there
            _exit_now(Interrupted(signum), label)
        raise Interrupted(signum)

    def redeliver(unraisable: sys.UnraisableHookArgs) -> None:
        if not isinstance(unraisable.exc_value, Interrupted):
            previous_hook(unraisable)
            return
        signum = unraisable.exc_value.signum
        while True:
            try:  # an Interrupted raised in here would be dropped too: caught, and sent again
                for sig in signals:
                    signal.signal(sig, handler)
                owed.add(signum)
                threading.Thread(target=_raise_again, args=(signum, owed), name="pfxab-interrupt-again",
                                 daemon=True).start()
                return
            except Interrupted:
                continue

    try:
        previous = {sig: signal.signal(sig, handler) for sig in signals}
    except ValueError:  # not the main thread
        yield
        return
    previous_hook, sys.unraisablehook = sys.unraisablehook, redeliver
    try:
        yield
    finally:
        owed.clear()
        sys.unraisablehook = previous_hook
        for sig, old in previous.items():
            signal.signal(sig, old)


#: Seconds before a dropped interrupt's signal is sent again (for the main thread to leave what dropped it).
REDELIVER_SECONDS = 0.01


def _raise_again(signum: int, owed: set[int]) -> None:
    """After :data:`REDELIVER_SECONDS`, ``signum`` to the main thread once more if still ``owed`` (from a thread:
    the handler runs in the main thread at its next check, outside the hook that reported the dropped interrupt).

    A real signal (not ``interrupt_main``), so that a main thread blocked waiting for the pool wakes up."""
    time.sleep(REDELIVER_SECONDS)
    if signum in owed:
        signal.pthread_kill(threading.main_thread().ident or 0, signum)


#: The clean-ups of the :func:`exits_at_once` blocks under way, innermost last.
_at_once: list[Callable[[], object]] = []


@contextlib.contextmanager
def exits_at_once(clean_up: Callable[[], object]) -> Iterator[None]:
    """For calls no exception may leave (Ray's start): a stop signal inside runs ``clean_up`` and ends the process.

    Ray's start (``ray.init``, ``ray.nodes``) interrupted at the wrong moment deadlocked in C++ (a
    ``GlobalStateAccessor`` destroyed while its own thread still waited on it): ``pfxab run --engine
    flower`` never exited after SIGTERM. Holding the signal back until the call returned took up to
    20 s on a busy machine; so instead the handler stops what the block started (``clean_up``: Ray's
    processes, its directory), says the usual line and exits with the usual status, within seconds.
    """
    _at_once.append(clean_up)
    try:
        yield
    finally:
        _at_once.remove(clean_up)


def _exit_now(stop: Interrupted, label: str) -> None:
    """Run every :func:`exits_at_once` clean-up, say ``{label}: interrupted (NAME)`` and exit with its status."""
    for clean_up in reversed(_at_once):
        with contextlib.suppress(Exception):
            clean_up()
    with contextlib.suppress(OSError, ValueError):
        print(f"{label}: interrupted ({stop.name})", file=sys.stderr, flush=True)
    os._exit(stop.status)


if __name__ == "__main__":  # the watcher started by watchdog()
    _orders = json.loads(sys.stdin.read())
    _watch(_orders["parent"], _orders["marker"], _orders["directories"])
