"""The server trusts no client: a reply counts only from the node that holds its client, and only a
possible pull log is scored.

* :class:`NodeBinding` and :func:`pull_log_problem` alone;
* Message API over the in-process loopback (no Ray): a final pull log one pull too long (or
  short, or with a node id of -5, or 2**62 pulls) is refused, counted and its client listed
  lost, the others scored exactly as without it; a node that answers for another client from
  phase 2 on is refused every time, the honest client is scored in full, and the run equals
  one where the impostor's own client simply failed from phase 2; two nodes claiming one client
  from the first exchange are both refused;
* legacy API: the same impostor through Flower's ``Server`` loop;
* in-process driver: a rejected reply carrying an empty pull log under another client's id
  cannot replace that client's log nor crash the scoring.

* Flower's Ray simulation engine (``python -m tests.hostile_apps`` in a fresh process): both
  attacks in one run give the loopback's numbers, the honest clients scored in full.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Error, Message

from pfxab_flower.algorithms.messages import FinishInstruction
from pfxab_flower.client_apps import federation_sessions, message_client_app
from pfxab_flower.problems import build_federation
from pfxab_flower.running.exchanges import Exchange
from pfxab_flower.running.trust import NodeBinding, pull_log_problem
from pfxab_flower.running.wire import codec
from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.simulations.flower.app_builders import strategy_of
from pfxab_flower.strategies import PFXAB
from tests.flower_loopback import LoopbackProxy
from tests.flower_loopback import run_loopback as run_legacy_loopback
from tests.impostors import claim, edit_pull_log, from_node, is_final, phase_of
from tests.message_loopback import LoopbackGrid, run_loopback
from tests.patience import patient
from tests.test_hostile_replies import federation as tent_federation
from tests.test_hostile_replies import replies, start

CONFIG = RunConfig(problem="garland", num_clients=4, horizon=20_000, seed=1)
T = CONFIG.horizon


def run_message(tamper=None, order: int = 0) -> tuple[dict, PFXAB]:
    """A Message-API run of ``CONFIG`` over the loopback grid (nodes 100..103 hold partitions 0..3).

    ``order`` seeds the order the replies come back in.
    """
    federation = build_federation(CONFIG)
    strategy = PFXAB(num_clients=4, horizon=T, seed=CONFIG.seed, federation=federation)
    app = message_client_app(federation_sessions(federation))
    run_loopback(strategy, LoopbackGrid(4, app, seed=order, tamper=tamper))
    return strategy.run_result().summary, strategy


@pytest.fixture(scope="module")
def honest() -> dict:
    return run_message()[0]


# -- the core pieces --------------------------------------------------------------------------------
def test_a_client_is_bound_to_the_first_node_that_alone_claims_it() -> None:
    binding = NodeBinding(3)
    assert binding.screen([(0, 10), (1, 11)]) == [None, None]
    assert binding.holder == {0: 10, 1: 11}
    again = binding.screen([(1, 10), (1, 11), (0, 12), (2, 12)])
    assert again[0] == "the reply for client 1 came from Flower node 10, but client 1 is held by Flower node 11"
    assert again[1] is None
    assert again[2] == "the reply for client 0 came from Flower node 12, but client 0 is held by Flower node 10"
    assert again[3] is None and binding.node_of(2) == 12  # node 12 took the free client 2
    assert binding.screen([(0, None), (7, 13), ("x", 13)]) == [None, None, None]  # no node, or not a client
    assert binding.screen([(2, 10)]) == ["the reply for client 2 came from Flower node 10, but client 2 is held by "
                                         "Flower node 12"]
    fresh = NodeBinding(4)
    fresh.screen([(2, 12)])
    assert fresh.screen([(3, 12)]) == ["Flower node 12 holds client 2 and cannot reply for client 3"]
    assert fresh.node_of(3) is None


def test_two_nodes_claiming_one_unbound_client_are_both_refused_and_bind_nothing() -> None:
    binding = NodeBinding(3)
    reasons = binding.screen([(1, 10), (1, 11), (2, 12)])
    assert reasons[0] == reasons[1] == ("client 1 was claimed by Flower nodes 10, 11 in one exchange; the server "
                                        "cannot tell which is the client and uses neither")
    assert reasons[2] is None and binding.holder == {2: 12}
    assert binding.screen([(1, 11)]) == [None] and binding.node_of(1) == 11  # alone later: bound


def test_one_node_claiming_two_clients_in_one_exchange_binds_neither() -> None:
    binding = NodeBinding(3)
    assert binding.screen([(0, 10), (1, 10)]) == ["Flower node 10 claimed several clients in one exchange"] * 2
    assert binding.holder == {}


def log(nodes, counts) -> dict:
    return {"pull-nodes": np.asarray(nodes, dtype=np.int64), "pull-counts": np.asarray(counts, dtype=np.int64)}


@pytest.mark.parametrize("harness, final, reason", [
    (log([2, 3], [5, 5]), True, None),
    (log([2, 3], [5, 4]), False, None),
    ({}, False, None),  # a phase's reply without a pull log: the client's last one stays
    ({}, True, "the final reply carries no pull log"),
    (log([2, 3], [5, 6]), True, "pull log holds 11 pulls, expected the horizon 10"),
    (log([2, 3], [5, 4]), True, "pull log holds 9 pulls, expected the horizon 10"),
    (log([2, 3], [5, 6]), False, "pull log holds 11 pulls, expected at most the horizon 10"),
    (log([-5, 3], [5, 5]), True, "pull log holds node ids that are not nodes of the partition"),
    (log([0], [10]), True, "pull log holds node ids that are not nodes of the partition"),
    (log([2**62], [10]), True, "pull log holds node ids that are not nodes of the partition"),
    (log([2, 3], [0, 10]), True, "pull log holds counts outside [1, 10]"),
    (log([2, 3], [2**62, 10]), True, "pull log holds counts outside [1, 10]"),
    (log([2] * 4, [2**61] * 4), False, "pull log holds counts outside [1, 10]"),
    (log([2, 3], [5]), True, "pull log has 2 node ids and 1 counts, expected as many integers of each"),
    ({"pull-nodes": np.array([2.0]), "pull-counts": np.array([10])}, True,
     "pull log has 1 node ids and 1 counts, expected as many integers of each"),
])
def test_a_pull_log_is_judged_as_a_possible_history(harness, final, reason) -> None:
    assert pull_log_problem(harness, 10, final) == reason


def test_counts_whose_sum_wraps_around_int64_are_refused_not_scored() -> None:
    counts = [2**62, 2**62, 2**62, 2**62, 10]  # int64 sum wraps to 10
    assert int(np.asarray(counts, dtype=np.int64).sum()) == 10
    assert pull_log_problem(log([2] * 5, counts), 2**63 - 1, True) == \
        "pull log holds 1.84467e+19 pulls, expected the horizon 9223372036854775807"


# -- Message API: a pull log that cannot be the client's ---------------------------------------------------
BREAKS = {
    "one pull too many": (lambda nodes, counts: (nodes, np.append(counts[:-1], counts[-1] + 1)), f"{T + 1} pulls"),
    "one pull too few": (lambda nodes, counts: (nodes, np.append(counts[:-1], counts[-1] - 1)), f"{T - 1} pulls"),
    "node id -5": (lambda nodes, counts: (np.append(nodes[:-1], -5), counts), "node ids that are not nodes"),
    "2**62 pulls": (lambda nodes, counts: (nodes, np.append(counts[:-1], 2**62)), "counts outside"),
}


@pytest.mark.parametrize("kind", BREAKS)
def test_a_final_pull_log_that_cannot_be_the_clients_is_refused_and_the_others_scored(kind, honest) -> None:
    change, reason = BREAKS[kind]
    summary, strategy = run_message(from_node(102, lambda m, r: edit_pull_log(m, r, change) if is_final(m) else r))
    final = strategy.driver.machine.completed + 1
    (lost,) = summary["lost_clients"]
    assert (lost["client"], lost["flower_node"], lost["phase"]) == (2, 102, final)
    assert lost["reason"].startswith("pull log holds") and reason in lost["reason"]
    assert summary["rejected_replies"] == honest["rejected_replies"] + 1
    for m in (0, 1, 3):
        assert summary["regret_per_client"][m] == honest["regret_per_client"][m]
        assert summary["final_nodes"][m] == honest["final_nodes"][m]
    # client 2 is scored on the log of its last used reply: every pull up to the last phase
    assert summary["pulls_scored"][2] == strategy.driver.machine.pulls < T
    assert summary["final_points"][2] is None


def test_a_pull_log_too_long_in_a_phase_is_refused_there_and_the_run_goes_on(honest) -> None:
    def too_long(nodes: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return nodes, np.append(counts[:-1], counts[-1] + T + 1 - counts.sum())  # one more than the horizon

    summary, strategy = run_message(from_node(101, lambda m, r: edit_pull_log(m, r, too_long)
                                              if phase_of(m) == 2 and not is_final(m) else r))
    refused = [r for r in strategy.driver.machine.rejected if r["phase"] == 2]
    assert [r["client"] for r in refused] == [1, 1]  # its local means and its active set
    assert all("expected at most the horizon" in r["reason"] for r in refused)
    assert summary["lost_clients"] == [] and summary["pulls_scored"] == [T] * 4


# -- Message API: a node that answers for another client ------------------------------------------------------
def error_from_phase_2(node: int):
    def tamper(message: Message, reply: Message) -> Message:
        if message.metadata.dst_node_id == node and phase_of(message) >= 2:
            return Message(Error(code=0, reason="gone quiet"), reply_to=message)
        return reply

    return tamper


@pytest.mark.parametrize("order", range(6))
def test_a_node_answering_for_another_client_is_refused_and_the_honest_client_scored(order: int) -> None:
    summary, strategy = run_message(from_node(100, claim(1), first_phase=2), order)
    quiet, _ = run_message(error_from_phase_2(100), order)  # the same run, had node 100 only fallen silent
    rejected = strategy.driver.machine.rejected
    phases = strategy.driver.machine.completed
    assert len(rejected) == 2 * (phases - 1) + 1  # each of its replies from phase 2 on, the final one too
    assert all(r["client"] == 1 and r["reason"] == "the reply for client 1 came from Flower node 100, but "
               "client 1 is held by Flower node 101" for r in rejected)
    assert summary["rejected_replies"] == len(rejected)
    (lost,) = summary["lost_clients"]
    assert (lost["client"], lost["flower_node"], lost["phase"]) == (0, 100, 2)
    assert "came from Flower node 100, but client 1 is held by Flower node 101" in lost["reason"]
    assert summary["pulls_scored"][1] == T and summary["final_points"][1] is not None
    for key in ("regret_per_client", "final_nodes", "pulls_scored", "phases"):
        assert summary[key] == quiet[key], key


@pytest.mark.parametrize("order", range(6))
def test_two_nodes_claiming_one_client_from_the_start_are_both_refused(order: int) -> None:
    summary, strategy = run_message(from_node(100, claim(1)), order)
    assert [lost["client"] for lost in summary["lost_clients"]] == [0, 1]
    disputed = "client 1 was claimed by Flower nodes 100, 101 in one exchange"
    assert summary["lost_clients"][1]["reason"].startswith(disputed)
    assert all(r["reason"].startswith(disputed) for r in strategy.driver.machine.rejected)
    assert summary["pulls_scored"][2] == summary["pulls_scored"][3] == T


# -- legacy API ---------------------------------------------------------------------------------------------------
class ImpostorProxy(LoopbackProxy):
    """Node 100 replies for client 1 from phase 2 on (the legacy ``FitRes`` / ``EvaluateRes`` metrics)."""

    def fit(self, ins, timeout, group_id):
        return self._claim(ins, super().fit(ins, timeout, group_id))

    def evaluate(self, ins, timeout, group_id):
        return self._claim(ins, super().evaluate(ins, timeout, group_id))

    def _claim(self, ins, res):
        if self.node_id == 100 and (codec.FINISH_KEY in ins.config or int(ins.config.get("phase", 0)) >= 2):
            res.metrics[codec.PARTITION_ID] = 1
        return res


def test_legacy_api_refuses_a_node_answering_for_another_client() -> None:
    federation = build_federation(CONFIG)
    strategy = strategy_of(CONFIG, AppOptions(api="legacy"), federation)
    run_legacy_loopback(strategy, federation_sessions(federation), 4, proxy=ImpostorProxy)
    summary = strategy.run_result().summary
    assert [lost["client"] for lost in summary["lost_clients"]] == [0]
    assert summary["rejected_replies"] == 2 * (strategy.driver.machine.completed - 1) + 1
    assert summary["pulls_scored"][1] == T


# -- in-process driver ----------------------------------------------------------------------------------------
def test_a_rejected_reply_cannot_attach_its_pull_log_to_another_client() -> None:
    fed = tent_federation()
    driver, sessions = start(fed)
    clean_driver, clean_sessions = start(fed)
    empty = {"pull-nodes": np.zeros(0, dtype=np.int64), "pull-counts": np.zeros(0, dtype=np.int64)}
    for d, s, hostile in ((driver, sessions, True), (clean_driver, clean_sessions, False)):
        while not isinstance(instruction := d.next_instruction(), FinishInstruction):
            exchange = replies(s, instruction)
            if hostile:  # a second reply for client 2: means of 1e300 and an empty pull log
                forged = dataclasses.replace(exchange.reports[3], client=2,
                                             means=np.full_like(exchange.reports[3].means, 1e300))
                exchange = Exchange(reports=[forged, *exchange.reports], harnesses=[empty, *exchange.harnesses])
            update = d.local_means(instruction, exchange)
            d.active_sets(update, replies(s, update))
        d.final_nodes(instruction, replies(s, instruction))
    hostile, clean = driver.result("test").summary, clean_driver.result("test").summary
    assert hostile["regret_per_client"] == clean["regret_per_client"]
    assert hostile["pulls_scored"] == clean["pulls_scored"]
    assert hostile["rejected_replies"] == clean["rejected_replies"] + driver.machine.completed


# -- Flower's Ray simulation ------------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.exhaustive  # default tier: the same impostor and pull logs over Flower's loops without Ray (above)
@pytest.mark.ray
@pytest.mark.timeout(300)
def test_a_ray_simulation_refuses_an_impostor_and_a_long_pull_log_and_scores_the_honest_clients() -> None:
    from tests.hostile_apps import hostile

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tests.hostile_apps"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=patient(280))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    ray = json.loads(done.stdout.strip().splitlines()[-1].removeprefix("SUMMARY "))
    loopback, _ = run_message(lambda message, reply: hostile(message, reply,
                                                             message.metadata.dst_node_id - 100))
    assert [(lost["client"], lost["phase"]) for lost in ray["lost_clients"]] == [(0, 2), (2, ray["phases"] + 1)]
    assert ray["lost_clients"][1]["reason"] == f"pull log holds {T + 1} pulls, expected the horizon {T}"
    assert "but client 1 is held by Flower node" in ray["lost_clients"][0]["reason"]
    assert ray["rejected_replies"] == 2 * (ray["phases"] - 1) + 1 + 1  # the impostor's replies, the long log
    assert ray["pulls_scored"][1] == ray["pulls_scored"][3] == T
    for key in ("regret", "regret_per_client", "final_nodes", "pulls_scored", "phases", "rejected_replies"):
        assert ray[key] == loopback[key], key
