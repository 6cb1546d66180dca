"""The Message-API strategies and ClientApp over Flower's own ``Strategy.start`` loop, without Ray.

* every algorithm gives exactly the in-process engine's numbers, and the ``Result`` holds the
  phase metrics and the final points;
* bad replies (unreadable content, error replies) are logged and the run goes on;
* a node beyond the clients stands by; too few nodes stop the run in one line;
* the ``api`` run-config key is validated in one place; client state survives ``context.state``.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
from flwr.app import ConfigRecord, Error, Message, MessageType, RecordDict

from pfxab_flower.algorithms.phased import ClientState
from pfxab_flower.algorithms.registry import federated_names
from pfxab_flower.client_apps import federation_sessions, message_client_app
from pfxab_flower.client_apps.store import FlowerStore
from pfxab_flower.errors import ConfigError, RunStoppedError
from pfxab_flower.flower_shared import records
from pfxab_flower.problems import build_federation
from pfxab_flower.running import engine
from pfxab_flower.running.results import RECOMMENDATION_KEYS
from pfxab_flower.running.wire import codec
from pfxab_flower.schema.catalogue import ALGORITHMS, APIS, CONFIDENCES
from pfxab_flower.schema.run_config import AppOptions, RunConfig, parse_run_config, to_run_config
from pfxab_flower.strategies import PFPNE, PFXAB, STRATEGIES, FedPNE
from tests.conftest import cheap_horizon, cheap_options
from tests.message_loopback import LoopbackGrid, run_loopback
from tests.patience import patient

SAME_KEYS = (
    "algorithm", "problem", "regret", "regret_per_client", "final_nodes", "final_points", "phases",
    "communication_rounds", "values_down", "values_up", "rejected_replies", "mean_reward_personalised",
    *RECOMMENDATION_KEYS,
)


def loopback(config: RunConfig, nodes: int | None = None, seed: int = 0, tamper=None, **options):
    federation = build_federation(config)
    kwargs = dict(num_clients=config.num_clients, horizon=config.horizon, alpha=config.alpha, seed=config.seed,
                  federation=federation, confidence=config.confidence, **options)
    strategy = STRATEGIES[config.algorithm](**kwargs)
    grid = LoopbackGrid(nodes or config.num_clients, message_client_app(federation_sessions(federation)), seed, tamper)
    return run_loopback(strategy, grid), strategy


@pytest.mark.parametrize("confidence", CONFIDENCES)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_message_adapters_match_the_inprocess_engine_and_fill_the_result(algorithm: str, confidence: str) -> None:
    config = RunConfig(problem="doublesine", algorithm=algorithm, num_clients=4, alpha=0.7,
                       horizon=cheap_horizon(algorithm, 4, 30_000), seed=3, confidence=confidence,
                       **cheap_options(algorithm))
    result, strategy = loopback(config, seed=ALGORITHMS.index(algorithm), **cheap_options(algorithm))
    flower, inprocess = strategy.run_result(), engine.run_config(config)
    for key in SAME_KEYS:
        assert flower.summary[key] == inprocess.summary[key], key
    assert flower.phases.equals(inprocess.phases)
    assert flower.communication[["round", "phase", "kind", "values_down", "values_up"]].equals(
        inprocess.communication[["round", "phase", "kind", "values_down", "values_up"]]
    )
    np.testing.assert_array_equal(result.arrays["final-points"].numpy(), np.array(inprocess.summary["final_points"]))
    np.testing.assert_array_equal(result.arrays["final-nodes"].numpy(), inprocess.summary["final_nodes"])
    assert sorted(result.train_metrics_clientapp) == list(range(1, inprocess.summary["phases"] + 1))
    for row in inprocess.phases.itertuples(index=False):
        metrics = result.train_metrics_clientapp[row.phase]
        assert (metrics["active_nodes"], metrics["eliminated"], metrics["phase_length"]) == (
            row.active_nodes, row.eliminated, row.phase_length)
        assert metrics["mean_observed_reward"] == pytest.approx(row.mean_observed_reward, rel=0, abs=0)
    (score,) = result.evaluate_metrics_serverapp.values()
    assert score["regret"] == inprocess.summary["regret"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_strategy_classes_check_their_arguments_in_one_line(algorithm: str) -> None:
    assert [cls.algorithm for cls in (PFXAB, FedPNE, PFPNE)] == list(federated_names())[:3]
    for name, value in (("alpha", 2.0), ("horizon", 0), ("min_fraction", -1), ("num_clients", 0),
                        ("round_timeout", 0), ("reward_range", (1, 0))):
        with pytest.raises(ConfigError, match=rf"^{name}={re.escape(repr(value))} is invalid; allowed: ") as info:
            STRATEGIES[algorithm](**{"num_clients": 3, "horizon": 1000, name: value})
        assert "\n" not in str(info.value)


def test_unreadable_and_error_replies_are_logged_and_skipped(caplog) -> None:
    config = RunConfig(problem="garland", num_clients=4, horizon=20_000, seed=1)
    tampered: list[str] = []

    def tamper(message: Message, reply: Message) -> Message:
        # phase 1 only: client 2's local report loses its tensors, client 3's active set is an error reply
        config_in = message.content.config_records["config"]
        partition = reply.content.config_records["config"].get(codec.PARTITION_ID)
        if config_in.get("phase") != 1:
            return reply
        if message.metadata.message_type == MessageType.TRAIN and partition == 2:
            tampered.append("unreadable")
            return Message(RecordDict({"config": ConfigRecord({codec.PARTITION_ID: 2})}), reply_to=message)
        if message.metadata.message_type == MessageType.EVALUATE and partition == 3:
            tampered.append("error")
            return Message(Error(code=0, reason="client crashed"), reply_to=message)
        return reply

    with caplog.at_level(logging.WARNING, logger="pfxab_flower"):
        _, strategy = loopback(config, tamper=tamper)
    assert sorted(tampered) == ["error", "unreadable"]
    rejected = strategy.driver.machine.rejected
    assert len(rejected) == 1 and "cannot be read" in rejected[0]["reason"]
    messages = [r.getMessage() for r in caplog.records]
    assert "phase 1: client 3 (Flower node 103) sent no usable active-set reply: client crashed" in messages
    assert strategy.driver.finished and strategy.run_result().summary["failures"] == 2


def test_malformed_final_replies_are_rejected_and_never_crash_the_result() -> None:
    config = RunConfig(problem="garland", num_clients=4, horizon=20_000, seed=1)

    def tamper(message: Message, reply: Message) -> Message:
        # the final round: client 1 names node 2^62, client 2 a NaN point, client 3 a point of another length
        if codec.FINISH_KEY not in message.content.config_records["config"]:
            return reply
        arrays, metrics = records.from_record(reply.content)
        node, point = arrays[codec.NODE_ID], arrays[codec.POINT]
        partition = metrics[codec.PARTITION_ID]
        if partition == 1:
            node = np.array([2**62], dtype=np.int64)
        elif partition == 2:
            point = np.full_like(point, np.nan)
        elif partition == 3:
            point = np.append(point, 0.5)
        return Message(records.to_record({codec.NODE_ID: node, codec.POINT: point}, metrics), reply_to=message)

    result, strategy = loopback(config, tamper=tamper, min_fraction=0.25)  # 1 of 4 final replies is the quorum
    honest = engine.run_config(config).summary["final_points"]
    driver = strategy.driver
    assert driver.finished and {1, 2} <= set(driver.lost_clients())
    assert {(r["client"], r["stage"]) for r in driver.machine.rejected} >= {(1, "finish"), (2, "finish")}
    points = result.arrays["final-points"].numpy()
    assert points.shape == (4, 1) and np.all(np.isnan(points[[1, 2, 3]]))  # a point of another length is not shown
    np.testing.assert_array_equal(points[0], honest[0])
    assert list(result.arrays["final-nodes"].numpy()[[1, 2]]) == [0, 0]


def test_a_node_beyond_the_clients_stands_by(caplog) -> None:
    config = RunConfig(num_clients=3, horizon=20_000, seed=2)
    with caplog.at_level(logging.INFO, logger="pfxab_flower"):
        _, strategy = loopback(config, nodes=5)
    assert strategy.driver.machine.rejected == [] and strategy.run_result().summary["failures"] == 0
    assert sum("stands by" in r.getMessage() for r in caplog.records) == 2
    assert strategy.run_result().summary["regret"] == engine.run_config(config).summary["regret"]


def test_too_few_nodes_stop_the_run_with_one_line() -> None:
    config = RunConfig(num_clients=4, horizon=20_000, seed=2)
    strategy = PFXAB(num_clients=4, horizon=20_000, round_timeout=0.5)
    grid = LoopbackGrid(2, message_client_app(federation_sessions(build_federation(config))))
    with pytest.raises(RunStoppedError, match=r"only 2 of the 4 nodes the run needs are connected") as info:
        run_loopback(strategy, grid)
    assert "\n" not in str(info.value) and grid.sent == 0


def test_api_key_is_validated_and_round_trips() -> None:
    for api in APIS:
        config, options = parse_run_config({"api": api, "num-clients": 3})
        assert options.api == api and to_run_config(config, options)["api"] == api
    with pytest.raises(ConfigError, match=r"api='grpc' is invalid; allowed: message, legacy"):
        parse_run_config({"api": "grpc"})
    assert AppOptions().api in APIS


def test_client_state_survives_context_state() -> None:
    state = ClientState(completed=2, pulls=70, active=np.array([8, 9, 12]), choice=5, union=np.array([4, 5, 7]),
                        means=np.array([0.1, 0.2, 0.3]), counts=np.array([4, 4, 2]), explored=10,
                        statistics={"variance": np.array([0.01, 0.0, 0.25])},
                        memory={"points": np.array([2**48 + 5, 2**48 + 9]), "hyper": np.array([-1.5, 0.25, -3.0])})
    environment = {"pull-nodes": np.array([2, 3, 2]), "pull-counts": np.array([5, 5, 7])}
    record = RecordDict()
    FlowerStore(record).save(state, environment)
    back, back_env = FlowerStore(record).load()
    for key, value in state.to_arrays().items():
        np.testing.assert_array_equal(back.to_arrays()[key], value)
        assert back.to_arrays()[key].dtype == np.asarray(value).dtype
    for key, value in environment.items():
        np.testing.assert_array_equal(back_env[key], value)
    np.testing.assert_array_equal(back.statistics["variance"], state.statistics["variance"])
    assert back.memory.keys() == state.memory.keys()  # a proposal policy's history, bit for bit
    assert all(back.memory[k].tobytes() == v.tobytes() for k, v in state.memory.items())


def test_the_reply_polling_slows_with_the_number_of_messages_awaited() -> None:
    """10 ms at small M (measured faster there), Flower's own 0.1 s from 1000 messages (each poll scans them all)."""
    from pfxab_flower.strategies.message import pull_interval

    intervals = [pull_interval(n) for n in (1, 10, 100, 300, 1000, 5000)]
    assert intervals == pytest.approx([0.01, 0.01, 0.01, 0.03, 0.1, 0.1])


