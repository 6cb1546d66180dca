"""The d-dimensional Garland and DoubleSine: exact optima from the 1-D problem, and runs in every engine's core."""

from __future__ import annotations

import numpy as np
import pytest

from pfxab_flower.problems.separable import separable_federation
from pfxab_flower.problems.synthetic import synthetic_federation
from pfxab_flower.running.engine import run_config
from pfxab_flower.schema.run_config import RunConfig


@pytest.mark.parametrize(("name", "dimension", "alpha"), [("garland", 2, 0.5), ("doublesine", 3, 0.1),
                                                          ("garland", 5, 0.9)])
def test_the_optimum_is_the_1d_one_in_every_coordinate_and_no_point_beats_it(name, dimension, alpha) -> None:
    federation = separable_federation(name, dimension, num_clients=4)
    optimum = federation.optimum(alpha)
    line = synthetic_federation(name, 4).optimum(alpha)
    np.testing.assert_array_equal(optimum.values, line.values)
    assert optimum.points.shape == (4, dimension) and not optimum.estimated

    def personalised(points: np.ndarray) -> np.ndarray:
        local = federation.local_values(points)
        return alpha * local + (1 - alpha) * local.mean(axis=0)

    at_optimum = personalised(optimum.points)  # (client, point): each client at its own optimum
    np.testing.assert_allclose(np.diag(at_optimum), optimum.values, rtol=0, atol=1e-12)
    sample = np.random.default_rng(0).random((200_000, dimension))
    assert np.all(personalised(sample).max(axis=1) <= optimum.values + 1e-12)


def test_each_client_is_the_mean_of_its_1d_objective_over_the_coordinates() -> None:
    federation = separable_federation("doublesine", 3, num_clients=5, spread=0.2)
    line = synthetic_federation("doublesine", 5, spread=0.2)
    points = np.random.default_rng(1).random((50, 3))
    expected = np.mean([line.local_values(points[:, [i]]) for i in range(3)], axis=0)
    np.testing.assert_allclose(federation.local_values(points), expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.stack([federation.evaluate(m, points) for m in range(5)]), expected,
                               rtol=0, atol=1e-15)


def test_a_registered_d_dimensional_problem_runs_and_repeats_its_numbers() -> None:
    config = RunConfig(problem="garland-3d", num_clients=3, horizon=20_000, seed=2)
    summary = run_config(config).summary
    assert summary["dimensions"] == ["x1", "x2", "x3"] and len(summary["final_points"][0]) == 3
    assert np.isfinite(summary["regret"]) and summary["regret"] > 0
    assert run_config(config).summary["regret"] == summary["regret"]
