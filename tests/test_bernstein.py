"""The ``bernstein`` confidence option: valid widths, exact variances, the same messages otherwise.

The coverage test draws many phases of noisy pulls with the very functions the
bound uses (``NoiseModel.sample_sums_and_deviations``, ``bernstein.width``,
``bernstein.global_widths``, ``bernstein.personalised_widths``) and checks that each bound
used for elimination (local, global, personalised) covers the true mean at least at its
nominal rate. To make misses visible it uses a large ``delta`` (0.05); the same test
shows a width without the range term fails it, so it can fail.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest

from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.bounds import Bernstein, bernstein
from pfxab_flower.algorithms.messages import LocalReport
from pfxab_flower.algorithms.phased import ClientView, ServerMachine
from pfxab_flower.algorithms.registry import federated_names, policy_class
from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.errors import ConfigError
from pfxab_flower.problems import build_federation
from pfxab_flower.running import engine
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.schema.spec import AlgorithmSpec
from pfxab_flower.strategies import PFXAB as MessagePFXAB  # noqa: N811 (Flower's naming)
from tests.conftest import cheap_horizon

DELTA = 0.05
TRIALS = 4000
M = 8
NOISES = [("uniform", 0.1), ("gaussian", 0.1), ("bernoulli", 0.0), ("none", 0.0), ("uniform", 0.4)]


def draw_phase(noise: NoiseModel, counts: np.ndarray, rng: np.random.Generator, trials: int = TRIALS):
    """``trials`` independent phases of ``M`` clients pulling one node ``counts[m]`` times each.

    Returns the true local means ``(trials, M)``, the local means and the sample variances.
    """
    true = rng.uniform(0.05, 0.95, size=(trials, M))
    n = np.broadcast_to(counts, (trials, M)).reshape(-1)
    sums, deviations = noise.sample_sums_and_deviations(true.reshape(-1), n, rng)
    span = np.subtract(*noise.reward_range((0.0, 1.0))[::-1])
    means = (sums / n).reshape(trials, M)
    variances = bernstein.sample_variances(deviations, n, span).reshape(trials, M)
    return true, means, variances, span


def miss_rate_bound(delta: float, trials: int) -> float:
    """``delta`` plus three binomial standard errors: a valid bound's miss rate stays below it."""
    return delta + 3.0 * math.sqrt(delta * (1 - delta) / trials)


@pytest.mark.parametrize(("kind", "sigma"), NOISES)
@pytest.mark.parametrize("pulls", [3, 30, 400])
def test_every_bound_used_for_elimination_covers_the_true_mean_at_its_nominal_rate(kind, sigma, pulls) -> None:
    rng = np.random.default_rng([7, pulls, NOISES.index((kind, sigma))])
    noise = NoiseModel(kind, sigma)
    counts = np.full(M, pulls)
    counts[0] = 3 * pulls  # client 0 also explores the node locally (PF-XAB's own node)
    true, means, variances, span = draw_phase(noise, counts, rng)
    L = math.log(3.0 / DELTA)

    local_width = bernstein.width(variances[:, 0], counts[0], span, L)
    local_miss = np.abs(means[:, 0] - true[:, 0]) > local_width

    global_mean, global_true = means.mean(axis=1), true.mean(axis=1)
    global_width = bernstein.global_widths(variances.mean(axis=1), np.full(TRIALS, M), pulls, span, L)
    global_miss = np.abs(global_mean - global_true) > global_width

    misses = {"local": local_miss.mean(), "global": global_miss.mean()}
    # what the runs use: the smaller of Bernstein's and Hoeffding's width, each at DELTA / 2
    half_b, half_h = math.log(6.0 / DELTA), math.log(4.0 / DELTA)
    smaller_local = np.minimum(bernstein.width(variances[:, 0], counts[0], span, half_b),
                               bernstein.hoeffding_width(1.0 / counts[0], span, half_h))
    misses["smaller local"] = (np.abs(means[:, 0] - true[:, 0]) > smaller_local).mean()
    smaller_global = np.minimum(
        bernstein.global_widths(variances.mean(axis=1), np.full(TRIALS, M), pulls, span, half_b),
        bernstein.hoeffding_width(1.0 / (M * pulls), span, half_h))
    misses["smaller global"] = (np.abs(global_mean - global_true) > smaller_global).mean()
    for alpha in (0.1, 0.5, 0.9):
        holders, own = np.full(TRIALS, M), np.full(TRIALS, counts[0])
        pooled = variances.mean(axis=1)
        personalised_width = bernstein.personalised_widths(alpha, pooled, holders, own, pulls, span, L)
        estimate = alpha * means[:, 0] + (1 - alpha) * global_mean
        target = alpha * true[:, 0] + (1 - alpha) * global_true
        misses[f"personalised {alpha}"] = (np.abs(estimate - target) > personalised_width).mean()
        spread, _ = bernstein.personalised_weights(alpha, holders, own, pulls)
        smaller = np.minimum(bernstein.personalised_widths(alpha, variances.mean(axis=1), holders, own, pulls, span,
                                                           half_b), bernstein.hoeffding_width(spread, span, half_h))
        misses[f"smaller personalised {alpha}"] = (np.abs(estimate - target) > smaller).mean()
    assert max(misses.values()) <= miss_rate_bound(DELTA, TRIALS), misses


