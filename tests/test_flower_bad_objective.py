"""A user objective that returns NaN, inf, a wrong shape or raises: one clear line through Flower.

The failing client is a failed client (a dropout): one log line names the phase, the
client and the point; with ``min-fraction = 1`` the run stops with that line instead.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

from pfxab_flower.client_apps import objective_sessions
from pfxab_flower.errors import RunStoppedError
from pfxab_flower.problems.federation import Federation
from pfxab_flower.run_parameters import AppOptions, RunConfig
from pfxab_flower.strategies import PFXABStrategy
from pfxab_flower.strategies.common import failure_reason
from tests.flower_loopback import run_loopback

DOMAIN = {"x": (0.0, 1.0)}


def good(points: np.ndarray) -> np.ndarray:
    return 1.0 - np.abs(points[:, 0] - 0.3)


def broken(kind: str):
    def objective(points: np.ndarray) -> np.ndarray:
        values = good(points)
        if kind == "raises":
            raise ZeroDivisionError("model diverged")
        if kind == "shape":
            return values[:-1]
        values[0] = {"nan": np.nan, "inf": np.inf}[kind]
        return values

    return objective


EXPECTED = {
    "nan": r"objective of client 1 returned nan at point \{x=",
    "inf": r"objective of client 1 returned inf at point \{x=",
    "shape": r"objective of client 1 returned shape \(\d+,\) for \d+ points",
    "raises": r"objective of client 1 raised ZeroDivisionError",
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_a_broken_objective_is_one_line_naming_the_client_and_the_point(kind: str, caplog) -> None:
    objectives = [good, broken(kind), good, good]
    sessions = objective_sessions(lambda points, m: objectives[m](points), DOMAIN)
    strategy = PFXABStrategy(num_clients=4, horizon=5_000, seed=0)
    with caplog.at_level(logging.WARNING, logger="pfxab_flower"):
        run_loopback(strategy, sessions, 4)
    lines = [r.getMessage() for r in caplog.records if "sent no usable local-means reply" in r.getMessage()]
    assert lines and all("\n" not in line for line in lines)
    assert all(re.search(EXPECTED[kind], line) for line in lines), lines
    # client 1 fails each exploration, then rejoins for the elimination (it has no local means: it keeps all)
    machine = strategy.driver.machine
    assert strategy.driver.finished and [row["failed_local_means"] for row in machine.history] == [1, 1]
    assert machine.failures == machine.completed == 2
    # a quorum of every client turns the same failure into a stop, with the same line
    strategy = PFXABStrategy(num_clients=4, horizon=5_000, seed=0, min_fraction=1.0)
    run_loopback(strategy, sessions, 4)
    assert not strategy.driver.finished and strategy.stop_reason is not None
    assert "only 3 of 4 clients" in strategy.stop_reason
    assert re.search(EXPECTED[kind], strategy.stop_reason)


def test_failure_reason_unwraps_flowers_client_app_exception() -> None:
    wrapped = RuntimeError("<class 'ray.exceptions.RayTaskError(ClientAppException)'>:<'ray::ClientAppActor.run()\n"
                           "Traceback ...\nException ClientAppException occurred. Message: objective of client 2 "
                           "returned nan at point {x=0.5}; allowed: finite values'>). It originated ...")
    assert failure_reason(wrapped) == "objective of client 2 returned nan at point {x=0.5}; allowed: finite values"
    assert failure_reason(ValueError("plain\nmessage")) == "plain message"


@pytest.mark.ray
@pytest.mark.timeout(120)
def test_a_broken_objective_on_ray_stops_the_run_with_one_line(capfd) -> None:
    from pfxab_flower.simulations.run_flower import run_flower

    objectives = [good, broken("nan"), good]
    federation = Federation.from_callables(objectives, DOMAIN, noise_sigma=0.1)
    config = RunConfig(clients=3, horizon=5_000, seed=0)
    sessions = objective_sessions(lambda points, m: objectives[m](points), DOMAIN)
    with pytest.raises(RunStoppedError, match=r"only 2 of 3 clients.*objective of client 1 returned nan at point"):
        run_flower(federation, config, session_fn=sessions,
                   options=AppOptions(round_timeout=60.0, min_fraction=1.0, api="legacy"))
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert "objective of client 1 returned nan" in err
