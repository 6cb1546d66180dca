"""Many in-process runs at once: a per-process federation cache and a Ctrl-C-safe process pool.

Used by ``pfxab compare`` and ``pfxab sweep``. Building a federation and its optimum is a run's
expensive step, so each process keeps those it has built; runs are deterministic in their seed.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from functools import lru_cache
from typing import Any

from pfxab_flower.algorithms.registry import declared_options
from pfxab_flower.errors import WorkerLostError
from pfxab_flower.problems import build_federation, problem
from pfxab_flower.problems.federation import Federation
from pfxab_flower.processes.lifetime import exit_with_parent
from pfxab_flower.processes.remote import JobRunner
from pfxab_flower.schema.catalogue import PARAMETERS
from pfxab_flower.schema.run_config import RunConfig

#: The RunConfig fields of the algorithm (not of the federation); an option field reset is its declared default.
#: Seconds a broken pool waits for its dead worker's exit status to be readable (only when a worker died).
EXIT_STATUS_WAIT = 2.0
ALGORITHM_FIELDS = ("algorithm", "alpha", "seed", "horizon", "nu1", "rho", "max_depth", "max_evaluations", "confidence")


def federation_key(config: RunConfig) -> RunConfig:
    """The config with the algorithm's own fields reset: configs that share a federation share this key.

    A problem whose federation depends on the run's seed (``seeded``: the shifted ones) keeps it."""
    kept = ("seed",) if problem(config.problem).seeded else ()
    reset = {**{name: PARAMETERS[name].default for name in ALGORITHM_FIELDS if name not in kept},
             **dict.fromkeys(declared_options())}
    return config.replace(**{**reset, "alpha": 0.0, "horizon": 1})


@lru_cache(maxsize=8)
def _federation(key: RunConfig) -> Federation:
    return build_federation(key)


def shared_federation(config: RunConfig) -> Federation:
    """This process's federation for ``config`` (built once; its optima are cached on it)."""
    return _federation(federation_key(config))


def _start_worker(parent_pid: int) -> None:
    """A pool worker's set-up: ignore Ctrl-C, end at SIGTERM, exit with the parent.

    The parent alone handles Ctrl-C (and stops the workers with SIGTERM), so one message is
    shown; a handler the parent had for SIGTERM (``pfxab``'s, which unwinds) is not the worker's.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    exit_with_parent(parent_pid)


def local_runner(workers: int) -> JobRunner:
    """The default job runner: :func:`run_in_processes` with ``workers`` processes."""

    def runner(fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]],
               on_done: Callable[[int, Any, BaseException | None], None]) -> None:
        run_in_processes(fn, jobs, workers, on_done)

    return runner


def run_in_processes(
    fn: Callable[..., Any],
    jobs: Sequence[tuple[Any, ...]],
    workers: int,
    on_done: Callable[[int, Any, BaseException | None], None],
) -> None:
    """Call ``fn(*job)`` for every job in ``workers`` processes (in this one if ``workers <= 1``).

    ``on_done(index, result, error)`` is called in this process as each job ends;
    a job's exception is passed on, not raised, so one failing job loses no other.
    A worker that dies (killed, out of memory, a crash in C) takes the pool's running jobs
    with it: each of those is run again, alone, once; if its worker dies again its error is a
    :class:`~pfxab_flower.errors.WorkerLostError` naming how (a bare ``BrokenProcessPool`` was).
    Ctrl-C (or an exception ``on_done`` raises) drops the queued jobs, stops the running ones at once and
    re-raises.
    Workers are forked, so they inherit what this process has already cached.
    If this process dies (even by SIGKILL), the workers exit within a fraction of a second.
    """
    if workers <= 1:
        for index, job in enumerate(jobs):
            try:
                result, error = fn(*job), None
            except Exception as exc:
                result, error = None, exc
            on_done(index, result, error)
        return
    lost = _in_pool(fn, dict(enumerate(jobs)), workers, on_done)
    for index in lost:  # a worker killed from outside is no fault of the jobs beside it: each runs again, alone
        for again in _in_pool(fn, {index: jobs[index]}, 1, on_done).values():
            on_done(index, None, WorkerLostError(f"a worker process died twice running this job ({again}); "
                                                 "allowed: a job its worker survives (memory, signals, crashes)"))


def _in_pool(fn: Callable[..., Any], jobs: dict[int, tuple[Any, ...]], workers: int,
             on_done: Callable[[int, Any, BaseException | None], None]) -> dict[int, str]:
    """Run ``jobs`` (index -> job) in a pool of ``workers``; the jobs lost to a dead worker, with how it died."""
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_start_worker, initargs=(os.getpid(),))
    lost: dict[int, str] = {}
    try:
        futures = {pool.submit(fn, *job): index for index, job in jobs.items()}
        remaining = set(futures)
        while remaining:
            done, remaining = wait(remaining, return_when=FIRST_COMPLETED)
            for future in done:
                failure = future.exception()
                if isinstance(failure, BrokenProcessPool):
                    lost[futures[future]] = _how_workers_died(pool)
                else:
                    on_done(futures[future], None if failure else future.result(), failure)
    except BaseException:  # Ctrl-C, or ``on_done`` gave up (the results' directory is gone): stop every job now
        pool.shutdown(wait=False, cancel_futures=True)
        for worker in multiprocessing.active_children():  # this pool's workers are our only children
            worker.kill()  # not SIGTERM: one forked a moment ago has the parent's handlers until _start_worker runs
        raise
    finally:
        pool.shutdown(wait=True)
    return lost


def _how_workers_died(pool: ProcessPoolExecutor) -> str:
    """``killed by SIGKILL`` (or the exit status) of the pool's worker that died first, as far as can be told."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # the workers (CPython keeps them there)
    deadline = time.monotonic() + EXIT_STATUS_WAIT
    while True:  # the pool may learn of the death before the dead worker's status can be read (a busy machine)
        codes = [p.exitcode for p in processes if p.exitcode not in (None, 0, -signal.SIGTERM)]
        if codes or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if not codes:
        return "it ended without a word"
    code = codes[0]
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
