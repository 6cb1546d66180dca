"""The shifted problems: Garland and DoubleSine translated by a random vector drawn from the run's seed.

Their optimum is the unshifted one moved by the translation, of the same value, checked against a brute
force on a grid; a run's regret on them is still exact (recomputed from the federation's own values), and
every entry point that builds a federation from a run gives each seed its own translation.
"""

from __future__ import annotations

import numpy as np
import pytest

from pfxab_flower import RunConfig, compare, run_config
from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.phased import Settings
from pfxab_flower.problems import build_federation, problem, problem_names
from pfxab_flower.problems.separable import separable_federation
from pfxab_flower.problems.synthetic import synthetic_federation
from pfxab_flower.problems.translated import translation
from pfxab_flower.running.engine import simulate
from pfxab_flower.running.parallel import federation_key, shared_federation
from pfxab_flower.schema.spec import AlgorithmSpec

SHIFTED = [name for name in problem_names() if "-shifted" in name]


def unshifted(name: str, dimension: int, clients: int):
    return synthetic_federation(name, clients) if dimension == 1 else separable_federation(name, dimension, clients)


def test_every_family_and_dimension_is_registered_with_its_dimension() -> None:
    assert [f"{family}-shifted{suffix}" for family in ("garland", "doublesine")
                       for suffix in ("", "-2d", "-3d", "-5d")] == SHIFTED
    for name in SHIFTED:
        registered = problem(name)
        assert registered.seeded and registered.dimension == build_federation(RunConfig(problem=name)).domain.ndim


@pytest.mark.parametrize("name", SHIFTED)
def test_the_objectives_are_the_unshifted_ones_translated_by_the_seeds_vector(name: str) -> None:
    family, dimension = name.split("-")[0], problem(name).dimension
    assert dimension is not None
    base = unshifted(family, dimension, 4)
    points = np.random.default_rng(0).random((200, dimension))
    for seed in (0, 7):
        moved = build_federation(RunConfig(problem=name, num_clients=4, seed=seed))
        t = translation(seed, dimension)
        np.testing.assert_allclose(moved.local_values(np.mod(points + t, 1.0)), base.local_values(points),
                                   rtol=0, atol=1e-6)  # Garland's cusps turn 1e-16 of rounding into 1e-8
        assert moved.name == name and moved.optimum_is_estimate is False


@pytest.mark.parametrize("name", ["garland-shifted", "doublesine-shifted", "garland-shifted-2d"])
def test_the_optimum_moved_off_the_centre_and_kept_its_value(name: str) -> None:
    dimension, alpha = problem(name).dimension, 0.5
    assert dimension is not None
    base = unshifted(name.split("-")[0], dimension, 5).optimum(alpha)
    points = []
    for seed in range(5):
        federation = build_federation(RunConfig(problem=name, num_clients=5, seed=seed))
        optimum = federation.optimum(alpha)
        t = translation(seed, dimension)
        np.testing.assert_array_equal(optimum.values, base.values)
        np.testing.assert_allclose(optimum.points, np.mod(base.points + t, 1.0), rtol=0, atol=1e-15)
        # a brute force: nothing on a fine grid beats the optimum, and the optimum's own value is its value
        grid = (np.arange(4096) + 0.5) / 4096 if dimension == 1 else (np.arange(64) + 0.5) / 64
        mesh = np.stack(np.meshgrid(*[grid] * dimension, indexing="ij"), axis=-1).reshape(-1, dimension)
        local = federation.local_values(mesh)
        personalised = alpha * local + (1 - alpha) * local.mean(axis=0)
        assert (personalised.max(axis=1) <= optimum.values + 1e-9).all()
        at = federation.local_values(optimum.points)
        np.testing.assert_allclose(alpha * np.diag(at) + (1 - alpha) * at.mean(axis=0), optimum.values, atol=1e-6)
        points.append(optimum.points)
    spread = np.ptp(np.array(points)[:, 0, :], axis=0)
    assert (spread > 0.3).all(), "five seeds put client 0's optimum in five places"
    assert (np.abs(np.array(points) - 0.5).max(axis=2) > 0.05).mean() > 0.5  # mostly off the centre


@pytest.mark.parametrize("algorithm", ["pf-xab", "random-search"])
def test_a_runs_regret_on_a_shifted_problem_is_exact(algorithm: str) -> None:
    """Recomputed from each client's pull log and the federation's own values and optimum."""
    config = RunConfig(problem="doublesine-shifted-2d", algorithm=algorithm, num_clients=3, alpha=0.3, horizon=20_000,
                       seed=4)
    federation = build_federation(config)
    spec = AlgorithmSpec.from_config(config, federation.reward_range, federation.domain.ndim)
    sim = simulate(federation, make_policy(algorithm), Settings(spec))
    summary = sim.driver.result("inprocess").summary
    assert summary["regret"] == run_config(config).summary["regret"]  # the run's own numbers
    optimum, total = federation.optimum(0.3).values, 0.0
    for m, env in enumerate(sim.envs):
        local = federation.local_values(federation.partition.midpoints(env.log.node_ids))
        personalised = 0.3 * local[m] + 0.7 * local.mean(axis=0)
        total += float(env.log.counts.astype(float) @ (optimum[m] - personalised))
    assert summary["regret"] == pytest.approx(total, rel=1e-12)
    final = federation.local_values(np.array(summary["final_points"]))
    simple = optimum - (0.3 * np.diag(final) + 0.7 * final.mean(axis=0))
    np.testing.assert_allclose(summary["simple_regret_per_client"], simple, rtol=0, atol=1e-15)


def test_each_seed_is_its_own_federation_wherever_runs_share_federations() -> None:
    one, other = RunConfig(problem="garland-shifted", seed=1), RunConfig(problem="garland-shifted", seed=2)
    assert federation_key(one) != federation_key(other)
    assert federation_key(one) == federation_key(one.replace(alpha=0.9, algorithm="pf-sh"))
    assert shared_federation(one).optimum(0.5).points[0, 0] != shared_federation(other).optimum(0.5).points[0, 0]
    plain = RunConfig(problem="garland", seed=1)
    assert federation_key(plain) == federation_key(plain.replace(seed=2))  # the others still share one
    comparison = compare(RunConfig(problem="garland-shifted", num_clients=3, horizon=5_000), ["random-search"],
                         seeds=[1, 2], progress=False)
    for seed in (1, 2):  # each seed's run on its own translation, as a run of that seed alone
        alone = run_config(RunConfig(problem="garland-shifted", num_clients=3, horizon=5_000, seed=seed,
                                     algorithm="random-search"))
        row = comparison.runs[comparison.runs["seed"] == seed].iloc[0]
        assert row["regret"] == alone.summary["regret"] and row["simple_regret"] == alone.summary["simple_regret"]


def test_a_flower_client_builds_the_shifted_problem_of_the_run_configs_seed() -> None:
    from pfxab_flower.client_apps.sessions import problem_of

    config, _ = problem_of({"problem": "garland-shifted-2d", "num-clients": 3, "seed": 6, "alpha": 0.2})
    np.testing.assert_array_equal(build_federation(config).optimum(0.5).points,
                                  build_federation(RunConfig(problem="garland-shifted-2d", num_clients=3,
                                                             seed=6)).optimum(0.5).points)
