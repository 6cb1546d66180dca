"""Apps that are not ours: one clear error, never a traceback, on both sides and both Flower APIs.

* our ClientApp (Message API and legacy) answers a message it cannot read (Flower's
  ``FedAvg``, another pfxab-flower version, the other Flower API) with an error reply
  naming what it got and what it expected, and logs that once per node;
* our strategy facing a ClientApp that is not ours stops the run with one line naming
  what the replies held and what was expected;
* the same through Flower's Ray simulation engine (``ray``): ``FedAvg`` against
  ``objective_client_app``, and ``PFXAB`` against an example-style ClientApp.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.clientapp import ClientApp
from flwr.common import Code as StatusCode
from flwr.common import FitIns, FitRes, Parameters, Status, ndarrays_to_parameters
from flwr.common.constant import ErrorCode
from flwr.compat.common.recorddict_compat import fitins_to_recorddict

from pfxab_flower import __version__
from pfxab_flower.algorithms.messages import FinishInstruction, GlobalUpdate, PhaseInstruction
from pfxab_flower.client_apps import legacy_client_app, message_client_app, objective_sessions
from pfxab_flower.client_apps.foreign import LOGGED_KEY
from pfxab_flower.errors import RunStoppedError
from pfxab_flower.flower_shared import records
from pfxab_flower.running.wire import codec
from pfxab_flower.schema.spec import AlgorithmSpec
from pfxab_flower.strategies import PFXAB, PFXABStrategy
from tests.flower_loopback import run_loopback as run_legacy_loopback
from tests.foreign_apps import echo_client
from tests.message_loopback import LoopbackGrid, as_a_serverapp_process, run_loopback
from tests.patience import patient

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = objective_sessions(lambda points, m: 1.0 - np.abs(points[:, 0] - 0.3), {"x": (0.0, 1.0)})
OURS = PhaseInstruction(1, np.array([2, 3]), 10, 0, AlgorithmSpec.build("pf-xab", num_clients=2, horizon=1000))


def node(partition: int = 0) -> Context:
    return Context(run_id=1, node_id=100 + partition, node_config={"partition-id": partition, "num-partitions": 2},
                   state=RecordDict(), run_config={})


@pytest.fixture(autouse=True)
def _a_server_process() -> None:
    """What a ServerApp process sets before it builds messages."""
    as_a_serverapp_process()


def fedavg_message(message_type: str = MessageType.TRAIN) -> Message:
    """What Flower's FedAvg sends: its arrays and a config with the round."""
    content = RecordDict({"arrays": ArrayRecord({"w": Array(np.zeros(3))}),
                          "config": ConfigRecord({"server-round": 1})})
    return Message(content, dst_node_id=100, message_type=message_type)


def ask(app: ClientApp, message: Message, context: Context) -> Message:
    message.metadata.__dict__["_message_id"] = "m1"  # as the SuperLink sets it
    return app(message, context)


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_the_message_app_answers_fedavg_with_one_error_per_node(caplog) -> None:
    app, context = message_client_app(SESSIONS), node()
    with caplog.at_level(logging.INFO):
        replies = [ask(app, fedavg_message(kind), context) for kind in (MessageType.TRAIN, MessageType.EVALUATE) * 2]
    assert all(reply.has_error() for reply in replies)
    reason = replies[0].error.reason
    assert reason == (f"pfxab-flower {__version__} ClientApp cannot read this train message: it carries no "
                      "pfxab-flower parameters (no param-algorithm; config keys: server-round; 1 array); it answers "
                      "only pfxab-flower's PFXAB, FedPNE or PFPNE strategy (Message API) of the same version")
    assert "evaluate message" in replies[1].error.reason
    assert logged(caplog) == [f"pfxab: Flower node 100 (partition-id 0): {reason} (logged once per node; each such "
                              "message gets this error reply)"]
    assert LOGGED_KEY in context.state
    # another node says it once too
    with caplog.at_level(logging.INFO):
        ask(app, fedavg_message(), node(1))
    assert len(logged(caplog)) == 2 and "Flower node 101 (partition-id 1)" in logged(caplog)[1]


