"""An optional time limit on one call of a user's objective, so that an objective that never returns
cannot hang a run for ever.

In the main thread the call is interrupted by a timer signal (``SIGALRM``), which stops Python code
however it loops; a C extension that never returns to Python is interrupted when it next does. Off
the main thread (signals reach only the main thread), or when another timer is already armed, the
call runs in a daemon thread that is given up after the limit: the run stops with the same one-line
error, but that thread keeps its CPU until the process exits. Either way the run stops with
:class:`ObjectiveError` naming the client and the limit.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

from pfxab_flower.errors import ObjectiveError


class _Expired(BaseException):
    """Raised by the timer inside the objective; a BaseException so that its ``except Exception`` cannot swallow it."""


def call_within(seconds: float | None, fn: Callable[[], Any], what: str) -> Any:
    """``fn()``, or :class:`ObjectiveError` if it takes longer than ``seconds`` (``None``: no limit)."""
    if seconds is None:
        return fn()
    message = f"{what} took longer than objective_timeout={seconds:g} s and was stopped"
    if _timer_is_free():
        return _with_alarm(seconds, fn, message)
    return _in_thread(seconds, fn, message)


def _timer_is_free() -> bool:
    """The main thread, with a real-time timer nobody else (e.g. pytest-timeout) has armed."""
    return (threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
            and signal.getitimer(signal.ITIMER_REAL)[0] == 0)


def _with_alarm(seconds: float, fn: Callable[[], Any], message: str) -> Any:
    def expire(signum: int, frame: Any) -> None:
        raise _Expired

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    except _Expired:
        raise ObjectiveError(message) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _in_thread(seconds: float, fn: Callable[[], Any], message: str) -> Any:
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # handed back to the caller's thread as it was raised
            outcome["error"] = exc

    worker = threading.Thread(target=call, name="pfxab-objective", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise ObjectiveError(message)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