def test_the_bound_gives_the_machines_the_widths_of_these_functions() -> None:
    """``Bernstein``'s widths are the functions above at the run's ``L``; a node nobody else reported keeps
    its local width."""
    settings = engine.make_settings(4, alpha=0.3, horizon=5000, seed=0, reward_range=(-0.1, 1.1),
                                    confidence="bernstein")
    L, span = bernstein.log_term(5000), settings.reward_span
    own, pooled, counts = np.array([0.01, 0.04, 0.09]), np.array([0.02, 0.05, np.nan]), np.array([3000, 30, 12])
    view = ClientView(phase=2, node_ids=np.array([4, 5, 6]), local_means=np.array([0.2, 0.5, 0.7]),
                      local_counts=counts, global_means=np.array([0.3, 0.4, 0.7]),
                      server_eliminated=np.zeros(3, dtype=bool), own_statistics={"variance": own},
                      pooled_statistics={"variance": pooled}, holders=np.array([4.0, 3.0, 0.0]), min_count=12)
    bound, H = Bernstein(), bernstein.hoeffding_log_term(5000)
    local = np.minimum(bernstein.width(own, counts, span, L), bernstein.hoeffding_width(1.0 / counts, span, H))
    np.testing.assert_array_equal(bound.local_widths(settings, view), local)
    spread, _ = bernstein.personalised_weights(0.3, view.holders, counts, 12)
    personalised = np.minimum(bernstein.personalised_widths(0.3, pooled, view.holders, counts, 12, span, L),
                              bernstein.hoeffding_width(spread, span, H))
    np.testing.assert_array_equal(bound.personalised_widths(settings, view)[:2], personalised[:2])
    assert bound.personalised_widths(settings, view)[2] == local[2]  # holders 0: the local width
    global_ = np.minimum(bernstein.global_widths(pooled, view.holders, 12, span, L),
                         bernstein.hoeffding_width(1.0 / (view.holders * 12), span, H))
    np.testing.assert_array_equal(bound.global_widths(settings, 2, {"variance": pooled}, view.holders, 12), global_)
    # each of the two is the smaller somewhere here: the minimum is not one of them in disguise
    bernstein_local = bernstein.width(own, counts, span, L)
    assert np.any(local < bernstein_local) and np.any(local == bernstein_local)


@pytest.mark.parametrize("pulls", [3, 10])
def test_the_coverage_test_fails_a_width_without_its_range_term(pulls) -> None:
    """Bernoulli rewards of small means often show no variance at all: only the ``3 b L / n`` term covers them."""
    rng = np.random.default_rng(pulls)
    noise = NoiseModel("bernoulli", 0.0)
    true = np.full(TRIALS, 0.05)
    sums, deviations = noise.sample_sums_and_deviations(true, np.full(TRIALS, pulls), rng)
    variances = bernstein.sample_variances(deviations, np.full(TRIALS, pulls), 1.0)
    L = math.log(3.0 / DELTA)
    variance_only = np.sqrt(2 * variances * L / pulls)
    assert (np.abs(sums / pulls - true) > variance_only).mean() > 5 * miss_rate_bound(DELTA, TRIALS)
    assert (np.abs(sums / pulls - true) > bernstein.width(variances, pulls, 1.0, L)).mean() <= DELTA


def test_at_the_runs_delta_no_bound_misses() -> None:
    rng = np.random.default_rng(11)
    noise = NoiseModel("uniform", 0.1)
    counts = np.full(M, 50)
    true, means, variances, span = draw_phase(noise, counts, rng, trials=20_000)
    L = bernstein.log_term(2_000_000)
    assert math.isclose(L, math.log(3 / (2 * 2_000_000.0**-4 / 2)))
    assert not np.any(np.abs(means - true) > bernstein.width(variances, 50, span, L))


