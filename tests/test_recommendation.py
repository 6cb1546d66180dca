"""What a run recommends: each client's final point with its simple regret, and its best observed point.

The best observed point is recomputed from the messages that crossed the network (every local report's
means and counts), and the simple regrets from the federation's own values and optimum, so the test
can fail; the engine-equality tests compare the same entries across engines (``RECOMMENDATION_KEYS``).
"""

from __future__ import annotations

import numpy as np
import pytest

from pfxab_flower import Federation, run
from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.messages import FinishReport, LocalReport
from pfxab_flower.algorithms.registry import federated_names
from pfxab_flower.formatting import format_mean_sd
from pfxab_flower.problems.synthetic import synthetic_federation
from pfxab_flower.running.engine import make_settings, simulate
from pfxab_flower.running.results import RECOMMENDATION_KEYS
from pfxab_flower.schema.catalogue import ALGORITHMS
from tests.conftest import cheap_horizon, cheap_options


def personalised_values(federation: Federation, alpha: float, points: np.ndarray) -> np.ndarray:
    """``alpha mu_m + (1 - alpha) mu`` of every client at its own point: shape ``(M,)``."""
    local = federation.local_values(points)  # (M, M): mu_k at client m's point
    return alpha * np.diag(local) + (1 - alpha) * local.mean(axis=0)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_simple_regret_is_the_optimum_minus_the_personalised_value_at_the_final_point(algorithm: str) -> None:
    federation, alpha = synthetic_federation("garland", 4), 0.3
    summary = run(federation, algorithm, alpha=alpha, horizon=cheap_horizon(algorithm, 4, 40_000), seed=2,
                  **cheap_options(algorithm)).summary
    optimum = federation.optimum(alpha).values
    final = personalised_values(federation, alpha, np.array(summary["final_points"]))
    np.testing.assert_allclose(summary["simple_regret_per_client"], optimum - final, rtol=0, atol=1e-15)
    assert summary["simple_regret"] == pytest.approx(np.mean(optimum - final), rel=1e-15)
    assert all(value >= -1e-9 for value in summary["simple_regret_per_client"])  # an exact optimum is never beaten
    best = personalised_values(federation, alpha, np.array(summary["best_points"]))
    np.testing.assert_allclose(summary["best_simple_regret_per_client"], optimum - best, rtol=0, atol=1e-15)


@pytest.mark.parametrize("algorithm", federated_names())
def test_the_best_observed_point_is_the_highest_mean_of_the_clients_own_rewards(algorithm: str) -> None:
    """Recomputed from every local report (pf-sh pulls a candidate in several rounds: its rewards add up)."""
    federation = synthetic_federation("doublesine", 3)
    settings = make_settings(3, algorithm=algorithm, alpha=0.5, horizon=cheap_horizon(algorithm, 3, 60_000), seed=1,
                             dimensions=1)
    sim = simulate(federation, make_policy(algorithm), settings, keep_messages=True)
    sums: list[dict[int, float]] = [{} for _ in range(3)]
    counts: list[dict[int, int]] = [{} for _ in range(3)]
    finals: dict[int, FinishReport] = {}
    rounds = 0  # the most local reports one node of one client appears in
    for _, replies in sim.messages:
        for reply in replies:
            if isinstance(reply, LocalReport):
                for node, mean, count in zip(reply.node_ids.tolist(), reply.means, reply.counts.tolist(), strict=True):
                    if count:
                        rounds = max(rounds, 1 + (node in counts[reply.client]))
                        sums[reply.client][node] = sums[reply.client].get(node, 0.0) + mean * count
                        counts[reply.client][node] = counts[reply.client].get(node, 0) + count
            elif isinstance(reply, FinishReport):
                finals[reply.client] = reply
    assert rounds == (2 if algorithm == "pf-sh" else 1)  # pf-sh's survivors are pulled in several rounds
    for m, report in finals.items():
        means = {node: sums[m][node] / counts[m][node] for node in sums[m]}
        best = max(means, key=lambda node: (means[node], counts[m][node], -node))
        assert report.best_node_id == best and report.best_pulls == counts[m][best]
        assert report.best_mean == pytest.approx(means[best], rel=1e-12)
        np.testing.assert_array_equal(report.best_point, federation.partition.midpoints(np.array([best]))[0])
    summary = sim.driver.result("inprocess").summary
    assert summary["best_nodes"] == [finals[m].best_node_id for m in range(3)]
    assert summary["best_observed_pulls_per_client"] == [finals[m].best_pulls for m in range(3)]