@pytest.mark.parametrize(("change", "expected"), [
    ({"param-algorithm": "pf-xab-2"}, "algorithm='pf-xab-2' is invalid; allowed: "),
    ({"param-alpha": "half"}, "server message is malformed: parameter alpha is 'half', not float"),
    ({"param-horizon": None}, "server message is malformed: its config has no 'param-horizon' (config keys: "),
])
def test_a_message_of_another_version_is_answered_with_what_is_wrong(change: dict, expected: str) -> None:
    arrays, config = codec.broadcast_payload(OURS)
    config = {k: v for k, v in {**config, **change}.items() if v is not None}
    message = Message(records.to_record(arrays, config), dst_node_id=100, message_type=MessageType.TRAIN)
    reply = ask(message_client_app(SESSIONS), message, node())
    assert reply.has_error() and expected in reply.error.reason
    assert reply.error.reason.startswith(f"pfxab-flower {__version__} ClientApp cannot read this train message: ")


def test_the_legacy_app_answers_foreign_messages_with_one_error_per_node(caplog) -> None:
    app, context = legacy_client_app(SESSIONS), node()
    legacy_fedavg = Message(fitins_to_recorddict(FitIns(ndarrays_to_parameters([np.zeros(3)]), {"lr": 0.1}), True),
                            dst_node_id=100, message_type=MessageType.TRAIN)
    with caplog.at_level(logging.INFO):
        other_api = ask(app, fedavg_message(), context)
        foreign = ask(app, legacy_fedavg, context)
    assert other_api.has_error() and foreign.has_error()
    assert ("cannot read this train message: it holds records 'arrays' (ArrayRecord), 'config' (ConfigRecord); "
            "expected records 'fitins.parameters' (ArrayRecord) and 'fitins.config' (ConfigRecord); it answers only "
            "pfxab-flower's PFXABStrategy, FedPNEStrategy or PFPNEStrategy (legacy API)") in other_api.error.reason
    assert "it carries no pfxab-flower parameters (no param-algorithm; config keys: lr; 1 array)" in \
        foreign.error.reason
    assert len(logged(caplog)) == 1  # once per node
    # our own legacy message is answered as before
    arrays, config = codec.positional(codec.broadcast_payload(OURS))
    ours = Message(fitins_to_recorddict(FitIns(ndarrays_to_parameters(arrays), config), True), dst_node_id=100,
                   message_type=MessageType.TRAIN)
    assert ask(app, ours, context).has_content()


def test_our_strategy_stops_in_one_line_facing_a_foreign_client_app(caplog) -> None:
    strategy = PFXAB(num_clients=2, horizon=20_000)
    with caplog.at_level(logging.INFO), pytest.raises(RunStoppedError) as info:
        run_loopback(strategy, LoopbackGrid(2, echo_client()))
    line = str(info.value)
    assert re.fullmatch(
        r"phase 1: only 0 of 2 clients sent a usable local-means reply, fewer than min-fraction=0.5 requires \(1\); "
        r"run stopped; first unreadable reply, from Flower node 10[01]: message content cannot be read: it "
        r"holds records 'arrays' \(ArrayRecord\), 'metrics' \(MetricRecord\); expected records 'arrays' "
        r"\(ArrayRecord\) and 'config' \(ConfigRecord\) \(is every node's ClientApp one of "
        r"pfxab_flower.client_apps, of this version\?\)", line)
    assert logged(caplog) == [f"run stopped: {line}"]
    assert not any("[ROUND 2]" in r.getMessage() for r in caplog.records)  # no round after the stop