@pytest.mark.parametrize(("kind", "sigma", "variance"), [
    ("uniform", 0.3, 0.3**2 / 3), ("gaussian", 0.2, 0.2**2), ("bernoulli", 0.0, 0.3 * 0.7), ("none", 0.4, 0.0),
])
def test_sample_variances_are_drawn_exactly(kind, sigma, variance) -> None:
    rng = np.random.default_rng(3)
    noise = NoiseModel(kind, sigma)
    counts = np.full(20_000, 25)
    sums, deviations = noise.sample_sums_and_deviations(np.full(counts.size, 0.3), counts, rng)
    sample = bernstein.sample_variances(deviations, counts, 1.0)
    assert sample.mean() == pytest.approx(variance, rel=0.02, abs=1e-12)  # unbiased
    assert (sums / counts).mean() == pytest.approx(0.3, abs=0.002)
    assert np.all(deviations >= 0)


def test_uniform_sums_are_the_same_draws_with_or_without_the_deviations() -> None:
    noise = NoiseModel("uniform", 0.1)
    means, counts = np.array([0.2, 0.5, 0.9]), np.array([5, 0, 7])
    plain = noise.sample_sums(means, counts, np.random.default_rng(1))
    sums, deviations = noise.sample_sums_and_deviations(means, counts, np.random.default_rng(1))
    np.testing.assert_array_equal(plain, sums)
    assert deviations[1] == 0


def test_two_batches_combine_to_the_variance_of_all_pulls() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=7), rng.normal(2.0, size=11)
    combined_sum, combined = bernstein.combine_samples(
        (np.array([a.sum()]), np.array([b.sum()])),
        (np.array([((a - a.mean()) ** 2).sum()]), np.array([((b - b.mean()) ** 2).sum()])),
        (np.array([7]), np.array([11])))
    both = np.concatenate([a, b])
    assert combined_sum[0] == pytest.approx(both.sum())
    assert combined[0] == pytest.approx(((both - both.mean()) ** 2).sum())


def test_phase_lengths_reach_the_target_width() -> None:
    for variance in (0.0, 0.001, 0.25):
        n = bernstein.samples_for(0.01, variance, 1.2, 58.0)
        assert bernstein.width(variance, n, 1.2, 58.0) == pytest.approx(0.01)
        assert bernstein.width(variance, 0.99 * n, 1.2, 58.0) > 0.01
    n = bernstein.hoeffding_samples(0.01, 1.2, 57.0)
    assert bernstein.hoeffding_width(1.0 / n, 1.2, 57.0) == pytest.approx(0.01)


@pytest.mark.parametrize(("target", "variance", "smaller"), [(0.5, 0.25, "hoeffding"), (0.005, 0.01, "bernstein")])
def test_a_phase_is_designed_from_the_smaller_width(target, variance, smaller) -> None:
    """Coarse targets and large variances: Hoeffding's length; fine targets and small variances: Bernstein's."""
    settings = engine.make_settings(4, alpha=0.3, horizon=5000, seed=0, reward_range=(-0.1, 1.1),
                                    confidence="bernstein")
    phase = next(p for p in range(1, 40) if math.isclose(settings.schedule.smoothness(p), target, rel_tol=0.5))
    goal = settings.schedule.smoothness(phase)
    lengths = {"bernstein": bernstein.samples_for(goal, variance, 1.2, bernstein.log_term(5000)),
               "hoeffding": bernstein.hoeffding_samples(goal, 1.2, bernstein.hoeffding_log_term(5000))}
    assert lengths[smaller] < min(lengths.values()) * 1.000001 and lengths["bernstein"] != lengths["hoeffding"]
    assert Bernstein().samples(settings, phase, {"variance": variance}) == pytest.approx(lengths[smaller] / 4)


def run(algorithm: str, confidence: str, keep_messages: bool = False, noise: str = "uniform"):
    horizon = cheap_horizon(algorithm, 5, 200_000)
    config = RunConfig(problem="garland", algorithm=algorithm, num_clients=5, alpha=0.5, horizon=horizon, seed=1,
                       confidence=confidence, noise=noise)
    federation = build_federation(config)
    settings = engine.make_settings(5, algorithm=algorithm, alpha=0.5, horizon=horizon, seed=1,
                                    reward_range=federation.reward_range, confidence=confidence,
                                    dimensions=federation.domain.ndim)
    return engine.simulate(federation, make_policy(algorithm), settings, keep_messages=keep_messages)


