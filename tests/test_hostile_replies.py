"""A hostile client can neither crash the server nor another client, whatever it sends.

Each test runs honest clients and one or two tampered ones through the core's driver
(every engine uses it): the tampered reply is rejected and counted, the honest ones are
averaged exactly as if the tampered client had said nothing, and the run goes on.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import numpy as np
import pytest

from pfxab_flower.algorithms.messages import FinishInstruction, LocalReport
from pfxab_flower.algorithms.phased import pooled_means
from pfxab_flower.errors import ObjectiveError
from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.sampling import SimulatedEnvironment
from pfxab_flower.running.client_session import ClientSession, MemoryStore
from pfxab_flower.running.driver import ServerDriver
from pfxab_flower.running.engine import make_settings
from pfxab_flower.running.exchanges import Exchange
from tests.conftest import tent_federation

M = 4


def federation() -> Federation:
    """Four tents, whose values lie in [0, 1] as the federation declares."""
    fed = tent_federation([0.2, 0.4, 0.6, 0.8])
    return Federation.from_callables(fed.objectives, fed.domain, noise_sigma=0.1, value_range=(0.0, 1.0))


def start(fed: Federation) -> tuple[ServerDriver, list[ClientSession]]:
    settings = make_settings(M, alpha=0.5, horizon=100_000, seed=0, min_fraction=0.5, reward_range=fed.reward_range)
    driver = ServerDriver("pf-xab", settings, fed)
    sessions = [ClientSession(m, MemoryStore(), partial(SimulatedEnvironment.restored, fed, m)) for m in range(M)]
    return driver, sessions


def explore(driver: ServerDriver, sessions: list[ClientSession], tamper) -> tuple:
    instruction = driver.next_instruction()
    reports = [s.handle(instruction).report for s in sessions]
    honest = [r for r in reports if r.client not in tamper]
    sent = [tamper[r.client](r) if r.client in tamper else r for r in reports]
    update = driver.local_means(instruction, Exchange(reports=sent))
    return instruction, honest, update


@pytest.mark.parametrize(
    "name, tamper",
    [
        ("one client sends -1e308", {1: lambda r: dataclasses.replace(r, means=np.full_like(r.means, -1e308))}),
        ("two clients send 1e308", {1: lambda r: dataclasses.replace(r, means=np.full_like(r.means, 1e308)),
                                    2: lambda r: dataclasses.replace(r, means=np.full_like(r.means, 1e308))}),
        ("means just outside the reward range", {3: lambda r: dataclasses.replace(r, means=r.means + 10.0)}),
        ("inflated counts", {0: lambda r: dataclasses.replace(r, counts=r.counts * 1000)}),
        ("counts on nodes it does not own", {0: lambda r: dataclasses.replace(r, counts=r.counts + 1)}),
    ],
)
def test_a_hostile_local_report_is_rejected_and_the_honest_ones_averaged(name, tamper) -> None:
    driver, sessions = start(federation())
    instruction, honest, update = explore(driver, sessions, tamper)
    assert update is not None, name
    np.testing.assert_array_equal(update.global_means, pooled_means(instruction.node_ids, honest))
    assert len(driver.machine.rejected) == len(tamper)
    assert np.all(np.isfinite(update.global_means))
    # every honest client eliminates with the update without failing
    for session in sessions:
        session.handle(update)


def replies(sessions: list[ClientSession], message) -> Exchange:
    """Every session's reply, with its pull log (the driver asks for it: it knows the federation)."""
    exchange = Exchange()
    for s in sessions:
        reply = s.handle(message)
        exchange.add(reply.report, None, reply.harness)
    return exchange


def finish_with(final: dict[int, object], point: dict[int, object] | None = None,
                best: dict[int, dict[str, object]] | None = None) -> ServerDriver:
    """A run whose final replies carry ``final`` nodes, ``point``s or changes of their best observed point."""
    driver, sessions = start(federation())
    while not isinstance(instruction := driver.next_instruction(), FinishInstruction):
        update = driver.local_means(instruction, replies(sessions, instruction))
        driver.active_sets(update, replies(sessions, update))
    exchange = replies(sessions, instruction)
    for i, report in enumerate(exchange.reports):
        node = final.get(report.client, report.node_id)
        exchange.reports[i] = dataclasses.replace(report, node_id=node,
                                                  point=(point or {}).get(report.client, report.point),
                                                  **(best or {}).get(report.client, {}))
    driver.final_nodes(instruction, exchange)
    return driver


@pytest.mark.parametrize("change", [
    {"best_point": np.array([0.123])}, {"best_point": np.array([0.5, 0.5])}, {"best_mean": 1.5},
    {"best_mean": np.nan}, {"best_pulls": 0}, {"best_pulls": 10**9}, {"best_node_id": 0}, {"best_pulls": None},
], ids=["not-its-centre", "2-d", "mean-out-of-range", "nan-mean", "no-pulls", "pulls-beyond-T", "node-0",
        "incomplete"])
def test_a_hostile_best_observed_point_is_rejected(change) -> None:
    honest = finish_with({})
    assert honest.lost_clients() == [] and honest.best_node_ids().all()  # every client observed something
    driver = finish_with({}, best={1: change})
    assert driver.lost_clients() == [1] and "best observed" in driver.machine.rejected[-1]["reason"]
    assert driver.result("inprocess").summary["best_points"][1] is None


