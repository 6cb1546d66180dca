"""``pf-sh`` under failures and lies: a silent client does not hold the union open, a returning one resumes from
what it holds, and a reply that breaks the halving rule is rejected and counted (issue 46).

The failures are the ``FaultPlan``'s, which every engine applies alike: the in-process engine and Flower's
own loops over in-process proxies (``tests/flower_loopback.py``, ``tests/message_loopback.py``) give the
same numbers. SecAgg+ with dropouts: tests/test_secure_aggregation.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

import numpy as np
import pytest

from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.messages import ActiveSetReport, Message
from pfxab_flower.client_apps import federation_sessions, message_client_app
from pfxab_flower.errors import ConfigError
from pfxab_flower.faults import FaultPlan
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.sampling import SimulatedEnvironment
from pfxab_flower.running import engine
from pfxab_flower.running.client_session import ClientSession, MemoryStore
from pfxab_flower.running.driver import ServerDriver
from pfxab_flower.running.exchanges import Exchange
from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.simulations.flower.app_builders import strategy_of
from tests.flower_loopback import run_loopback
from tests.message_loopback import LoopbackGrid
from tests.message_loopback import run_loopback as run_message_loopback

SAME_KEYS = ("regret", "regret_per_client", "final_nodes", "final_points", "phases", "communication_rounds",
             "rejected_replies", "failures", "candidates")


@dataclasses.dataclass(frozen=True)
class MissesPhases(FaultPlan):
    """A plan whose chosen client misses exactly the chosen phases (both replies of each)."""

    phases: tuple[int, ...] = ()

    def selects(self, client: int, phase: int) -> bool:
        return self.clients is not None and client in self.clients and phase in self.phases


def garland(clients: int) -> Federation:
    return build_federation(RunConfig(problem="garland", num_clients=clients))


def test_a_client_that_misses_every_round_is_left_out_of_the_union_the_others_halve() -> None:
    federation = garland(4)
    settings = engine.make_settings(4, algorithm="pf-sh", alpha=0.5, horizon=40_000, seed=5, candidates=64)
    sim = engine.simulate(federation, make_policy("pf-sh"), settings, keep_messages=True,
                          faults=FaultPlan(seed=5, rate=1.0, clients=(2,)))
    server = sim.server
    assert server.counted == [True, True, False, True]
    assert server.client_sets[2].size == 64 and sim.stores[2].state.active.size == 64  # it keeps what it holds
    instructions = [message for message, _ in sim.messages if hasattr(message, "global_pulls")]
    for phase, after in enumerate(instructions[1:], start=1):
        replies = {report.client: report.node_ids for report in sim.messages[2 * phase - 1][1]}
        assert sorted(replies) == [0, 1, 3]
        assert np.array_equal(after.node_ids, np.unique(np.concatenate(list(replies.values()))))
    assert all(server.client_sets[m].size == 1 for m in (0, 1, 3))
    assert [int(env.log.counts.sum()) for env in sim.envs] == [40_000] * 4


def test_a_client_that_comes_back_resumes_from_what_it_holds_that_is_still_in_play() -> None:
    federation = garland(4)
    settings = engine.make_settings(4, algorithm="pf-sh", alpha=0.5, horizon=40_000, seed=1, candidates=64)
    sim = engine.simulate(federation, make_policy("pf-sh"), settings, keep_messages=True,
                          faults=MissesPhases(clients=(1,), rate=1.0, phases=(2, 3)))
    held = sim.messages[1][1][1].node_ids  # client 1's set after round 1
    instruction = sim.messages[6][0]  # round 4: its union formed without client 1, which missed round 3
    report = next(r for r in sim.messages[6][1] if r.client == 1)  # its round-4 local means
    in_play = np.intersect1d(held, instruction.node_ids)
    assert 0 < in_play.size < held.size
    g, loc = instruction.global_pulls, instruction.local_pulls  # its own pulls only on what it had in play
    assert np.array_equal(report.counts, np.where(np.isin(instruction.node_ids, in_play), g + loc, g))
    kept = next(r for r in sim.messages[7][1] if r.client == 1).node_ids
    assert np.all(np.isin(kept, in_play)) and kept.size <= (in_play.size + 1) // 2
    assert sim.server.rejected == [] and sim.server.counted[1]


@pytest.mark.parametrize("api", ["legacy", "message"])
def test_one_client_failing_every_round_gives_the_same_numbers_in_flower_and_in_process(api) -> None:
    config = RunConfig(problem="garland-2d", algorithm="pf-sh", num_clients=4, alpha=0.5, horizon=30_000, seed=3)
    federation = build_federation(config)
    plan = FaultPlan(seed=3, rate=1.0, clients=(2,))
    strategy = strategy_of(config, AppOptions(api=api), federation)
    if api == "legacy":
        run_loopback(strategy, federation_sessions(federation, plan), config.num_clients)
    else:
        run_message_loopback(strategy, LoopbackGrid(config.num_clients, message_client_app(
            federation_sessions(federation, plan))))
    flower = strategy.run_result()
    inprocess = engine.run(federation, algorithm="pf-sh", alpha=0.5, horizon=30_000, seed=3, faults=plan)
    for key in SAME_KEYS:
        assert flower.summary[key] == inprocess.summary[key], key
    assert flower.phases.equals(inprocess.phases)


def run_with(federation: Federation, settings, tamper: Callable[[Message], Message]) -> ServerDriver:
    """The in-process loop, with each reply passed through ``tamper`` before the server reads it."""
    driver = ServerDriver("pf-sh", settings, federation)
    sessions = [ClientSession(m, MemoryStore(), partial(SimulatedEnvironment.restored, federation, m))
                for m in range(federation.num_clients)]
    while (outgoing := driver.next_exchange()) is not None:
        exchange = Exchange()
        for session in sessions:
            reply = session.handle(outgoing.message)
            exchange.add(tamper(reply.report), None, reply.harness)
        driver.deliver(exchange)
    return driver


@pytest.mark.parametrize(("lie", "reason"), [
    ("keeps all it held", "active set keeps 64 of the 64 candidates in play, more than 32"),
    ("adds an id it never held",
     "active set holds node ids that are not distinct survivors of the client's previous set"),
])
def test_a_reply_that_breaks_the_halving_rule_is_rejected_counted_and_left_out_of_the_union(lie, reason) -> None:
    federation = garland(3)
    settings = engine.make_settings(3, algorithm="pf-sh", alpha=0.5, horizon=30_000, seed=2, candidates=64,
                                    reward_range=federation.reward_range)
    first = make_policy("pf-sh").first_active_set(settings)

    def liar(report: Message) -> Message:
        if not isinstance(report, ActiveSetReport) or report.client != 1 or report.node_ids.size >= 64:
            return report
        if lie == "keeps all it held":
            return dataclasses.replace(report, node_ids=first.copy())
        return dataclasses.replace(report, node_ids=np.union1d(report.node_ids, [int(first[0]) ^ 1]))

    driver = run_with(federation, settings, liar)
    machine = driver.machine
    assert machine.rejected[0] == {"phase": 1, "stage": "active-set", "client": 1, "reason": reason}
    assert machine.history[0]["failed_active_sets"] == 1 and machine.failures >= 1
    assert not machine.counted[1] and machine.history[0]["next_active_nodes"] < 64  # the union closes without it
    honest = run_with(federation, settings, lambda report: report).machine
    assert honest.rejected == [] and driver.finished


def test_keeping_all_is_no_lie_for_a_client_whose_exploration_did_not_arrive() -> None:
    policy = make_policy("pf-sh")
    held, union = np.arange(100, 164), np.arange(100, 132)
    assert policy.kept_problem(held, union, held, explored=False) is None  # it missed the round: it keeps all
    assert policy.kept_problem(held, union, held, explored=True) is not None
    assert policy.kept_problem(held, union, union[:16], explored=True) is None  # half of what it had in play
    assert policy.kept_problem(held, union, union[:17], explored=True) is not None
    assert policy.kept_problem(held, np.arange(10), held, explored=True) is None  # nothing in play: it keeps its own


def test_max_depth_below_the_count_is_refused_in_one_line_or_the_rules_count_states_what_it_used(capsys) -> None:
    from pfxab_flower.simulations.cli.main import main

    assert main(["run", "--algorithm", "pf-sh", "--candidates", "8", "--max-depth", "1", "--horizon", "10000"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "pfxab run: error: --candidates=8 is invalid with --max-depth=1; allowed: at most 2 (the cells of depth 1), "
        "or a larger --max-depth")
    with pytest.raises(ConfigError, match=r"^candidates=8 is invalid with max_depth=2; allowed: at most 4"):
        engine.run(garland(2), "pf-sh", horizon=10_000, candidates=8, max_depth=2)
    result = engine.run(garland(2), "pf-sh", horizon=10_000, max_depth=3)  # the rule's count, within 2**3 cells
    assert result.summary["candidates"] == 8
    assert all(8 <= node < 16 for node in result.summary["final_nodes"])
