"""The Message-API adapters (``records``, ``MessagePhasedStrategy``, the Message ``ClientApp``), without Ray.

* every core message round-trips through a ``RecordDict`` and counts as on the legacy wire;
* Flower's own ``Strategy.start`` loop gives exactly the in-process engine's numbers;
* bad replies (unreadable content, error replies) are logged and the run goes on;
* the ``api`` run-config key is validated in one place; client state survives ``context.state``.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from flwr.app import ConfigRecord, Error, Message, MessageType, RecordDict

from pfxab_flower import engine
from pfxab_flower.algorithms.messages import (
    ActiveSetReport,
    FinishInstruction,
    FinishReport,
    GlobalUpdate,
    LocalReport,
    PhaseInstruction,
)
from pfxab_flower.algorithms.phased import ClientState
from pfxab_flower.client_apps import federation_client_fn
from pfxab_flower.client_apps.client import load_client_state, load_pull_log, save_client_state
from pfxab_flower.client_apps.message_app import message_client_app
from pfxab_flower.config import ALGORITHMS, RunConfig
from pfxab_flower.errors import ConfigError
from pfxab_flower.problems import build_federation
from pfxab_flower.results import RunResult
from pfxab_flower.sampling import PullLog
from pfxab_flower.simulations.harness import flower_result
from pfxab_flower.strategies import records, serde
from pfxab_flower.strategies.message_strategy import MessagePhasedStrategy
from pfxab_flower.strategies.run_config import APIS, AppOptions, parse_run_config, to_run_config
from tests.message_loopback import LoopbackGrid, run_loopback

SAME_KEYS = (
    "algorithm", "problem", "regret", "regret_per_client", "final_nodes", "final_points", "phases",
    "communication_rounds", "values_down", "values_up", "rejected_replies", "mean_reward_personalised",
)
IDS = np.array([4, 5, 7], dtype=np.int64)


# -- records -------------------------------------------------------------------------------------------


def test_instructions_round_trip_through_records() -> None:
    for instruction in (PhaseInstruction(2, IDS, 3, 1), FinishInstruction(5)):
        arrays, config = records.from_record(records.to_record(*serde.instruction_payload(instruction)))
        back = serde.fit_ins_to_instruction(arrays, config)
        assert type(back) is type(instruction)
        if isinstance(instruction, PhaseInstruction):
            assert (back.phase, back.global_pulls, back.local_pulls) == (2, 3, 1)
            np.testing.assert_array_equal(back.node_ids, IDS)
        else:
            assert back.phases == 5


def test_update_and_replies_round_trip_through_records() -> None:
    update = GlobalUpdate(3, IDS, np.array([0.1, np.nan, 0.3]), 40, np.array([False, True, False]))
    back = serde.evaluate_ins_to_update(*records.from_record(records.to_record(*serde.update_payload(update))))
    assert (back.phase, back.phase_length) == (3, 40)
    np.testing.assert_array_equal(back.global_means, update.global_means)
    np.testing.assert_array_equal(back.eliminated, update.eliminated)

    local = LocalReport(2, IDS, np.array([0.5, 0.25, 0.0]), np.array([3, 3, 0]))
    arrays, _, metrics = serde.report_to_fit_reply(local)
    report, extra = serde.reply_to_report(*records.from_record(records.to_record(arrays, metrics)), False)
    assert report.client == 2 and extra == []
    for got, want in zip((report.node_ids, report.means, report.counts), (IDS, local.means, local.counts), strict=True):
        np.testing.assert_array_equal(got, want)

    harness = [np.array([9, 10]), np.array([100, 5])]
    arrays, _, metrics = serde.report_to_fit_reply(FinishReport(1, 9), harness)
    report, extra = serde.reply_to_report(*records.from_record(records.to_record(arrays, metrics)), True)
    assert (report.client, report.node_id) == (1, 9)
    for got, want in zip(extra, harness, strict=True):
        np.testing.assert_array_equal(got, want)

    _, _, metrics = serde.active_set_to_evaluate_reply(ActiveSetReport(0, IDS))
    active = serde.metrics_to_active_set(records.from_record(records.to_record([], metrics))[1])
    assert active.client == 0
    np.testing.assert_array_equal(active.node_ids, IDS)


def test_record_size_counts_like_the_legacy_wire() -> None:
    update = GlobalUpdate(3, IDS, np.array([0.1, 0.2, 0.3]), 40, np.array([False, True, False]))
    arrays, config = serde.update_payload(update)
    legacy = serde.update_to_evaluate_ins(update)
    assert records.record_size(records.to_record(arrays, config)) == serde.wire_size(legacy.parameters, legacy.config)
    harness = [np.arange(50), np.arange(50)]
    arrays, _, metrics = serde.report_to_fit_reply(FinishReport(1, 9), harness)
    values, _ = records.record_size(records.to_record(arrays, metrics), skip_tensors_after=1)
    assert values == 2  # the node id and the partition id; the harness tensors are not counted


def test_unreadable_content_is_a_wire_error() -> None:
    with pytest.raises(serde.WireError, match="cannot be read"):
        records.from_record(RecordDict({"config": ConfigRecord({"phase": 1})}))


# -- the api key and the client state -----------------------------------------------------------------


def test_api_key_is_validated_and_round_trips() -> None:
    for api in APIS:
        config, options = parse_run_config({"api": api, "clients": 3})
        assert options.api == api
        assert to_run_config(config, options)["api"] == api
    with pytest.raises(ConfigError, match=r"api='grpc' is invalid; allowed: message, legacy"):
        parse_run_config({"api": "grpc"})
    assert AppOptions().api in APIS


def test_client_state_survives_context_state() -> None:
    state = ClientState(completed=2, pulls=70, active=np.array([8, 9, 12]), choice=5, union=IDS,
                        means=np.array([0.1, 0.2, 0.3]), counts=np.array([4, 4, 2]), explored=10)
    log = PullLog(np.array([2, 3, 2]), np.array([5, 5, 7]))
    store = RecordDict()
    save_client_state(store, state, log)
    back, back_log = load_client_state(store), load_pull_log(store)
    assert back.to_arrays().keys() == state.to_arrays().keys()
    for key, value in state.to_arrays().items():
        np.testing.assert_array_equal(back.to_arrays()[key], value)
        assert back.to_arrays()[key].dtype == np.asarray(value).dtype
    np.testing.assert_array_equal(back_log.node_ids, log.node_ids)
    np.testing.assert_array_equal(back_log.counts, log.counts)


# -- the strategy and client app over Flower's Strategy.start loop ------------------------------------


def message_loopback_result(config: RunConfig, seed: int = 0, tamper=None) -> tuple[RunResult, MessagePhasedStrategy]:
    federation = build_federation(config)
    results: list[RunResult] = []
    strategy = MessagePhasedStrategy.from_config(
        config, on_finish=lambda s: results.append(flower_result(s, federation, {}, 0.0))
    )
    grid = LoopbackGrid(config.clients, message_client_app(federation_client_fn(federation, config)), seed, tamper)
    run_loopback(strategy, grid)
    assert len(results) == 1
    return results[0], strategy


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_message_adapters_match_the_inprocess_engine(algorithm: str) -> None:
    config = RunConfig(problem="doublesine", algorithm=algorithm, clients=4, alpha=0.7, horizon=30_000, seed=3)
    flower, _ = message_loopback_result(config, seed=ALGORITHMS.index(algorithm))
    inprocess = engine.run_config(config)
    for key in SAME_KEYS:
        assert flower.summary[key] == inprocess.summary[key], key
    assert flower.summary["phases"] >= 2
    assert flower.phases.equals(inprocess.phases)
    assert flower.communication[["round", "phase", "kind", "values_down", "values_up"]].equals(
        inprocess.communication[["round", "phase", "kind", "values_down", "values_up"]]
    )


def test_unreadable_and_error_replies_are_logged_and_skipped(caplog) -> None:
    config = RunConfig(problem="garland", clients=4, horizon=20_000, seed=1)
    tampered: list[str] = []

    def tamper(message: Message, reply: Message) -> Message:
        # phase 1 only: client 2's local report loses its tensors, client 3's active set is an error reply
        config_in = message.content.config_records["config"]
        partition = reply.content.config_records["config"].get(serde.PARTITION_ID)
        if config_in.get("phase") != 1:
            return reply
        if message.metadata.message_type == MessageType.TRAIN and partition == 2:
            tampered.append("unreadable")
            return Message(RecordDict({"config": ConfigRecord({serde.PARTITION_ID: 2})}), reply_to=message)
        if message.metadata.message_type == MessageType.EVALUATE and partition == 3:
            tampered.append("error")
            return Message(Error(code=0, reason="client crashed"), reply_to=message)
        return reply

    with caplog.at_level(logging.WARNING, logger="pfxab_flower"):
        flower, strategy = message_loopback_result(config, tamper=tamper)
    assert sorted(tampered) == ["error", "unreadable"]
    assert len(strategy.server.rejected) == 1
    assert "cannot be read" in strategy.server.rejected[0]["reason"]
    assert any("active-set round failed on a client: client crashed" in r.getMessage() for r in caplog.records)
    assert strategy.finished and flower.summary["phases"] >= 2
