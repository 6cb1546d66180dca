"""The legacy Flower strategies and NumPy client, driven by Flower's own ``Server`` loop without Ray.

* every algorithm gives exactly the in-process engine's numbers (same seed), and Flower's
  ``History`` holds the same phase rows as the run's ``phases.csv``;
* the strategy classes fix their algorithm and validate their keyword arguments;
* malformed replies are rejected with a logged reason and the valid ones are used;
* a node beyond the run's clients stands by; a finished strategy sends nothing.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
from flwr.common import Parameters
from flwr.server import SimpleClientManager

from pfxab_flower.algorithms.messages import LocalReport
from pfxab_flower.algorithms.phased import pooled_means
from pfxab_flower.algorithms.registry import federated_names
from pfxab_flower.client_apps import federation_sessions
from pfxab_flower.errors import ConfigError
from pfxab_flower.problems import build_federation
from pfxab_flower.running import engine
from pfxab_flower.running.results import RECOMMENDATION_KEYS
from pfxab_flower.running.wire import codec
from pfxab_flower.schema.catalogue import ALGORITHMS, CONFIDENCES
from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.simulations.flower.app_builders import strategy_of
from pfxab_flower.strategies import LEGACY_STRATEGIES, FedPNEStrategy, PFPNEStrategy, PFXABStrategy
from tests.conftest import cheap_horizon
from tests.flower_loopback import (
    LoopbackProxy,
    legacy_fit_res,
    legacy_payload,
    numpy_client_fn,
    ok_evaluate_res,
    run_loopback,
)

SAME_KEYS = (
    "algorithm", "problem", "regret", "regret_per_client", "final_nodes", "final_points", "phases",
    "communication_rounds", "values_down", "values_up", "rejected_replies", "mean_reward_personalised",
    *RECOMMENDATION_KEYS,
)
M = 4
LEGACY = AppOptions(api="legacy")


@pytest.mark.parametrize("confidence", CONFIDENCES)
@pytest.mark.parametrize("algorithm", federated_names())  # phase by phase (the baselines: tests/test_baselines.py)
def test_legacy_adapters_match_the_inprocess_engine(algorithm: str, confidence: str) -> None:
    config = RunConfig(problem="doublesine", algorithm=algorithm, num_clients=M, alpha=0.7,
                       horizon=cheap_horizon(algorithm, M, 30_000), seed=3, confidence=confidence)
    federation = build_federation(config)
    strategy = strategy_of(config, LEGACY, federation)
    history = run_loopback(strategy, federation_sessions(federation), M)
    flower = strategy.run_result()
    inprocess = engine.run(federation, algorithm=algorithm, alpha=0.7, horizon=config.horizon, seed=3,
                           confidence=confidence)
    for key in SAME_KEYS:
        assert flower.summary[key] == inprocess.summary[key], key
    assert flower.summary["engine"] == "flower" and flower.summary["phases"] >= 2
    assert flower.phases.equals(inprocess.phases)
    assert flower.communication[["round", "phase", "kind", "values_down", "values_up"]].equals(
        inprocess.communication[["round", "phase", "kind", "values_down", "values_up"]]
    )
    # Flower's tensors carry .npy headers: more bytes than the bare payload, never fewer
    assert flower.summary["bytes_down"] > inprocess.summary["bytes_down"]
    # History: one row per phase, the very rows of phases.csv (metrics_distributed: key -> [(round, value)])
    for column in ("active_nodes", "eliminated", "phase_length", "mean_observed_reward"):
        assert history.metrics_distributed[column] == list(enumerate(inprocess.phases[column].tolist(), start=1))
    np.testing.assert_array_equal(strategy.final_points(), np.array(inprocess.summary["final_points"]))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_strategy_classes_fix_their_algorithm_and_check_their_arguments(algorithm: str) -> None:
    assert [cls.algorithm for cls in (PFXABStrategy, FedPNEStrategy, PFPNEStrategy)] == list(federated_names())[:3]
    assert set(LEGACY_STRATEGIES) == set(ALGORITHMS)
    for name, value in (("alpha", 2.0), ("horizon", 0), ("min_fraction", -1), ("num_clients", 0),
                        ("round_timeout", 0), ("nu1", 0.0), ("max_depth", 0), ("pf_pne_eps", -1.0)):
        kwargs = {"num_clients": 3, "horizon": 1000, name: value}
        if name == "pf_pne_eps" and algorithm != "pf-pne":  # only PF-PNE declares it: another refuses it by name
            with pytest.raises(ConfigError, match=rf"^unknown keyword 'pf_pne_eps' for algorithm '{algorithm}'; "
                                                  "allowed: num_clients, alpha, horizon, "):
                LEGACY_STRATEGIES[algorithm](**kwargs)
            continue
        with pytest.raises(ConfigError, match=rf"^{name}={re.escape(repr(value))} is invalid; allowed: ") as info:
            LEGACY_STRATEGIES[algorithm](**kwargs)
        assert "\n" not in str(info.value)


def first_phase():
    """A legacy strategy after phase 1's broadcast, with every client's reply."""
    config = RunConfig(problem="garland", num_clients=M, horizon=50_000, seed=1)
    federation = build_federation(config)
    strategy = strategy_of(config, LEGACY, federation)
    manager = SimpleClientManager()
    client_fn = numpy_client_fn(federation_sessions(federation))
    for m in range(M):
        manager.register(LoopbackProxy(m, M, client_fn))
    instructions = strategy.configure_fit(1, Parameters([], ""), manager)
    return strategy, [(proxy, proxy.fit(ins, None, None)) for proxy, ins in instructions]


def report_of(res):
    return codec.read_reply(*legacy_payload(res), LocalReport)


def bad_reply(report, kind: str):
    """A client's local report, broken in one way."""
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
        return legacy_fit_res({codec.NODE_IDS: ids, codec.MEANS: means, codec.COUNTS: counts}, {})
    return legacy_fit_res({codec.NODE_IDS: ids, codec.MEANS: means, codec.COUNTS: counts},
                          {codec.PARTITION_ID: report.client})


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
    reports = {report_of(res).client: report_of(res) for _, res in results}
    bad = 2
    results = [(p, bad_reply(reports[bad], kind) if res.metrics[codec.PARTITION_ID] == bad else res)
               for p, res in results]
    with caplog.at_level(logging.WARNING, logger="pfxab_flower"):
        strategy.aggregate_fit(1, results, [])
    rejected = strategy.driver.machine.rejected
    assert len(rejected) == 1 and reason in rejected[0]["reason"]
    assert any("rejected local-means reply" in r.getMessage() and reason in r.getMessage() for r in caplog.records)
    update = strategy.driver.global_update
    valid = [reports[m] for m in range(M) if m != bad]
    np.testing.assert_array_equal(update.global_means, pooled_means(update.node_ids, valid))