@pytest.mark.parametrize("algorithm", federated_names())  # the baselines run no phase
def test_bernstein_sends_variances_up_and_widths_down_and_pulls_less_once_it_has_seen_the_noise(algorithm) -> None:
    quiet, plain = run(algorithm, "bernstein", keep_messages=True), run(algorithm, "hoeffding", keep_messages=True)
    for sim, bernstein_run in ((quiet, True), (plain, False)):
        for broadcast, replies in sim.messages:
            for reply in replies:
                if isinstance(reply, LocalReport):
                    assert list(reply.statistics) == (["variance"] if bernstein_run else [])
            if hasattr(broadcast, "holders"):
                assert list(broadcast.statistics) == (["variance"] if bernstein_run else [])
                assert (broadcast.holders is not None) == bernstein_run
            wire = broadcast.parameters.to_wire()
            assert ("param-confidence" in wire) == bernstein_run  # hoeffding: the very bytes of before
    if not policy_class(algorithm).refines_partition:  # pf-sh ranks its candidates: no width decides a pull
        return
    quiet_rows, plain_rows = quiet.driver.machine.history, plain.driver.machine.history
    per_node = [[row["global_pulls"] + row["local_pulls"] for row in rows] for rows in (quiet_rows, plain_rows)]
    ratios = [b / h for b, h in zip(*per_node, strict=False)]
    # Bernstein's pulls per node grow as 1 / width (its range term), Hoeffding's as 1 / width^2: from the first
    # phase designed on observed noise on, the ratio falls at every depth, and the deepest shared one is cheaper
    assert all(later < earlier for earlier, later in itertools.pairwise(ratios[1:])), ratios
    assert ratios[-1] < 1 and len(quiet_rows) >= len(plain_rows), ratios


def test_the_server_refuses_variances_that_do_not_fit_the_run() -> None:
    config = RunConfig(problem="garland", num_clients=3, horizon=50_000)
    federation = build_federation(config)
    for confidence in ("hoeffding", "bernstein"):
        settings = engine.make_settings(3, alpha=0.5, horizon=50_000, seed=0, reward_range=federation.reward_range,
                                        confidence=confidence, min_fraction=0.0)
        server = ServerMachine(make_policy("pf-xab"), settings)
        instruction = server.next_instruction()
        ids = instruction.node_ids
        counts = np.full(ids.size, instruction.global_pulls + instruction.local_pulls)
        means = np.full(ids.size, 0.5)
        report = functools.partial(LocalReport, 0, ids, means, counts)
        if confidence == "hoeffding":
            assert "confidence is hoeffding" in server.check_report(report({"variance": np.zeros(ids.size)}), set())
            assert server.check_report(report(), set()) is None
            continue
        assert "no variance sent" in server.check_report(report(), set())
        assert f"are not {ids.size} numbers" in server.check_report(report({"variance": np.zeros(ids.size - 1)}), set())
        too_large = np.full(ids.size, 1.2**2)  # the span of [-0.1, 1.1] allows at most 0.36 (n large)
        assert "variances are not in" in server.check_report(report({"variance": too_large}), set())
        assert "confidence is bernstein" in server.check_report(
            report({"variance": np.full(ids.size, 0.01), "spread": np.zeros(ids.size)}), set())
        assert server.check_report(report({"variance": np.full(ids.size, 0.01)}), set()) is None


def test_bernstein_needs_a_reward_range() -> None:
    with pytest.raises(ConfigError, match=r"^reward_range=\(-2000000000.0, 2000000000.0\) is invalid with "
                                          r"confidence='bernstein'; allowed: the range"):
        MessagePFXAB(num_clients=3, horizon=1000, confidence="bernstein")
    with pytest.raises(ConfigError, match=r"^confidence='wald' is invalid; allowed: hoeffding, bernstein$"):
        MessagePFXAB(num_clients=3, horizon=1000, confidence="wald", reward_range=(0, 1))
    assert MessagePFXAB(num_clients=3, horizon=1000, confidence="bernstein", reward_range=(0, 1))


def test_parameters_round_trip_with_and_without_the_optional_fields() -> None:
    plain = AlgorithmSpec.build("pf-xab", num_clients=3, horizon=1000)
    assert "param-confidence" not in plain.to_wire() and AlgorithmSpec.from_wire(plain.to_wire()) == plain
    rich = AlgorithmSpec.build("pf-xab", num_clients=3, horizon=1000, confidence="bernstein", reward_range=(-0.1, 1.1))
    assert AlgorithmSpec.from_wire(rich.to_wire()) == rich
