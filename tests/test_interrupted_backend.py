"""An interrupted Flower simulation terminates its Ray backend only once Flower's message workers have left Ray.

``pfxab run --engine flower`` SIGTERM'ed in phase 1 once ended with status 1 and Ray's line "...accesses the
Ray's worker after it is shutdown. The process will exit" instead of 143 and its own line (1 of 5 suite runs):
Flower's ``run_api`` shut Ray down while a worker thread still waited in ``ray.get``. These tests drive the
adapter with stand-ins for Flower's worker and backend (no Ray): a worker that waits until its actor is
killed, as a thread in ``ray.get`` does; tests/test_leftovers.py interrupts a real run.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest
from flwr.server.superlink.fleet.vce import vce_api
from flwr.server.superlink.fleet.vce.backend.raybackend import RayBackend

from pfxab_flower.flower_shared import flower_internals
from pfxab_flower.simulations.flower import interrupted_backend
from pfxab_flower.simulations.flower.interrupted_backend import leave_ray, workers_leave_before_shutdown
from pfxab_flower.simulations.flower.simulation_environment import logger_settings


class Pool:
    """Flower's actor pool as the adapter reads it: idle actors, and the actors of running tasks."""

    def __init__(self) -> None:
        self.pool = ["idle actor"]
        self._future_to_actor = {"future": "busy actor"}


class Backend:
    def __init__(self) -> None:
        self.pool = Pool()


def _run_until_terminated(monkeypatch: pytest.MonkeyPatch, interrupted: bool) -> tuple[list[list[bool]], list[str]]:
    """Two workers waiting on their actors; the backend terminated from a ``finally`` (as Flower's ``run_api`` does),
    with an interrupt unwinding or not. Whether each worker was still running at termination, and what was killed."""
    actors_killed = threading.Event()
    alive_at_termination: list[list[bool]] = []
    killed: list[str] = []
    threads: list[threading.Thread] = []
    monkeypatch.setattr(vce_api, "worker", lambda started: (started.release(), actors_killed.wait(10)))
    monkeypatch.setattr(RayBackend, "terminate",
                        lambda backend: alive_at_termination.append([t.is_alive() for t in threads]))

    def kill(backend: Backend) -> None:
        time.sleep(0.2)  # an actor's death takes Ray a moment to report
        killed.extend(flower_internals.backend_actors(backend))
        actors_killed.set()

    monkeypatch.setattr(interrupted_backend, "kill_actors", kill)
    started = threading.Semaphore(0)
    with workers_leave_before_shutdown():
        threads += [threading.Thread(target=vce_api.worker, args=(started,)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for _ in threads:
            assert started.acquire(timeout=10)
        try:
            try:
                if interrupted:
                    raise KeyboardInterrupt
            finally:
                RayBackend.terminate(Backend())  # type: ignore[arg-type]
        except KeyboardInterrupt:
            pass
    actors_killed.set()
    for thread in threads:
        thread.join()
    return alive_at_termination, killed


def test_an_interrupt_kills_the_actors_and_terminates_the_backend_only_after_the_workers_left(
        monkeypatch: pytest.MonkeyPatch) -> None:
    alive_at_termination, killed = _run_until_terminated(monkeypatch, interrupted=True)
    assert alive_at_termination == [[False, False]] and killed == ["idle actor", "busy actor"]


def test_a_run_that_ends_without_an_interrupt_terminates_as_flower_wrote_it(monkeypatch: pytest.MonkeyPatch) -> None:
    alive_at_termination, killed = _run_until_terminated(monkeypatch, interrupted=False)
    assert alive_at_termination == [[True, True]] and killed == []


def test_flower_and_the_phase_log_are_quiet_from_the_interrupt_to_the_simulations_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RayBackend, "terminate", lambda backend: None)
    monkeypatch.setattr(interrupted_backend, "kill_actors", lambda backend: None)
    flowers = (vce_api.worker, RayBackend.terminate)
    loggers = [logging.getLogger(name) for name in interrupted_backend.SILENCED_LOGGERS]
    before = [logger.level for logger in loggers]
    with workers_leave_before_shutdown():
        with pytest.raises(KeyboardInterrupt):
            try:
                raise KeyboardInterrupt
            finally:
                RayBackend.terminate(Backend())  # type: ignore[arg-type]
        assert [logger.isEnabledFor(logging.CRITICAL) for logger in loggers] == [False, False]
    assert [logger.level for logger in loggers] == before
    assert (vce_api.worker, RayBackend.terminate) == flowers  # Flower's own functions back after the block


def test_a_worker_that_does_not_leave_holds_the_interrupt_up_only_for_the_wait() -> None:
    never = threading.Event()
    stuck = threading.Thread(target=never.wait, name="stuck", daemon=True)
    stuck.start()
    started = time.monotonic()
    assert leave_ray(lambda: None, [stuck], wait=0.3) == ["stuck"]
    assert 0.3 <= time.monotonic() - started < 5
    never.set()


def test_a_ray_that_cannot_kill_still_gets_the_wait() -> None:
    def refuse() -> None:
        raise RuntimeError("Ray is gone")

    done = threading.Thread(target=lambda: None)
    done.start()
    assert leave_ray(refuse, [done], wait=5) == []


def test_logger_settings_hold_for_the_block_and_are_undone_however_it_ends() -> None:
    """A run's logger changes (Flower at WARNING through its filters; silence after an interrupt) never outlive it."""
    logger = logging.getLogger("pfxab-test-logger-settings")
    logger.setLevel(logging.DEBUG)
    dropped: list[str] = []

    def drop(record: logging.LogRecord) -> bool:
        dropped.append(record.getMessage())
        return False

    with pytest.raises(RuntimeError), logger_settings([logger.name], logging.WARNING, [drop]):
        assert logger.level == logging.WARNING and logger.filters == [drop]
        logger.warning("filtered")
        raise RuntimeError("the run failed")
    assert logger.level == logging.DEBUG and logger.filters == [] and dropped == ["filtered"]
