"""Phases, exchanges and Flower rounds: one vocabulary in the log, and no Flower round after the run is over.

A phase is two exchanges (explore, eliminate), the run ends with one final exchange, and
one Flower round carries one phase (the final exchange one more). Both Flower APIs run
exactly the Flower rounds the run needs (Message API: ``PFXAB.start``; legacy API:
``run_legacy_workflow``, the bundled app's loop), also when the server stops the run;
the ServerApp-side metrics hold the regret and the mean rewards.
"""

from __future__ import annotations

import dataclasses
import logging
import re

import pytest
from flwr.app import Context, MetricRecord, RecordDict

from pfxab_flower.client_apps import federation_sessions, legacy_client_app, message_client_app
from pfxab_flower.errors import RunStoppedError
from pfxab_flower.problems import build_federation
from pfxab_flower.running import engine
from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.simulations.flower.app_builders import strategy_of
from tests.message_loopback import LoopbackGrid, as_a_serverapp_process, run_legacy_workflow_loopback, run_loopback

CONFIG = RunConfig(problem="garland", num_clients=3, horizon=20_000, seed=0)
SAME_KEYS = ("regret", "final_nodes", "phases", "communication_rounds", "values_down", "values_up")
STOPPING = AppOptions(fail_rate=1.0, fail_clients=(1,), min_fraction=1.0)  # client 1 always fails: stop in phase 1


def rounds_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("[ROUND")]


def message_run(options: AppOptions, caplog: pytest.LogCaptureFixture):
    federation = build_federation(CONFIG)
    strategy = strategy_of(CONFIG, options, federation)
    grid = LoopbackGrid(3, message_client_app(federation_sessions(federation, options.faults(CONFIG.seed))))
    with caplog.at_level(logging.INFO):
        return run_loopback(strategy, grid), strategy


def legacy_run(options: AppOptions, caplog: pytest.LogCaptureFixture):
    federation = build_federation(CONFIG)
    strategy = strategy_of(CONFIG, dataclasses.replace(options, api="legacy"), federation)
    grid = LoopbackGrid(3, legacy_client_app(federation_sessions(federation, options.faults(CONFIG.seed))))
    with caplog.at_level(logging.INFO):
        history = run_legacy_workflow_loopback(strategy, grid)
    return history, strategy


def test_the_log_says_phase_exchange_and_flower_round_consistently(caplog) -> None:
    result, strategy = message_run(AppOptions(), caplog)
    summary = strategy.run_result().summary
    phases = summary["phases"]
    assert summary["communication_rounds"] == 2 * phases + 1
    assert strategy.num_rounds > phases + 1  # the horizon's bound is loose: the loop must end by itself
    messages = [r.getMessage() for r in caplog.records]
    assert f"Starting PFXAB strategy: at most {strategy.num_rounds} Flower rounds (one per phase, one for the " \
           "final exchange)" in messages
    bound = strategy.num_rounds - 1
    assert f"\t├──> Horizon: 20000 pulls per client: at most {bound} phases: {bound + 1} Flower rounds, " \
           f"{2 * bound + 1} exchanges (fewer if the budget runs out sooner)" in messages
    assert rounds_logged(caplog) == [f"[ROUND {p}] phase {p}: explore and eliminate exchanges"
                                     for p in range(1, phases + 1)] + \
        [f"[ROUND {phases + 1}] final exchange (after {phases} phases)"]
    per_phase = [m for m in messages if re.match(r"phase \d+ \(depth \d+\): ", m)]
    assert [int(re.search(r"(\d+) exchanges so far$", m).group(1)) for m in per_phase] == [
        2 * p for p in range(1, phases + 1)]
    assert f"final exchange: 3 of 3 clients sent their final point; {phases} phases, {2 * phases + 1} exchanges " \
           "in all" in messages
    assert not any("rounds so far" in m or "round failed" in m for m in messages)
    # the ServerApp-side metrics hold the score, in the Result and in the log's final results
    score = result.evaluate_metrics_serverapp[phases + 1]
    assert score["regret"] == summary["regret"] and score["mean_reward_global"] == summary["mean_reward_global"]
    assert any("'regret'" in m for m in messages[messages.index("Final results:"):])