@pytest.mark.parametrize("node", [2**62, 2**63 - 1, 1, -7, 0, 3.9, True, "5"],
                         ids=["2^62", "int64-max", "root", "negative", "zero", "float", "bool", "string"])
def test_a_hostile_final_node_is_rejected_and_the_run_still_scores(node) -> None:
    driver = finish_with({2: node})
    assert driver.machine.rejected[-1]["client"] == 2 and driver.machine.rejected[-1]["stage"] == "finish"
    assert driver.lost_clients() == [2]
    result = driver.result("inprocess")  # no crash: the others are scored, client 2 up to its last report
    assert result.summary["final_points"][2] is None
    final_exchange = driver.machine.completed + 1
    assert result.summary["lost_clients"] == [{"client": 2, "site": None, "flower_node": None, "phase": final_exchange,
                                               "reason": driver.machine.rejected[-1]["reason"]}]


@pytest.mark.parametrize("point", [np.array([np.nan]), np.array([np.inf]), np.zeros((1, 1)), np.array([], float),
                                   np.array([1])], ids=["nan", "inf", "2-d", "empty", "int"])
def test_a_hostile_final_point_is_rejected(point) -> None:
    driver = finish_with({}, {1: point})
    assert driver.lost_clients() == [1]


def test_a_final_node_off_the_clients_branch_is_rejected() -> None:
    honest = finish_with({})
    depth_nodes = range(2 ** honest.machine.reported_phase[0], 2 ** (honest.machine.reported_phase[0] + 1))
    held = set((honest.machine.client_sets[0] // 2).tolist())
    other = next(n for n in depth_nodes if n not in held)  # same depth, but client 0 holds nothing below it
    driver = finish_with({0: other})
    assert driver.lost_clients() == [0], "a node of another branch than client 0's active set"


def test_an_objective_beyond_the_value_limit_is_one_objective_error() -> None:
    fed = Federation.from_callables([lambda x: np.full(len(x), 1e300)], {"x": (0.0, 1.0)})
    with pytest.raises(ObjectiveError, match=r"returned 1e\+300 .* allowed: finite values in"):
        fed.evaluate(0, np.array([[0.5]]))


def test_reports_inside_the_declared_range_are_all_used() -> None:
    driver, sessions = start(federation())
    _, honest, update = explore(driver, sessions, {})
    assert update is not None and driver.machine.rejected == [] and len(honest) == M
    low, high = federation().reward_range
    assert (low, high) == (-0.1, 1.1)
    assert all(isinstance(r, LocalReport) for r in honest)


# -- 13. a client's text reaches the server's log and results as one printable line ------------------------

#: What a hostile client put in its error reason, its claimed partition-id and its site label: cursor movement,
#: a terminal title, colours, a NUL, a forged log line and a right-to-left override.
ESCAPES = "\x1b[2J\x1b[H\x1b]0;owned\x07\x1b[31mred\x00\nWARNING fake line\u202eevil"


def test_a_clients_text_reaches_the_log_and_the_result_as_one_printable_line(caplog) -> None:
    """Escape sequences in a client's error reason reached the server's log intact (issue 37, class 13)."""
    from flwr.app import Error, Message
    from flwr.common.constant import ErrorCode

    from pfxab_flower.running.wire import codec
    from pfxab_flower.schema.run_config import RunConfig
    from tests.impostors import phase_of, rewrite
    from tests.test_flower_message import loopback

    def tamper(message: Message, reply: Message) -> Message:
        node = message.metadata.dst_node_id
        if node == 101:  # partition 1: an error reply whose reason is hostile (and one readable part)
            return Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION,
                                 reason=f"KeyError: 'data-dir' {ESCAPES}"), reply_to=message)
        if node == 102 and phase_of(message) == 2:  # partition 2: a claim that is hostile text, so unreadable
            return rewrite(reply, message, lambda arrays, config: config.update({codec.PARTITION_ID: ESCAPES}))
        if node == 100:  # partition 0: a hostile site label on an otherwise honest reply
            return rewrite(reply, message, lambda arrays, config: config.update({codec.SITE: ESCAPES[:60]}))
        return reply

    with caplog.at_level("INFO", logger="pfxab_flower"):
        _, strategy = loopback(RunConfig(num_clients=4, horizon=20_000), tamper=tamper)
    summary = strategy.run_result().summary
    logged = [record.getMessage() for record in caplog.records if record.name.startswith("pfxab_flower")]
    assert any("KeyError: 'data-dir'" in line for line in logged)  # the reason's type and message stay readable
    assert any("\\x1b[2J" in line and "\\u202eevil" in line for line in logged)  # the rest is written as escapes
    texts = [*logged, *(lost["reason"] for lost in summary["lost_clients"]), *map(str, summary["sites"])]
    unsafe = [text for text in texts if not text.replace("\t", " ").isprintable()]  # our own summary lines: tabs
    assert not unsafe, unsafe[:1]
    assert summary["lost_clients"][0]["client"] == 1 and summary["sites"][0].startswith("\\x1b[2J")
    # the other way: a hostile server's keys in the reason a ClientApp logs and replies with
    from pfxab_flower.client_apps.foreign import ForeignMessageError

    assert str(ForeignMessageError("Message API", "train", f"config keys: {ESCAPES}")).isprintable()
