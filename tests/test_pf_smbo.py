"""``pf-smbo`` and the proposal skeleton it runs on.

What is checked here is what the algorithm and the skeleton claim of themselves: phase 1 is a shared initial
design and every later union is the clients' proposals dealt in turn; only ids, means and counts travel; the
server bounds a reply's proposals (count, depth) and assumes none for a lost one, and a client whose proposals
were lost knows it, so the run goes on; a lost proposer's share is dealt to the others' spares; the plan follows
its documented rules and bounds the phases; the split is the cheapest whole one; the model is fitted under one
BLAS thread. That every engine gives the same numbers is checked by the suites that run every registered
algorithm (tests/test_flower_message.py & co.).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pfxab_flower import Federation, run
from pfxab_flower.algorithms.messages import ActiveSetReport, PhaseInstruction
from pfxab_flower.algorithms.phased import ClientMachine, ProtocolError, ServerMachine
from pfxab_flower.algorithms.surrogate.pf_smbo import (
    PFSMBO,
    exploration_rule,
    initial_rule,
    model_rule,
    rate,
    smbo_plan,
)
from pfxab_flower.algorithms.surrogate.proposals import History, deal, initial_design, integer_split, offered, quota
from pfxab_flower.arms.partition import depth_of
from pfxab_flower.errors import ConfigError
from pfxab_flower.problems import synthetic_federation
from pfxab_flower.problems.sampling import SimulatedEnvironment
from pfxab_flower.running import engine
from pfxab_flower.schema.spec import AlgorithmSpec


def tents(centres: tuple[float, ...], noise_sigma: float = 0.1) -> Federation:
    objectives = [lambda x, c=c: 1.0 - np.abs(x[:, 0] - c) for c in centres]
    return Federation.from_callables(objectives, {"x": (0.0, 1.0)}, noise_sigma=noise_sigma)


def settings_of(federation: Federation, **keywords):
    return engine.make_settings(federation.num_clients, algorithm="pf-smbo", dimensions=federation.domain.ndim,
                                reward_range=federation.reward_range, **keywords)


def test_phase_one_is_a_shared_design_and_later_unions_are_the_proposals_dealt_in_turn() -> None:
    federation = synthetic_federation("garland", 4)
    settings = settings_of(federation, alpha=0.5, horizon=400, seed=7)
    policy = PFSMBO()
    plan = policy.plan(settings)
    sim = engine.simulate(federation, policy, settings, keep_messages=True)
    first, replies = sim.messages[0]
    design = initial_design(7, plan[0].points, 48)
    assert np.array_equal(first.node_ids, design) and design.size == initial_rule(1) == 4
    assert not np.array_equal(design, initial_design(8, 4, 48))
    assert np.array_equal(np.sort((design - (1 << 48)) * 4 >> 48), np.arange(4))  # one in each quarter of the ids
    for reply in replies:  # one mean and count per point of the union, nothing else
        assert np.array_equal(reply.node_ids, design) and reply.means.shape == (4,) and set(vars(reply)) == {
            "client", "node_ids", "means", "counts", "statistics"}
    held: set[int] = set(design.tolist())
    for phase in range(1, len(sim.server.history)):
        proposals = sim.messages[2 * phase - 1][1]  # the replies to phase's global update: proposals for phase + 1
        shares = []
        for report in proposals:  # its share (sorted), then spares up to what every client offers
            share = quota(plan, phase + 1, 4, report.client)
            assert report.node_ids.size == offered(plan, phase + 1, 4) >= share
            assert np.array_equal(report.node_ids[:share], np.sort(report.node_ids[:share]))
            assert np.unique(report.node_ids).size == report.node_ids.size
            assert np.all(depth_of(report.node_ids) == 48) and not held & set(report.node_ids.tolist())
            shares.append(report.node_ids[:share])
        union = np.unique(np.concatenate(shares))  # with every reply there, the shares alone
        assert np.array_equal(sim.messages[2 * phase][0].node_ids, union) and union.size == plan[phase].points
        held |= set(union.tolist())
    dealt = [quota(plan, phase, 4, m) for phase in range(2, len(plan) + 1) for m in range(4)]
    assert sum(dealt) == sum(r.points for r in plan[1:])
    per_client = [sum(quota(plan, p, 4, m) for p in range(2, len(plan) + 1)) for m in range(4)]
    assert max(per_client) - min(per_client) <= 1  # in turn: every client proposes its share over the run


def test_the_choice_is_a_point_of_the_history_and_every_client_pulls_the_horizon() -> None:
    federation = synthetic_federation("doublesine", 3)
    settings = settings_of(federation, alpha=0.3, horizon=300, seed=2)
    sim = engine.simulate(federation, PFSMBO(), settings)
    for store, env in zip(sim.stores, sim.envs, strict=True):
        history = History.of(store.state.memory)
        assert store.state.choice in set(history.points.tolist())
        assert int(env.log.counts.sum()) == 300
    assert sim.server.completed == len(sim.server.history) <= PFSMBO().max_phases(settings)
    assert sim.server.communication_rounds == 2 * sim.server.completed + 1


def test_a_run_is_the_same_twice_and_reports_its_rules_values() -> None:
    federation = tents((0.2, 0.3, 0.6))
    first = run(federation, "pf-smbo", alpha=0.5, horizon=200, seed=3)
    second = run(federation, "pf-smbo", alpha=0.5, horizon=200, seed=3)
    assert first.summary["regret"] == second.summary["regret"]
    assert first.summary["final_nodes"] == second.summary["final_nodes"]
    assert first.summary["exploration_share"] == exploration_rule(1)
    assert (first.summary["initial_points"], first.summary["model_points"]) == (initial_rule(1), model_rule(1))
    other = run(federation, "pf-smbo", alpha=0.5, horizon=200, seed=3, exploration_share=0.3, initial_points=6)
    assert (other.summary["exploration_share"], other.summary["initial_points"]) == (0.3, 6)
    with pytest.raises(ConfigError, match=r"^exploration_share=0 is invalid without the search space's dimensions"):
        AlgorithmSpec.build("pf-smbo", num_clients=3, horizon=1000)
    with pytest.raises(ConfigError, match=r"^exploration_share=1.5 is invalid; allowed: a number in \[0, 1\]"):
        run(federation, "pf-smbo", horizon=1000, exploration_share=1.5)


@pytest.mark.parametrize("dimensions", [1, 2, 3, 5])
def test_the_rules_follow_the_assumed_peak(dimensions: int) -> None:
    gamma = 0.5 / (1.0 + dimensions)
    assert rate(dimensions) == pytest.approx(gamma)
    assert exploration_rule(dimensions) == pytest.approx(gamma / (gamma + 2**0.25 - 1.0))
    assert initial_rule(dimensions) == 2 * (dimensions + 1) and model_rule(dimensions) == 64 * (dimensions + 1)


@pytest.mark.parametrize(("horizon", "clients", "alpha"), [(50, 10, 0.1), (200, 5, 0.9), (1000, 10, 0.5),
                                                          (10**6, 10, 0.5), (10**7, 5, 0.0), (3, 4, 1.0)])
def test_the_plan_fits_its_budget_and_its_phases_are_few(horizon: int, clients: int, alpha: float) -> None:
    share, initial, model = exploration_rule(2), initial_rule(2), model_rule(2)
    plan = smbo_plan(horizon, clients, alpha, share, initial, model, 48)
    first = min(initial, horizon)
    assert plan[0].points == first and plan[0].precision == 1
    used, known = first * sum(integer_split(alpha, clients, 1, first, first)), first
    for before, after in itertools.pairwise(plan):
        assert after.points == max(1, math.ceil(min(known, model) / 4))  # a quarter of what the model holds
        known += after.points
        assert after.precision == (1 if known <= model else 2 * before.precision)
        g, loc = integer_split(alpha, clients, after.precision, after.points, math.ceil(after.points / clients))
        used += after.points * g + math.ceil(after.points / clients) * loc
    assert used <= max(math.floor(share * horizon), first * sum(integer_split(alpha, clients, 1, first, first)))
    assert len(plan) <= 60 and (horizon < 10**6 or len(plan) <= 40)  # O(log T) phases


@pytest.mark.parametrize(("alpha", "clients"), [(0.0, 10), (0.1, 10), (0.5, 5), (0.9, 10), (1.0, 4), (0.5, 1)])
@pytest.mark.parametrize("precision", [1, 3, 16, 100])
@pytest.mark.parametrize(("union", "own"), [(10, 1), (40, 4), (8, 8)])
def test_the_split_is_the_cheapest_whole_one_that_reaches_the_precision(alpha, clients, precision, union, own) -> None:
    g, loc = integer_split(alpha, clients, precision, union, own)
    a = alpha + (1 - alpha) / clients
    k = (clients - 1) * ((1 - alpha) / clients) ** 2

    def variance(g: int, loc: int) -> float:
        return (a * a / (g + loc) if g + loc else math.inf) + (k / g if k else 0.0)

    assert variance(g, loc) <= 1.0 / precision * (1 + 1e-9)
    if k == 0:
        assert g == 0
    cheapest = min(union * gg + own * ll for gg in range(0 if k == 0 else 1, 2 * precision + 2)
                   for ll in range(0, 2 * precision + 2) if variance(gg, ll) <= 1.0 / precision * (1 + 1e-9))
    assert union * g + own * loc == cheapest


def server_after_phase_one(seed: int = 1):
    """Phase 1 of three clients, an initial design of 8 points (so phase 2 has two proposers), quorum one client."""
    federation = synthetic_federation("garland", 3)
    settings = settings_of(federation, alpha=0.5, horizon=300, seed=seed, initial_points=8, min_fraction=0.3)
    policy = PFSMBO()
    server = ServerMachine(policy, settings)
    clients = [ClientMachine(policy, settings, m) for m in range(3)]
    envs = [SimulatedEnvironment(federation, m) for m in range(3)]
    instruction = server.next_instruction()
    update = server.aggregate([c.explore(instruction, e) for c, e in zip(clients, envs, strict=True)])
    return server, clients, envs, update, policy.plan(settings)


def test_the_server_bounds_proposals_by_quota_and_depth_and_accepts_none() -> None:
    server, clients, envs, update, plan = server_after_phase_one()
    honest = [c.eliminate(update, e) for c, e in zip(clients, envs, strict=True)]
    allowed = offered(plan, 2, 3)
    too_many = ActiveSetReport(0, (1 << 48) + np.arange(allowed + 1, dtype=np.int64))
    shallow = ActiveSetReport(1, np.array([5], dtype=np.int64))
    server.collect([too_many, shallow, ActiveSetReport(2, np.zeros(0, dtype=np.int64))])
    reasons = {row["client"]: row["reason"] for row in server.rejected}
    assert reasons[0] == f"{allowed + 1} proposals for phase 2, more than the {allowed} a client offers"
    assert reasons[1] == "proposals are not distinct nodes of depth 48" and 2 not in reasons
    assert all(s.size == 0 for s in server.client_sets)  # a rejected reply: the server assumes no proposals
    assert honest[0].node_ids.size == allowed


def test_a_client_whose_proposals_were_lost_knows_it_and_the_run_goes_on() -> None:
    server, clients, envs, update, _ = server_after_phase_one(seed=4)
    replies = [c.eliminate(update, e) for c, e in zip(clients, envs, strict=True)]
    lost = next(r.client for r in replies if r.node_ids.size)  # a client that proposed something
    server.collect([r for r in replies if r.client != lost])  # its reply never arrives
    instruction = server.next_instruction()
    assert isinstance(instruction, PhaseInstruction)
    assert not np.isin(replies[lost].node_ids, instruction.node_ids).any()
    reports = [c.explore(instruction, e) for c, e in zip(clients, envs, strict=True)]
    assert clients[lost].state.active.size == 0  # it knows: its own nodes are none, as the server assumed
    server.aggregate(reports)
    assert [row for row in server.rejected if row["stage"] == "local-means"] == []  # its counts follow the plan


def test_the_points_are_dealt_in_turn_and_a_missing_clients_turns_pass_to_the_next() -> None:
    plan = smbo_plan(10**5, 4, 0.5, 0.5, 8, 512, 48)  # phases of 2, 2, 3, 3, 4, ... points
    for phase in range(2, 8):
        full = [np.arange(offered(plan, phase, 4), dtype=np.int64)] * 4
        assert deal(plan, phase, 4, full) == [quota(plan, phase, 4, m) for m in range(4)]
    # phase 4: 4 points, one each, dealt from client 1 (phases 2 and 3 dealt 5); every client offers 2
    assert [quota(plan, 4, 4, m) for m in range(4)] == [1, 1, 1, 1] and offered(plan, 4, 4) == 2
    two = np.arange(2, dtype=np.int64)
    assert deal(plan, 4, 4, [None, two, two, two]) == [0, 2, 1, 1]  # client 0's turn passes on, from client 1
    assert deal(plan, 4, 4, [None, None, two, np.zeros(0, dtype=np.int64)]) == [0, 0, 2, 0]  # what is on offer
    assert deal(plan, 4, 4, [None] * 4) == [0] * 4
    assert deal(plan, len(plan) + 1, 4, [two] * 4) == [0] * 4


def test_a_lost_proposers_share_is_a_spare_of_another_and_the_phase_keeps_its_points() -> None:
    server, clients, envs, update, plan = server_after_phase_one(seed=4)
    replies = [c.eliminate(update, e) for c, e in zip(clients, envs, strict=True)]
    shares = [quota(plan, 2, 3, m) for m in range(3)]
    assert shares == [1, 1, 0] and all(r.node_ids.size == offered(plan, 2, 3) == 1 for r in replies)
    server.collect(replies[1:])  # client 0, a proposer, is lost: client 2's spare takes its turn
    instruction = server.next_instruction()
    assert isinstance(instruction, PhaseInstruction) and instruction.node_ids.size == plan[1].points == 2
    assert np.array_equal(instruction.node_ids, np.sort(np.concatenate([r.node_ids for r in replies[1:]])))
    reports = [c.explore(instruction, e) for c, e in zip(clients, envs, strict=True)]
    assert clients[2].state.active.size == 0  # a taken spare is nobody's own: pulled g times by everyone
    assert np.array_equal(clients[1].state.active, replies[1].node_ids)
    server.aggregate(reports)
    assert server.rejected == []
    # and without the spares the phase would have had one point; with none the run would have ended


def test_a_client_bounds_a_servers_phase_by_the_plan() -> None:
    federation = synthetic_federation("garland", 2)
    settings = settings_of(federation, horizon=300, seed=3)
    policy = PFSMBO()
    machine = ClientMachine(policy, settings, 0)
    design = policy.first_active_set(settings)
    last = len(policy.plan(settings))

    def refused(phase: int, ids: np.ndarray, fragment: str) -> None:
        with pytest.raises(ProtocolError, match=fragment):
            machine.explore(PhaseInstruction(phase, ids, 1, 0, settings.spec), env=None)  # type: ignore[arg-type]

    refused(last + 1, design, rf"phase {last + 1} is not one this run can have: \[1, {last}\]")
    refused(1, np.array([2, 3]), "not distinct nodes of depth 48")
    refused(1, np.sort(np.concatenate([design, initial_design(9, 4, 48)])), "not distinct nodes of depth 48")


def test_at_alpha_one_nobody_pulls_the_others_proposals() -> None:
    result = run(tents((0.2, 0.5, 0.7)), "pf-smbo", alpha=1.0, horizon=200, seed=0)
    assert (result.phases["global_pulls"].iloc[1:] == 0).all() and (result.phases["local_pulls"].iloc[1:] > 0).all()


def test_the_model_is_fitted_and_sampled_under_one_blas_thread(monkeypatch) -> None:
    from threadpoolctl import threadpool_info

    from pfxab_flower.algorithms.surrogate import gp

    seen: list[int] = []
    fit = gp.fit

    def watched(*args, **kwargs):
        seen.extend(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")
        return fit(*args, **kwargs)

    monkeypatch.setattr(gp, "fit", watched)
    run(tents((0.3, 0.4)), "pf-smbo", alpha=0.5, horizon=60, seed=0)
    assert seen and set(seen) == {1}


def test_a_large_horizon_buys_precision_not_points() -> None:
    """Beyond the model's points a phase pulls each point more often; the phases stay few and the model small."""
    federation = synthetic_federation("garland", 3)
    result = run(federation, "pf-smbo", alpha=0.5, horizon=10**6, seed=0)
    phases = result.phases
    assert len(phases) <= 40 and phases["global_pulls"].iloc[-1] > 100
    assert phases["active_nodes"].max() <= model_rule(1) // 4  # a phase adds at most a quarter of the model
