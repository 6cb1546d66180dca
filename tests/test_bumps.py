"""The smooth family (``bumps``, ``bumps-2d``, ``-3d``, ``-5d``): smooth peaks, values in [0, 1], exact optima."""

from __future__ import annotations

import numpy as np
import pytest

from pfxab_flower.problems.bumps import bumps_federation
from pfxab_flower.problems.optimum import maximise_personalised
from pfxab_flower.running.engine import run_config
from pfxab_flower.schema.run_config import RunConfig


@pytest.mark.parametrize(("dimension", "alpha"), [(1, 0.1), (2, 0.5), (3, 0.9), (5, 0.5)])
def test_the_optimum_on_the_diagonal_is_at_least_the_general_search_and_no_sampled_point_beats_it(
        dimension, alpha) -> None:
    federation = bumps_federation(dimension, num_clients=4)
    optimum = federation.optimum(alpha)
    assert optimum.points.shape == (4, dimension) and not optimum.estimated
    searched = maximise_personalised(federation, alpha)  # the grid and local refinement every user problem gets
    assert np.all(optimum.values >= searched.values - 1e-12)

    def personalised(points: np.ndarray) -> np.ndarray:
        local = federation.local_values(points)
        return alpha * local + (1 - alpha) * local.mean(axis=0)

    np.testing.assert_allclose(np.diag(personalised(optimum.points)), optimum.values, rtol=0, atol=1e-12)
    sample = np.random.default_rng(dimension).random((100_000, dimension))
    assert np.all(personalised(sample).max(axis=1) <= optimum.values + 1e-12)


def test_values_lie_in_zero_one_and_each_client_is_its_two_bumps_shifted() -> None:
    federation = bumps_federation(3, num_clients=5, spread=0.2)
    points = np.random.default_rng(0).random((1000, 3))
    values = federation.local_values(points)
    assert values.shape == (5, 1000) and values.min() >= 0 and values.max() <= 1
    shift = 0.2 * (0 / 4 - 0.5)  # client 0's
    x = points + 0.0
    expected = (0.55 * np.exp(-((x - 0.35 - shift) ** 2).sum(axis=1) / (2 * 0.2**2))
                + 0.45 * np.exp(-((x - 0.65 - shift) ** 2).sum(axis=1) / (2 * 0.08**2)))
    np.testing.assert_allclose(federation.evaluate(0, points), expected, rtol=0, atol=1e-15)
    # smooth at its peak: the objective falls quadratically, not as a cusp's square root
    peak = np.full((1, 3), 0.35 + shift)
    drops = [float(federation.evaluate(0, peak)[0] - federation.evaluate(0, peak + h)[0]) for h in (1e-2, 1e-3)]
    assert 80 < drops[0] / drops[1] < 120


@pytest.mark.parametrize("problem", ["bumps", "bumps-2d", "bumps-3d", "bumps-5d"])
def test_each_registered_smooth_problem_runs_and_repeats_its_numbers(problem) -> None:
    config = RunConfig(problem=problem, num_clients=3, horizon=20_000, seed=1, algorithm="random-search")
    summary = run_config(config).summary
    assert np.isfinite(summary["regret"]) and summary["regret"] > 0
    assert run_config(config).summary["regret"] == summary["regret"]
