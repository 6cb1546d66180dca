"""An interrupted Flower simulation stops Ray only once Flower's message workers have left it.

A worker thread still in ``ray.get`` when Flower's engine called ``ray.shutdown`` made Ray's core end the process
at once (status 1, not the interrupt's 143 and its line): so an interrupt first kills the actors and waits for the
workers (docs/reliability.md, class 5). A run that ends otherwise is untouched.
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

from pfxab_flower.flower_shared import flower_internals
from pfxab_flower.simulations.flower.simulation_environment import logger_settings

#: The longest an interrupted simulation waits for Flower's worker threads to leave Ray (a thread idle in
#: Flower's queue leaves within its 1 s poll; one whose actor was killed, as soon as Ray reports the death).
WORKERS_LEAVE_SECONDS = 10.0


@contextlib.contextmanager
def workers_leave_before_shutdown() -> Iterator[None]:
    """For the block (one in-process Flower simulation): under an interrupt, the backend's actors are killed, the
    worker threads waited for (at most :data:`WORKERS_LEAVE_SECONDS`) and the logs silenced to the block's end,
    before Flower's ``terminate``; otherwise ``terminate`` runs as Flower wrote it."""
    working: set[threading.Thread] = set()
    guard = threading.Lock()

    def tracked(worker: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(worker)
        def tracked_worker(*args: Any, **kwargs: Any) -> Any:
            with guard:
                working.add(threading.current_thread())
            try:
                return worker(*args, **kwargs)
            finally:
                with guard:
                    working.discard(threading.current_thread())

        return tracked_worker

    def after_workers(terminate: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(terminate)
        def terminate_after_workers(backend: Any) -> None:
            if isinstance(sys.exc_info()[1], KeyboardInterrupt):  # from run_api's finally: an interrupt unwinding
                with guard:
                    threads = list(working)
                quiet.enter_context(logger_settings(SILENCED_LOGGERS, SILENT))  # to the block's end: replies arrive
                leave_ray(lambda: kill_actors(backend), threads, WORKERS_LEAVE_SECONDS)
            terminate(backend)

        return terminate_after_workers

    with contextlib.ExitStack() as quiet, flower_internals.simulation_engine_wrapped(tracked, after_workers):
        yield


#: Quiet from the interrupt to the simulation's end: Flower's complaints about the actors we killed, and the phase
#: log's about the replies those actors never sent (both would stand before the interrupt's one line; neither is news).
SILENCED_LOGGERS = ("flwr", "pfxab_flower")
#: Above every level a record can have.
SILENT = logging.CRITICAL + 1


def leave_ray(stop_tasks: Callable[[], object], threads: Sequence[threading.Thread], wait: float) -> list[str]:
    """``stop_tasks()``, then wait up to ``wait`` seconds in all for ``threads`` to end; the names of those still
    running (for the caller to go on regardless: waiting longer would only hold the interrupt up)."""
    with contextlib.suppress(Exception):  # a Ray that cannot kill: the wait is all we can do
        stop_tasks()
    deadline = time.monotonic() + wait
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [thread.name for thread in threads if thread.is_alive()]


def kill_actors(backend: Any) -> None:
    """Kill every actor of a Ray backend's pool, idle or running a task (a task under way ends at once)."""
    import ray

    for actor in flower_internals.backend_actors(backend):
        with contextlib.suppress(Exception):  # one already dead
            ray.kill(actor, no_restart=True)