def test_a_stopped_message_api_run_logs_no_further_flower_round(caplog) -> None:
    with pytest.raises(RunStoppedError, match=r"^phase 1: only 2 of 3 clients sent a usable local-means reply"):
        message_run(STOPPING, caplog)
    assert rounds_logged(caplog) == ["[ROUND 1] phase 1: explore and eliminate exchanges"]


def test_the_legacy_workflow_runs_only_the_rounds_the_run_needs(caplog) -> None:
    history, strategy = legacy_run(AppOptions(), caplog)
    flower, inprocess = strategy.run_result().summary, engine.run_config(CONFIG).summary
    for key in SAME_KEYS:
        assert flower[key] == inprocess[key], key
    phases = flower["phases"]
    assert rounds_logged(caplog) == [f"[ROUND {r}]" for r in range(1, phases + 2)]
    assert history.losses_centralized == [(phases + 1, inprocess["regret"])]
    assert history.metrics_centralized["regret"] == [(phases + 1, inprocess["regret"])]
    assert history.metrics_centralized["mean_reward_local"] == [(phases + 1, inprocess["mean_reward_local"])]
    assert any(m.getMessage() == f"Run finished {phases + 1} Flower round(s) in " + m.getMessage().split(" in ")[-1]
               for m in caplog.records if m.getMessage().startswith("Run finished"))


def test_a_stopped_legacy_run_logs_no_further_flower_round(caplog) -> None:
    _, strategy = legacy_run(STOPPING, caplog)
    assert strategy.stop_reason is not None and strategy.stop_reason.startswith("phase 1: only 2 of 3 clients")
    assert rounds_logged(caplog) == ["[ROUND 1]"]


def test_flowers_evaluate_fn_is_called_once_per_flower_round_and_kept_beside_the_score(caplog) -> None:
    federation = build_federation(CONFIG)
    strategy = strategy_of(CONFIG, AppOptions(), federation)
    grid = LoopbackGrid(3, message_client_app(federation_sessions(federation)))
    calls: list[int] = []

    def evaluate_fn(flower_round: int, arrays) -> MetricRecord:
        calls.append(flower_round)
        return MetricRecord({"points": len(arrays)})

    as_a_serverapp_process()
    result = strategy.start(grid, evaluate_fn=evaluate_fn)  # type: ignore[arg-type]
    last = strategy.run_result().summary["phases"] + 1
    assert calls == list(range(last + 1))
    assert result.evaluate_metrics_serverapp[0]["points"] == 0
    assert result.evaluate_metrics_serverapp[last]["points"] == 7  # final-points, -nodes, lost-clients, client-nodes,
    # client-sites, best-points, best-observed
    assert result.evaluate_metrics_serverapp[last]["regret"] == engine.run_config(CONFIG).summary["regret"]


def test_the_legacy_workflow_refuses_a_strategy_that_is_not_ours_in_one_line() -> None:
    """Its loop asks the strategy whether the run goes on (``running``), which only our legacy strategies say:
    another one (here Flower's FedAvg) is refused before anything starts, not failed deep in the loop."""
    from flwr.server import LegacyContext, ServerConfig
    from flwr.server.strategy import FedAvg

    from pfxab_flower.strategies.workflow import PhasedWorkflow

    node = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
    context = LegacyContext(node, config=ServerConfig(num_rounds=1), strategy=FedAvg())
    with pytest.raises(TypeError, match=r"^PhasedWorkflow runs pfxab-flower's legacy strategies, not FedAvg$"):
        PhasedWorkflow()(LoopbackGrid(1, legacy_client_app(lambda context: None)), context)  # type: ignore[arg-type]
