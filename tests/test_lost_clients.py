"""Lost clients are named: client index, Flower node, phase and reason, in the Result, the summary and the log.

A client is lost when it has no usable final report: its SuperNode died, or its final reply
was an error or rejected. Both Flower APIs, over in-process loopbacks (no Ray):

* Message API: node 102 leaves the federation after phase 1, client 3's final reply is an
  error; ``Result.arrays["lost-clients"]``, ``strategy.lost_clients`` and the summary's
  ``lost_clients`` list both, and their final points are NaN;
* legacy API: node 102's proxy fails from phase 2 on (Flower's ``Server`` loop);
  ``strategy.lost_clients``, the summary and Flower's ``History`` list it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

import numpy as np
from flwr.app import Error, Message

from pfxab_flower.client_apps import federation_sessions, message_client_app
from pfxab_flower.problems import build_federation
from pfxab_flower.running import engine
from pfxab_flower.running.wire import codec
from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.simulations.flower.app_builders import strategy_of
from pfxab_flower.strategies import PFXAB
from tests.flower_loopback import LoopbackProxy
from tests.flower_loopback import run_loopback as run_legacy_loopback
from tests.message_loopback import LoopbackGrid, run_loopback

CONFIG = RunConfig(problem="garland", num_clients=4, horizon=20_000, seed=1)
GONE = "its Flower node is gone (no heartbeat, or unregistered)"


class NodeDiesGrid(LoopbackGrid):
    """Node 102 (client 2) stops being listed once phase 1's eight messages are sent, as a dead SuperNode."""

    def get_node_ids(self) -> Iterable[int]:
        return [node for node in self.contexts if not (node == 102 and self.sent >= 8)]


def final_error_for_client_3(message: Message, reply: Message) -> Message:
    if codec.FINISH_KEY in message.content.config_records["config"] and message.metadata.dst_node_id == 103:
        return Message(Error(code=0, reason="disk full"), reply_to=message)
    return reply


def test_message_api_names_lost_clients_in_the_result_the_summary_and_the_log(caplog) -> None:
    federation = build_federation(CONFIG)
    strategy = PFXAB(num_clients=4, horizon=CONFIG.horizon, seed=CONFIG.seed, federation=federation)
    grid = NodeDiesGrid(4, message_client_app(federation_sessions(federation)), tamper=final_error_for_client_3)
    with caplog.at_level(logging.INFO, logger="pfxab_flower"):
        result = run_loopback(strategy, grid)
    final = strategy.driver.machine.completed + 1  # the final exchange's phase number
    expected = [{"client": 2, "site": None, "flower_node": 102, "phase": 2, "reason": GONE},
                {"client": 3, "site": None, "flower_node": 103, "phase": final, "reason": "disk full"}]
    assert strategy.lost_clients == expected
    np.testing.assert_array_equal(result.arrays["lost-clients"].numpy(), [[2, 102, 2], [3, 103, final]])
    points = result.arrays["final-points"].numpy()
    assert np.all(np.isnan(points[[2, 3]])) and np.all(np.isfinite(points[[0, 1]]))
    summary = strategy.run_result().summary
    assert summary["lost_clients"] == expected
    assert summary["final_points"][2] is None and summary["final_points"][3] is None
    messages = [r.getMessage() for r in caplog.records]
    assert "phase 2: client 2 (Flower node 102) is gone (no heartbeat, or unregistered); it counts as failed from " \
           "now on" in messages
    assert f"client 2 (Flower node 102) was lost in phase 2: {GONE}; its final point is NaN, its regret covers " \
           "the pulls it reported" in messages
    assert "client 3 (Flower node 103) was lost in the final exchange: disk full; its final point is NaN, its " \
           "regret covers the pulls it reported" in messages
    assert f"phase {final}: client 3 (Flower node 103) sent no usable finish reply: disk full" in messages


class DyingProxy(LoopbackProxy):
    """Node 102's proxy fails every message after its first two (phase 1's), as a SuperNode that died."""

    calls = 0

    def fit(self, ins, timeout, group_id):
        self._maybe_dead()
        return super().fit(ins, timeout, group_id)

    def evaluate(self, ins, timeout, group_id):
        self._maybe_dead()
        return super().evaluate(ins, timeout, group_id)

    def _maybe_dead(self) -> None:
        self.calls += 1
        if self.node_id == 102 and self.calls > 2:
            raise ConnectionError("node 102 stopped answering")


def test_legacy_api_names_lost_clients_in_the_summary_and_the_history(caplog) -> None:
    federation = build_federation(CONFIG)
    strategy = strategy_of(CONFIG, AppOptions(api="legacy"), federation)
    with caplog.at_level(logging.INFO, logger="pfxab_flower"):
        history = run_legacy_loopback(strategy, federation_sessions(federation), 4, proxy=DyingProxy)
    expected = [{"client": 2, "site": None, "flower_node": 102, "phase": 2, "reason": "node 102 stopped answering"}]
    assert strategy.lost_clients == expected
    assert strategy.run_result().summary["lost_clients"] == expected
    assert np.all(np.isnan(strategy.final_points()[2])) and np.all(np.isfinite(strategy.final_points()[[0, 1, 3]]))
    (_, text), = history.metrics_distributed_fit["lost-clients"]
    assert json.loads(text) == expected
    messages = [r.getMessage() for r in caplog.records]
    assert "phase 2: client 2 (Flower node 102) sent no usable local-means reply: node 102 stopped answering" in \
        messages


def test_no_lost_client_leaves_an_empty_list_everywhere() -> None:
    federation = build_federation(CONFIG)
    strategy = PFXAB(num_clients=4, horizon=CONFIG.horizon, seed=CONFIG.seed, federation=federation)
    result = run_loopback(strategy, LoopbackGrid(4, message_client_app(federation_sessions(federation))))
    assert strategy.lost_clients == [] and result.arrays["lost-clients"].numpy().shape == (0, 3)
    assert strategy.run_result().summary["lost_clients"] == engine.run_config(CONFIG).summary["lost_clients"] == []
