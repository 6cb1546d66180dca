"""The Flower strategy and NumPy client, driven by Flower's own ``Server`` loop without Ray.

* every algorithm gives exactly the in-process engine's numbers (same seed);
* malformed replies are rejected with a logged reason and the valid ones are used;
* a user's own objective callables plug in through ``objective_client_fn``.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from flwr.common import Parameters
from flwr.server import SimpleClientManager

from pfxab_flower import engine
from pfxab_flower.algorithms.phased import pooled_means
from pfxab_flower.client_apps import federation_client_fn, objective_client_fn
from pfxab_flower.config import ALGORITHMS, RunConfig
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.federation import Federation
from pfxab_flower.results import RunResult
from pfxab_flower.simulations.harness import flower_result
from pfxab_flower.strategies import FedPNEStrategy, PFPNEStrategy, PFXABStrategy, serde, strategy_for
from pfxab_flower.strategies.strategy import PhasedStrategy
from tests.flower_loopback import LoopbackProxy, run_loopback

SAME_KEYS = (
    "algorithm", "problem", "regret", "regret_per_client", "final_nodes", "final_points", "phases",
    "communication_rounds", "values_down", "values_up", "rejected_replies", "mean_reward_personalised",
)


def flower_loopback_result(config: RunConfig, federation: Federation, client_fn=None) -> RunResult:
    results: list[RunResult] = []
    strategy = strategy_for(config, on_finish=lambda s: results.append(flower_result(s, federation, {}, 0.0)))
    run_loopback(strategy, client_fn or federation_client_fn(federation, config), config.clients)
    assert len(results) == 1
    return results[0]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_flower_adapters_match_the_inprocess_engine(algorithm: str) -> None:
    config = RunConfig(problem="doublesine", algorithm=algorithm, clients=4, alpha=0.7, horizon=30_000, seed=3)
    federation = build_federation(config)
    flower = flower_loopback_result(config, federation)
    inprocess = engine.run(federation, algorithm=algorithm, alpha=0.7, horizon=30_000, seed=3)
    for key in SAME_KEYS:
        assert flower.summary[key] == inprocess.summary[key], key
    assert flower.summary["engine"] == "flower"
    assert flower.summary["phases"] >= 2
    assert flower.phases.equals(inprocess.phases)
    assert flower.communication[["round", "phase", "kind", "values_down", "values_up"]].equals(
        inprocess.communication[["round", "phase", "kind", "values_down", "values_up"]]
    )
    # Flower's tensors carry .npy headers: more bytes than the bare payload, never fewer
    assert flower.summary["bytes_down"] > inprocess.summary["bytes_down"]
    assert flower.summary["bytes_up"] > inprocess.summary["bytes_up"]


def test_strategy_classes_fix_their_algorithm() -> None:
    for cls, name in ((PFXABStrategy, "pf-xab"), (FedPNEStrategy, "fed-pne"), (PFPNEStrategy, "pf-pne")):
        strategy = cls(3, 10_000)
        assert strategy.algorithm == name == strategy.server.policy.name
        assert strategy.num_rounds == strategy.settings.schedule.max_phases() + 1
    assert PhasedStrategy(3, 10_000, algorithm="pf-pne").algorithm == "pf-pne"


def test_a_users_objective_callables_plug_in() -> None:
    centres = [0.2, 0.5, 0.8]
    objectives = [lambda x, c=c: 1.0 - np.abs(x[:, 0] - c) for c in centres]
    federation = Federation.from_callables(objectives, {"x": (0.0, 1.0)}, noise_sigma=0.1)
    config = RunConfig(clients=3, alpha=0.9, horizon=20_000, seed=1)
    client_fn = objective_client_fn(lambda m: objectives[m], {"x": (0.0, 1.0)}, config, per_client=True,
                                    noise_sigma=0.1, send_pull_log=True)
    flower = flower_loopback_result(config, federation, client_fn)
    inprocess = engine.run(federation, alpha=0.9, horizon=20_000, seed=1)
    assert flower.summary["regret"] == inprocess.summary["regret"]
    assert flower.summary["final_nodes"] == inprocess.summary["final_nodes"]


# -- malformed replies ---------------------------------------------------------------------

M = 4


def first_phase() -> tuple[PhasedStrategy, list]:
    """A strategy with phase 1 sent to ``M`` clients, and their (valid) fit results."""
    config = RunConfig(clients=M, horizon=20_000, seed=0)
    strategy = strategy_for(config)
    manager = SimpleClientManager()
    client_fn = federation_client_fn(build_federation(config), config)
    for m in range(M):
        manager.register(LoopbackProxy(m, M, client_fn))
    instructions = strategy.configure_fit(1, Parameters([], ""), manager)
    assert len(instructions) == M
    return strategy, [(proxy, proxy.fit(ins, None, None)) for proxy, ins in instructions]


def bad_reply(reports: dict, client: int, kind: str):
    """Client ``client``'s local report, broken in one way."""
    report = reports[client]
    ids, means, counts = report.node_ids, report.means.copy(), report.counts
    if kind == "wrong length":
        means = means[:-1]
    elif kind == "nan means":
        means[0] = np.nan
    elif kind == "inf means":
        means[-1] = np.inf
    elif kind == "unknown node ids":
        ids = ids + 100
    elif kind == "no partition id":
        res = serde.ok_fit_res([ids, means, counts], 1, {})
        return res
    return serde.ok_fit_res([ids, means, counts], 1, {serde.PARTITION_ID: client})


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("wrong length", "values, expected"),
        ("nan means", "not finite"),
        ("inf means", "not finite"),
        ("unknown node ids", "differ from the broadcast union"),
        ("no partition id", "partition-id"),
    ],
)
def test_malformed_local_report_is_logged_and_skipped(kind: str, reason: str, caplog) -> None:
    strategy, results = first_phase()
    reports = {r.client: r for r in (serde.fit_res_to_report(res, False)[0] for _, res in results)}
    bad = 2
    results = [(p, bad_reply(reports, bad, kind) if reports_client(res) == bad else res) for p, res in results]
    with caplog.at_level(logging.WARNING, logger="pfxab_flower"):
        strategy.aggregate_fit(1, results, [])
    assert len(strategy.server.rejected) == 1
    assert reason in strategy.server.rejected[0]["reason"]
    assert any("rejected local-means reply" in r.getMessage() and reason in r.getMessage() for r in caplog.records)
    update = strategy._update
    assert update is not None
    valid = [reports[m] for m in range(M) if m != bad]
    np.testing.assert_array_equal(update.global_means, pooled_means(update.node_ids, valid))
    assert np.all(np.isfinite(update.global_means))


