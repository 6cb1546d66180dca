"""An interrupted Flower simulation stops Ray only once Flower's message workers have left it.

Ctrl-C or SIGTERM unwinds through Flower's ``run_api``, whose ``finally`` terminates the Ray backend
(``ray.shutdown``) while its worker threads may still wait in ``ray.get`` for a ClientApp's task. A
thread that touches Ray after the shutdown makes Ray's C++ core end the whole process at once, with
status 1 and Ray's line "...accesses the Ray's worker after it is shutdown. The process will exit",
before pfxab's clean-up and its one line (seen once in five test-suite runs: ``pfxab run --engine
flower``, SIGTERM in phase 1). So, only while an interrupt unwinds: the backend's actors are killed (a
task under way ends at once, and the thread waiting for it gets an error and, Flower's stop being
set, leaves), Flower's log and the phase log are silenced until the simulation ends (their complaints
about the actors we killed are not news), the worker threads are waited for (at most
:data:`WORKERS_LEAVE_SECONDS`), and only then does the backend terminate as Flower wrote it. A run that
ends otherwise is untouched.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

#: The longest an interrupted simulation waits for Flower's worker threads to leave Ray (a thread idle in
#: Flower's queue leaves within its 1 s poll; one whose actor was killed, as soon as Ray reports the death).
WORKERS_LEAVE_SECONDS = 10.0


@contextlib.contextmanager
def workers_leave_before_shutdown() -> Iterator[None]:
    """For the block (one in-process Flower simulation): an interrupted run's Ray backend terminates only after
    Flower's message workers have left Ray (see the module's docstring). Without Flower's Ray backend, a no-op."""
    try:
        from flwr.server.superlink.fleet.vce import vce_api
        from flwr.server.superlink.fleet.vce.backend.raybackend import RayBackend
    except ImportError:
        yield
        return
    working: set[threading.Thread] = set()
    guard = threading.Lock()
    original_worker, original_terminate = vce_api.worker, RayBackend.terminate

    @functools.wraps(original_worker)
    def tracked_worker(*args: Any, **kwargs: Any) -> Any:
        with guard:
            working.add(threading.current_thread())
        try:
            return original_worker(*args, **kwargs)
        finally:
            with guard:
                working.discard(threading.current_thread())

    @functools.wraps(original_terminate)
    def terminate(backend: Any) -> None:
        if isinstance(sys.exc_info()[1], KeyboardInterrupt):  # called from run_api's finally, an interrupt unwinding
            with guard:
                threads = list(working)
            quiet.enter_context(silenced(*SILENCED_LOGGERS))  # until the block ends: replies still arrive
            leave_ray(lambda: kill_actors(getattr(backend, "pool", None)), threads, WORKERS_LEAVE_SECONDS)
        original_terminate(backend)

    vce_api.worker, RayBackend.terminate = tracked_worker, terminate  # type: ignore[method-assign,assignment]
    with contextlib.ExitStack() as quiet:
        try:
            yield
        finally:
            vce_api.worker = original_worker
            RayBackend.terminate = original_terminate  # type: ignore[method-assign]


#: Quiet from the interrupt to the simulation's end: Flower's complaints about the actors we killed, and the phase
#: log's about the replies those actors never sent (both would stand before the interrupt's one line; neither is news).
SILENCED_LOGGERS = ("flwr", "pfxab_flower")


@contextlib.contextmanager
def silenced(*names: str) -> Iterator[None]:
    """For the block, the loggers ``names`` say nothing; their levels are restored afterwards."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def leave_ray(stop_tasks: Callable[[], object], threads: Sequence[threading.Thread], wait: float) -> list[str]:
    """``stop_tasks()``, then wait up to ``wait`` seconds in all for ``threads`` to end; the names of those still
    running (for the caller to go on regardless: waiting longer would only hold the interrupt up)."""
    with contextlib.suppress(Exception):  # a Ray that cannot kill: the wait is all we can do
        stop_tasks()
    deadline = time.monotonic() + wait
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [thread.name for thread in threads if thread.is_alive()]


def kill_actors(pool: Any) -> None:
    """Kill every actor of Flower's actor pool, idle (``pool.pool``) or running a task (``_future_to_actor``)."""
    import ray

    if pool is None:
        return
    idle, running = list(getattr(pool, "pool", [])), dict(getattr(pool, "_future_to_actor", {}))  # copies: the
    for actor in [*idle, *running.values()]:  # worker threads change both meanwhile
        with contextlib.suppress(Exception):  # one already dead
            ray.kill(actor, no_restart=True)