class ForeignClient:
    """A legacy client that is not ours: it trains something and reports a loss."""

    def fit(self, ins: FitIns) -> FitRes:
        return FitRes(Status(StatusCode.OK, "Success"), Parameters([], "numpy.ndarray"), 1, {"loss": 0.5})


def test_our_legacy_strategy_stops_in_one_line_facing_a_foreign_client(caplog) -> None:
    strategy = PFXABStrategy(num_clients=2, horizon=20_000)
    with caplog.at_level(logging.INFO):
        run_legacy_loopback(strategy, SESSIONS, 2, client_fn=lambda context: ForeignClient())
    assert re.fullmatch(
        r"phase 1: only 0 of 2 clients sent a usable local-means reply, .*; run stopped; first unreadable reply, "
        r"from Flower node 10[01]: the reply has no 'partition-id' \(config keys: loss\): it is not a "
        r"pfxab-flower client's reply \(is every node's ClientApp one of pfxab_flower.client_apps, of this "
        r"version\?\)", strategy.stop_reason or "")
    assert logged(caplog) == [f"run stopped: {strategy.stop_reason}"]


def run_case(case: str) -> str:
    """The whole log of ``python -m tests.foreign_apps CASE`` (Ray's workers included)."""
    env = {**os.environ, "FLWR_LOG_LEVEL": "INFO", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tests.foreign_apps", case], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=patient(300))
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    return re.sub(r"\x1b\[[0-9;]*m", "", log)


@pytest.mark.exhaustive  # default tier: the same over Flower's loop without Ray (above)
@pytest.mark.ray
@pytest.mark.timeout(400)
def test_fedavg_sent_to_objective_client_app_is_one_error_line_per_node() -> None:
    log = run_case("fedavg")
    assert "Traceback" not in log and "KeyError" not in log, log
    errors = re.findall(r"ERROR\s*:\s+pfxab: Flower node (\d+) \(partition-id (\d)\): pfxab-flower \S+ ClientApp "
                        r"cannot read this train message: it carries no pfxab-flower parameters", log)
    assert len(errors) == 2 and {partition for _, partition in errors} == {"0", "1"}, log
    assert len({node for node, _ in errors}) == 2
    assert len(re.findall(r"ERROR", log)) == 2, log  # nothing else at ERROR
    # FedAvg counted every reply as a failure, with our reason
    assert "aggregate_train: Received 0 results and 2 failures" in log
    assert "aggregate_evaluate: Received 0 results and 2 failures" in log
    assert log.count("Received error in reply from node") == 4
    assert "OUTCOME: FedAvg finished" in log


@pytest.mark.exhaustive  # default tier: the same over Flower's loop without Ray (above)
@pytest.mark.ray
@pytest.mark.timeout(400)
def test_our_strategy_facing_a_foreign_client_app_on_ray_stops_in_one_line() -> None:
    log = run_case("foreign-client")
    assert "Traceback" not in log, log
    stops = re.findall(r"pfxab: run stopped: (.*)", log)
    assert len(stops) == 1, log
    assert f"OUTCOME: RunStoppedError: {stops[0]}" in log
    assert "it holds records 'arrays' (ArrayRecord), 'metrics' (MetricRecord); expected records 'arrays' " \
           "(ArrayRecord) and 'config' (ConfigRecord)" in stops[0]
    assert "[ROUND 2]" not in log


# -- 6. a hostile server cannot exhaust a ClientApp: every value is bounded by the run, before any work ---------

CALLS: list[int] = []


def _counted(points: np.ndarray, partition: int) -> np.ndarray:
    CALLS.append(len(points))
    return 1.0 - np.abs(points[:, 0] - 0.3)


def _phase(phase: int, ids: list[int], global_pulls: int, local_pulls: int) -> PhaseInstruction:
    return PhaseInstruction(phase, np.array(ids), global_pulls, local_pulls,
                            AlgorithmSpec.build("pf-xab", num_clients=2, horizon=1000))


HOSTILE = {  # what a hostile server sent (issue 37, class 6), and what the one line says
    "phase 30": (lambda: _phase(30, [2**30, 2**30 + 1], 1, 0), "phase 30 is not one this run can have: [1, "),
    "phase 10**9": (lambda: _phase(10**9, [2, 3], 1, 0), "phase 1000000000 is not one this run can have"),
    "global-pulls 10**12": (lambda: _phase(1, [2, 3], 10**12, 0), "phase 1 asks 2000000000000 pulls, but horizon=1000"),
    "local-pulls 10**12": (lambda: _phase(1, [2, 3], 0, 10**12), "phase 1 asks 2000000000000 pulls, but horizon"),
    "negative pulls": (lambda: _phase(1, [2, 3], 600, -100), "phase 1 asks a negative number of pulls"),
    "nodes of another depth": (lambda: _phase(1, [4, 5, 6, 7], 1, 0), "are not distinct nodes of depth 1"),
    "node id 0": (lambda: _phase(1, [0, 3], 1, 0), "are not distinct nodes of depth 1 in order"),
    "a phase-length of 10**12": (lambda: GlobalUpdate(1, np.array([2, 3]), np.zeros(2), 10**12, np.zeros(2, bool),
                                                      OURS.parameters), "asks 1000000000000 pulls"),
    "means of another size": (lambda: GlobalUpdate(1, np.array([2, 3]), np.zeros(7), 10, np.zeros(2, bool),
                                                   OURS.parameters), "has means of shape (7,), expected (2,)"),
    "final after 10**9 phases": (lambda: FinishInstruction(10**9, OURS.parameters),
                                 "completed phases 1000000000 is not one this run can have"),
}


@pytest.mark.parametrize("evaluation", ["simulated", "stochastic"])
@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_servers_values_are_bounded_by_the_run_before_any_work(case: str, evaluation: str) -> None:
    """``phase=30`` took 5 GB, ``10**9`` a MemoryError, global-pulls of 10**12 hours of CPU (stochastic: a 2e8-row
    batch to the objective): each is one line now, the objective is never called, and the node goes on."""

    app = message_client_app(objective_sessions(_counted, {"x": (0.0, 1.0)}, evaluation=evaluation))
    context = node()
    make, fragment = HOSTILE[case]
    CALLS.clear()
    refused = ask(app, Message(records.to_record(*codec.broadcast_payload(make())), dst_node_id=100,
                               message_type=MessageType.TRAIN), context)  # an error reply with the check's one line
    assert refused.has_error() and refused.error.code == ErrorCode.CLIENT_APP_RAISED_EXCEPTION
    assert CALLS == [] and fragment in refused.error.reason
    assert "\n" not in refused.error.reason
    reply = ask(app, Message(records.to_record(*codec.broadcast_payload(OURS)), dst_node_id=100,
                             message_type=MessageType.TRAIN), context)  # nothing was kept: the honest phase 1 runs
    assert not reply.has_error() and CALLS


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda arrays, config: arrays.update({codec.NODE_IDS: np.array([2.5, 3.0])}),
     "node ids are float64, not integers"),
    (lambda arrays, config: config.update({"phase": 1.9}), "'phase' is 1.9, not an integer"),
    (lambda arrays, config: config.update({"global-pulls": "10"}), "'global-pulls' is '10', not an integer"),
])
def test_a_server_value_of_another_type_is_refused_not_cast(edit, reason) -> None:
    """Node ids 2.5 were cast to node 2, a phase 1.9 to phase 1 (found by the re-attack of issue 37)."""
    app, context = message_client_app(objective_sessions(_counted, {"x": (0.0, 1.0)})), node()
    arrays, config = codec.broadcast_payload(OURS)
    edit(arrays, config)
    CALLS.clear()
    reply = ask(app, Message(records.to_record(arrays, config), dst_node_id=100, message_type=MessageType.TRAIN),
                context)
    assert reply.has_error() and reason in reply.error.reason and CALLS == []
