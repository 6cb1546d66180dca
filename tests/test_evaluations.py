"""Evaluations next to pulls: what a tuning run costs a practitioner, and deterministic objectives (noise none)."""

from __future__ import annotations

import numpy as np
import pytest

from pfxab_flower.algorithms import make_policy
from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.errors import ConfigError
from pfxab_flower.problems.federation import Federation
from pfxab_flower.running.engine import make_settings, run, run_config, simulate
from pfxab_flower.schema.run_config import RunConfig

CENTRES = (0.2, 0.5, 0.7)


class CountingObjective:
    """A user's black box that records every point it is asked for (one call per point of a batch)."""

    def __init__(self, centre: float) -> None:
        self.centre = centre
        self.points: list[float] = []

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.points.extend(x[:, 0].tolist())
        return 1.0 - np.abs(x[:, 0] - self.centre)


def _federation(noise: str) -> tuple[Federation, list[CountingObjective]]:
    objectives = [CountingObjective(c) for c in CENTRES]
    return Federation.from_callables(objectives, {"x": (0.0, 1.0)}, noise=noise, noise_sigma=0.1), objectives


def _simulated(noise: str, horizon: int = 50_000, seed: int = 0):
    federation, objectives = _federation(noise)
    settings = make_settings(len(CENTRES), alpha=0.5, horizon=horizon, seed=seed)
    # report_pulls=False: no regret oracle, so every call the objectives see came from a client's pulls
    sim = simulate(federation, make_policy("pf-xab"), settings, report_pulls=False)
    return sim, objectives


@pytest.mark.parametrize("noise", ["none", "uniform", "gaussian"])
def test_evaluations_equal_the_black_boxs_calls(noise):
    sim, objectives = _simulated(noise)
    for env, objective in zip(sim.envs, objectives, strict=True):
        assert env.evaluations == len(objective.points) > 0
        assert env.evaluations < env.log.total  # far fewer evaluations than pulls


def test_a_deterministic_objective_is_called_once_per_distinct_point():
    sim, objectives = _simulated("none")
    for env, objective in zip(sim.envs, objectives, strict=True):
        assert len(set(objective.points)) == len(objective.points)
        pulled = env.partition.midpoints(np.unique(env.log.node_ids))[:, 0]
        assert set(pulled.tolist()) <= set(objective.points)


def test_noisy_pulls_evaluate_every_time_deterministic_ones_reuse():
    _, noisy = _simulated("uniform", horizon=200_000)
    _, none = _simulated("none", horizon=200_000)
    assert sum(len(o.points) for o in noisy) > sum(len(o.points) for o in none)
    assert [len(o.points) for o in none] == [len(set(o.points)) for o in noisy]


def test_the_result_reports_evaluations_per_client_and_in_total():
    federation, _ = _federation("none")
    result = run(federation, alpha=0.5, horizon=50_000, seed=0)
    _, objectives = _simulated("none")
    per_client = [len(o.points) for o in objectives]
    assert result.summary["evaluations_per_client"] == per_client
    assert result.summary["evaluations"] == sum(per_client)
    assert result.clients["evaluations"].tolist() == per_client


def test_noise_none_makes_the_run_independent_of_the_seed():
    base = RunConfig(problem="garland", num_clients=3, horizon=50_000, noise="none")
    first, second = (run_config(base.replace(seed=s)).summary for s in (0, 1))
    assert first["regret"] == second["regret"] and first["evaluations"] == second["evaluations"]
    noisy = [run_config(base.replace(noise="uniform", noise_sigma=1.0, seed=s)).summary["regret"] for s in (0, 1, 2)]
    assert len(set(noisy)) > 1  # the seed matters once there is noise


def test_noise_none_rewards_are_the_means_whatever_sigma():
    means, counts = np.array([0.1, 0.7]), np.array([3, 5])
    sums = NoiseModel("none", 0.5).sample_sums(means, counts, np.random.default_rng(0))
    np.testing.assert_array_equal(sums, counts * means)
    with pytest.raises(ConfigError, match=r"allowed: .*none"):
        RunConfig(noise="silent")


def test_wall_seconds_covers_building_the_federation():
    summary = run_config(RunConfig(problem="garland", num_clients=3, horizon=20_000)).summary
    assert summary["setup_seconds"] > 0 and summary["run_seconds"] > 0
    assert summary["scoring_seconds"] > 0
    assert summary["wall_seconds"] == pytest.approx(summary["setup_seconds"] + summary["run_seconds"]
                                                    + summary["scoring_seconds"])


def test_the_memo_survives_a_wire_that_carries_only_int64():
    from pfxab_flower.problems.sampling import SimulatedEnvironment

    federation, objectives = _federation("none")
    env = SimulatedEnvironment(federation, 0)
    env.pull(np.array([2, 3, 5]), np.array([1, 1, 1]), np.random.default_rng(0))
    wire = {key: np.asarray(value, dtype="<i8") for key, value in env.export().items()}  # as strategies.serde does
    again = SimulatedEnvironment.restored(federation, 0, wire)
    assert again.memo == env.memo and again.evaluations == 3
    again.pull(np.array([3, 5, 6]), np.array([2, 2, 2]), np.random.default_rng(0))
    assert again.evaluations == 4 and len(objectives[0].points) == 4  # only node 6 was new
