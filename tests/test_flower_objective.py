"""A user's own objective callables plug into both Flower APIs and give the in-process engine's numbers.

``objective_client_app`` (Message API) and ``legacy_client_app`` over ``objective_sessions``
(legacy API) build each node's environment from ``objective(points, partition_id)`` alone;
the server's strategy, given the same callables as a federation, scores the run. For one
seed the regret, final nodes and final points equal :func:`pfxab_flower.running.engine.run`'s, so a
node sees exactly the rewards (and noise) the in-process client of the same index sees.
"""

from __future__ import annotations

import numpy as np
import pytest

from pfxab_flower.client_apps import objective_client_app, objective_sessions
from pfxab_flower.problems.federation import Federation
from pfxab_flower.running import engine
from pfxab_flower.schema.catalogue import ALGORITHMS
from pfxab_flower.strategies import LEGACY_STRATEGIES, STRATEGIES
from tests.conftest import cheap_horizon, cheap_options
from tests.flower_loopback import run_loopback as run_legacy
from tests.message_loopback import LoopbackGrid, run_loopback

CENTRES = (0.2, 0.5, 0.8)
DOMAIN = {"x": (0.0, 1.0)}
RUN = {"alpha": 0.9, "horizon": 20_000, "seed": 1}


def cheap_run(algorithm: str) -> dict:
    """:data:`RUN` with tests/conftest.py's cheap horizon and trials for ``algorithm`` (an Optuna study's cost)."""
    return {**RUN, "horizon": cheap_horizon(algorithm, len(CENTRES), RUN["horizon"]), **cheap_options(algorithm)}


def objective(points: np.ndarray, partition_id: int) -> np.ndarray:
    """A tent per client, peaked at its centre (what a user writes: points in, values out)."""
    return 1.0 - np.abs(points[:, 0] - CENTRES[partition_id])


def federation() -> Federation:
    objectives = [lambda x, m=m: objective(x, m) for m in range(len(CENTRES))]
    return Federation.from_callables(objectives, DOMAIN, noise_sigma=0.1)


def check_same(flower, inprocess) -> None:
    for key in ("regret", "final_nodes", "final_points", "phases", "values_down", "values_up", "rejected_replies"):
        assert flower.summary[key] == inprocess.summary[key], key
    assert flower.phases.equals(inprocess.phases)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_objective_client_app_matches_the_inprocess_engine(algorithm: str) -> None:
    fed = federation()
    run = cheap_run(algorithm)
    strategy = STRATEGIES[algorithm](num_clients=len(CENTRES), federation=fed, **run)
    grid = LoopbackGrid(len(CENTRES), objective_client_app(objective, DOMAIN, noise_sigma=0.1))
    result = run_loopback(strategy, grid)
    inprocess = engine.run(fed, algorithm=algorithm, **run)
    check_same(strategy.run_result(), inprocess)
    np.testing.assert_array_equal(result.arrays["final-points"].numpy(), np.array(inprocess.summary["final_points"]))
    assert strategy.driver.machine.rejected == []


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_objective_sessions_on_the_legacy_api_match_the_inprocess_engine(algorithm: str) -> None:
    fed = federation()
    run = cheap_run(algorithm)
    strategy = LEGACY_STRATEGIES[algorithm](num_clients=len(CENTRES), federation=fed, **run)
    run_legacy(strategy, objective_sessions(objective, DOMAIN, noise_sigma=0.1), len(CENTRES))
    check_same(strategy.run_result(), engine.run(fed, algorithm=algorithm, **run))


def test_clients_optimising_another_objective_give_another_run() -> None:
    """The comparisons above can fail: nodes that ignore their partition-id end elsewhere than the engine's clients."""
    fed = federation()
    strategy = STRATEGIES["pf-xab"](num_clients=len(CENTRES), federation=fed, **RUN)
    app = objective_client_app(lambda points, _: objective(points, 0), DOMAIN, noise_sigma=0.1)
    run_loopback(strategy, LoopbackGrid(len(CENTRES), app))
    assert strategy.run_result().summary["final_nodes"] != engine.run(fed, **RUN).summary["final_nodes"]