def reports_client(res) -> int | None:
    return res.metrics.get(serde.PARTITION_ID)


def test_malformed_active_set_is_logged_and_the_phase_closes(caplog) -> None:
    strategy, results = first_phase()
    strategy.aggregate_fit(1, results, [])
    evaluations = strategy.configure_evaluate(1, Parameters([], ""), SimpleClientManager())
    replies = [(proxy, proxy.evaluate(ins, None, None)) for proxy, ins in evaluations]
    replies = [
        (p, serde.ok_evaluate_res(0.0, 1, {serde.PARTITION_ID: 1, serde.NODE_IDS: np.array([999]).tobytes()}))
        if reports_client(res) == 1 else (p, res)
        for p, res in replies
    ]
    with caplog.at_level(logging.WARNING, logger="pfxab_flower"):
        strategy.aggregate_evaluate(1, replies, [RuntimeError("node lost")])
    assert [r["stage"] for r in strategy.server.rejected] == ["active-set"]
    assert "not distinct children" in strategy.server.rejected[0]["reason"]
    assert any("node lost" in r.getMessage() for r in caplog.records)
    assert strategy.server.completed == 1
    assert len(strategy.communication.rows) == 2


def test_done_strategy_sends_nothing() -> None:
    config = RunConfig(clients=2, horizon=5_000, seed=0)
    strategy = strategy_for(config)
    run_loopback(strategy, federation_client_fn(build_federation(config), config), 2)
    assert strategy.finished and strategy.server.done
    manager = SimpleClientManager()
    assert strategy.configure_fit(99, Parameters([], ""), manager) == []
    assert strategy.configure_evaluate(99, Parameters([], ""), manager) == []