_USERS_OWN_SERVER = """
import numpy as np
from pfxab_flower.client_apps import message_client_app, objective_sessions
from pfxab_flower.strategies import {strategy}
from tests.message_loopback import LoopbackGrid, run_loopback

objective = lambda points, m: 1 - np.abs(points[:, 0] - 0.3 - 0.2 * m)
app = message_client_app(objective_sessions(objective, {{"x": (0, 1)}}))
run_loopback({strategy}(num_clients=3, horizon=20_000, seed=0), LoopbackGrid(3, app))
"""


@pytest.mark.parametrize("strategy", ["PFXAB", "PFPNE"])
def test_a_users_own_server_logs_the_bundled_apps_phase_lines(strategy: str) -> None:
    """A process that configured no logging (a user's ServerApp) shows one line per phase, as ``pfxab simulate``."""
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", _USERS_OWN_SERVER.format(strategy=strategy)], capture_output=True,
                          text=True, timeout=patient(120), cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr[-2000:]
    phases = re.findall(r"^pfxab: phase (\d+) \(depth \d+\): \d+ active nodes, \d+ eliminated, \d+ pulls per client",
                        done.stderr, re.MULTILINE)
    assert phases and phases == [str(p) for p in range(1, len(phases) + 1)], done.stderr[-2000:]
    assert re.search(r"^pfxab: final exchange: 3 of 3 clients sent their final point", done.stderr, re.MULTILINE)