def test_a_baseline_reports_its_best_random_point_with_one_pull_and_its_exact_value() -> None:
    federation = synthetic_federation("garland", 3, noise=None)
    deterministic = Federation(federation.objectives, federation.domain, name="garland", kinks=federation.kinks,
                               optimum_is_estimate=False, value_range=(0.0, 1.0),
                               batch=federation.batch).with_evaluation("deterministic")
    result = run(deterministic, "random-search", alpha=1.0, horizon=5_000, seed=0)
    summary, clients = result.summary, result.clients
    assert summary["best_nodes"] == summary["final_nodes"]  # random search exploits its best observed point
    assert summary["best_observed_pulls_per_client"] == [1, 1, 1]
    own = federation.local_values(np.array(summary["best_points"]))
    np.testing.assert_array_equal(summary["best_observed_mean_per_client"], np.diag(own))  # no noise: the value
    assert list(clients["best_observed_mean"]) == summary["best_observed_mean_per_client"]
    assert list(clients["simple_regret"]) == summary["simple_regret_per_client"]


def test_a_client_that_drew_no_reward_has_no_best_observed_point() -> None:
    """Local-only at T = 50 runs no phase: every client exploits the root and observed nothing it searched with."""
    summary = run(synthetic_federation("garland", 3), "local-only", alpha=0.5, horizon=50, seed=0).summary
    assert summary["final_nodes"] == [1] * 3
    assert summary["best_nodes"] == [None] * 3 and summary["best_points"] == [None] * 3
    assert summary["best_simple_regret"] is None and summary["simple_regret"] is not None


def test_an_unscored_run_reports_its_best_observed_point_but_no_simple_regret() -> None:
    trials = [lambda x, c=c: 1 - np.abs(x[:, 0] - c) for c in (0.2, 0.6)]
    federation = Federation.from_callables(trials, {"x": (0.0, 1.0)}, evaluation="stochastic", value_range=(0, 1))
    summary = run(federation, "random-search", alpha=0.5, horizon=2_000, seed=0).summary
    assert summary["simple_regret"] is None and summary["simple_regret_per_client"] is None
    assert all(mean is not None for mean in summary["best_observed_mean_per_client"])


def test_every_recommendation_entry_is_in_the_summary() -> None:
    summary = run(synthetic_federation("garland", 2), "pf-xab", horizon=10_000).summary
    assert set(RECOMMENDATION_KEYS) <= set(summary)


def test_compare_on_a_users_own_federation_shows_simple_and_cumulative_regret() -> None:
    from pfxab_flower import compare

    objectives = [lambda x, c=c: 1 - np.abs(x[:, 0] - c) for c in (0.2, 0.5, 0.7)]
    federation = Federation.from_callables(objectives, {"x": (0.0, 1.0)}, noise_sigma=0.1)
    comparison = compare(federation, ["pf-xab", "random-search"], seeds=[0, 1], alpha=0.5, horizon=20_000,
                         progress=False)
    header, *rows = comparison.cells()
    assert header[1:3] == ["cumulative regret", "simple regret"]
    for row, (_, group) in zip(rows, comparison.runs.groupby("algorithm", sort=False), strict=True):
        simple = group["simple_regret"]
        assert simple.notna().all() and row[2] == format_mean_sd(simple.mean(), simple.std(ddof=1))
    assert "simple regret" in comparison.table().splitlines()[1]


@pytest.mark.parametrize(("algorithm", "horizon", "stuck"), [
    ("local-only", 50, True), ("local-only", 200, False), ("pf-xab-adaptive", 50, True), ("pf-xab", 50, False),
    ("random-search", 50, False), ("pf-sh", 50, False),
])
def test_a_horizon_too_small_to_leave_the_first_point_is_one_warning(caplog, algorithm, horizon, stuck) -> None:
    with caplog.at_level("WARNING", logger="pfxab_flower"):
        summary = run(synthetic_federation("garland", 3), algorithm, horizon=horizon, seed=0).summary
    lines = [r.getMessage() for r in caplog.records if "to leave its first point" in r.getMessage()]
    assert lines == ([f"horizon={horizon} is too small for {algorithm} to leave its first point: no phase fits, so "
                      f"every client pulls the domain's centre all {horizon} times (a larger horizon, or an algorithm "
                      "that draws points from the first pull: random-search, optuna-tpe)"] if stuck else [])
    assert (summary["final_nodes"] == [1] * 3) == stuck  # the warning says what happened: the root, all along
