"""An optional time limit on one call of a user's objective, that the objective cannot defeat.

With a limit, the objective runs in a forked process of its own, kept for its later calls; a call
that overruns is ended by SIGKILL and the run stops with :class:`ObjectiveError`. Without a limit
(the default) it is called in this process. Why a process, not a signal or a thread:
docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from pfxab_flower.errors import ObjectiveError
from pfxab_flower.processes.lifetime import exit_with_parent

if TYPE_CHECKING:  # multiprocessing itself is imported by the first limited call: most runs have no limit
    from multiprocessing.connection import Connection


def call_within(seconds: float | None, fn: Callable[[np.ndarray], Any], points: np.ndarray, what: str) -> Any:
    """``fn(points)``, or :class:`ObjectiveError` if it takes longer than ``seconds`` (``None``: no limit, called here).

    ``what`` names the objective in the error (``"objective of client 2"``). An exception the
    objective raises is raised here as it was (or, if it cannot cross processes, as a
    ``RuntimeError`` with its type and text).
    """
    if seconds is None:
        return fn(points)
    key = (threading.get_ident(), id(fn))
    worker = _WORKERS.get(key)
    if worker is None or worker.fn is not fn or not worker.alive():
        _stop_orphans()
        worker = _WORKERS[key] = _ObjectiveProcess(fn)
    try:
        return worker.call(points, seconds, what)
    except BaseException:
        if not worker.alive() or not worker.idle:  # overran, died or interrupted: never reused mid-call
            worker.stop()
            _WORKERS.pop(key, None)
        raise


class _ObjectiveProcess:
    """A forked process that calls one objective, one call at a time, for one thread of this process."""

    def __init__(self, fn: Callable[[np.ndarray], Any]) -> None:
        import multiprocessing

        self.fn = fn  # held: its id keys the worker, so it must not be reused by another object
        context = multiprocessing.get_context("fork")
        self.connection, theirs = context.Pipe()
        self.process = context.Process(target=_serve, args=(fn, theirs, os.getpid()), daemon=True,
                                       name="pfxab-objective")
        self.process.start()
        theirs.close()
        self.idle = True

    def alive(self) -> bool:
        return self.process.is_alive()

    def call(self, points: np.ndarray, seconds: float, what: str) -> Any:
        self.idle = False
        self.connection.send(points)
        if not self.connection.poll(seconds):
            raise ObjectiveError(f"{what} took longer than objective_timeout={seconds:g} s and was stopped")
        try:
            ok, value = self.connection.recv()
        except (EOFError, OSError):
            self.process.join(1.0)
            raise ObjectiveError(f"{what} ended the process it ran in ({_ending(self.process.exitcode)})") from None
        self.idle = True
        if ok:
            return value
        raise value

    def stop(self) -> None:
        """End the process and whatever it started, at once (SIGKILL to its process group: nothing the objective
        does can delay it, and a program it ran, ``sleep 1000`` say, goes with it)."""
        if self.process.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.join()
        self.connection.close()


#: This process's objective processes, by (thread, objective): each thread calls its own. A forked process (a
#: comparison's pool worker) starts with none: the ones it inherited are its parent's children, not its own.
_WORKERS: dict[tuple[int, int], _ObjectiveProcess] = {}
os.register_at_fork(after_in_child=_WORKERS.clear)


def _stop_orphans() -> None:
    """End the objective processes of threads that have ended (nobody will call them again)."""
    living = {thread.ident for thread in threading.enumerate()}
    for key in [key for key in _WORKERS if key[0] not in living]:
        _WORKERS.pop(key).stop()


def _serve(fn: Callable[[np.ndarray], Any], connection: Connection, parent: int) -> None:
    """The objective's process: call ``fn`` on every batch of points received, send back its value or exception.

    Interrupts are the parent's to handle (it ends this process); once the parent is gone, so is this process.
    """
    os.setpgid(0, 0)  # a group of its own: what the objective starts is ended with it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    exit_with_parent(parent, status=0)
    while True:
        try:
            points = connection.recv()
        except (EOFError, OSError):
            os._exit(0)
        points.flags.writeable = False  # as the objective gets them in process: a read-only copy
        try:
            reply: tuple[bool, Any] = (True, fn(points))
        except BaseException as exc:  # the objective's own failure: raised again in the parent
            reply = (False, _portable(exc))
        try:
            connection.send(reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            connection.send((False, RuntimeError(f"its value cannot be sent back: {exc}")))


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a ``RuntimeError`` carrying its type and text."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _ending(code: int | None) -> str:
    if code is None:
        return "it did not answer"
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