def test_malformed_active_set_is_logged_and_the_phase_closes(caplog) -> None:
    strategy, results = first_phase()
    strategy.aggregate_fit(1, results, [])
    evaluations = strategy.configure_evaluate(1, Parameters([], ""), SimpleClientManager())
    replies = [(proxy, proxy.evaluate(ins, None, None)) for proxy, ins in evaluations]
    replies = [
        (p, ok_evaluate_res(0.0, 1, codec.arrays_to_config(({codec.NODE_IDS: np.array([999])},
                                                            {codec.PARTITION_ID: 1}))))
        if res.metrics[codec.PARTITION_ID] == 1 else (p, res)
        for p, res in replies
    ]
    with caplog.at_level(logging.WARNING, logger="pfxab_flower"):
        strategy.aggregate_evaluate(1, replies, [RuntimeError("node lost")])
    machine = strategy.driver.machine
    assert [r["stage"] for r in machine.rejected] == ["active-set"]
    assert "not distinct children" in machine.rejected[0]["reason"]
    assert any("node lost" in r.getMessage() for r in caplog.records)
    assert machine.completed == 1 and len(strategy.driver.communication.rows) == 2


def test_a_node_beyond_the_clients_stands_by_and_a_finished_strategy_sends_nothing(caplog) -> None:
    config = RunConfig(num_clients=2, horizon=5_000, seed=0)
    federation = build_federation(config)
    strategy = strategy_of(config, LEGACY, federation)
    with caplog.at_level(logging.INFO, logger="pfxab_flower"):
        run_loopback(strategy, federation_sessions(federation), 3)  # partition-id 2 is not a client
    assert strategy.driver.finished and strategy.driver.machine.rejected == []
    assert strategy.run_result().summary["failures"] == 0
    assert sum("stands by" in r.getMessage() for r in caplog.records) == 1  # noted once, not every round
    assert strategy.run_result().summary["regret"] == engine.run(federation, horizon=5_000, seed=0).summary["regret"]
    manager = SimpleClientManager()
    assert strategy.configure_fit(99, Parameters([], ""), manager) == []
    assert strategy.configure_evaluate(99, Parameters([], ""), manager) == []
