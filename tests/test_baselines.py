"""Fed-PNE and PF-PNE (reconstructed baselines) and the elimination rule of all three algorithms.

The first tests drive whole runs and recompute every elimination from the messages
that crossed the network; the hand-computed tests run one or two phases of a
two-client federation without noise, where every mean, pull count and dropped
node is worked out by hand below. Which algorithm wins is never asserted.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.messages import (
    ActiveSetReport,
    FinishInstruction,
    FinishReport,
    GlobalUpdate,
    LocalReport,
    PhaseInstruction,
)
from pfxab_flower.algorithms.phased import ClientMachine, ServerMachine, Settings
from pfxab_flower.errors import ConfigError
from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.sampling import SimulatedEnvironment
from pfxab_flower.problems.synthetic import synthetic_federation
from pfxab_flower.running.engine import make_settings, simulate
from tests.patience import patient

SQRT2 = math.sqrt(2.0)


def _phases(sim):
    """``(instruction, local reports, global update, active-set reports)`` of every completed phase."""
    messages = sim.messages
    phases = []
    for (instruction, reports), (update, sets) in zip(messages[0:-1:2], messages[1::2], strict=False):
        assert isinstance(instruction, PhaseInstruction) and isinstance(update, GlobalUpdate)
        phases.append((instruction, reports, update, sets))
    return phases


def _simulate(fed, algorithm, alpha, horizon, seed=0, internal_seed=None, **kw):
    settings = make_settings(fed.num_clients, algorithm=algorithm, alpha=alpha, horizon=horizon, seed=seed, **kw)
    if internal_seed is not None:  # a baseline's own seed (solo_seed: up to 2**63), set as local-only sets it
        settings = Settings(settings.spec.replace(seed=internal_seed), settings.min_fraction)
    return simulate(fed, make_policy(algorithm), settings, keep_messages=True), settings


def _kept(active_set: ActiveSetReport) -> set[int]:
    """The nodes of ``A^m(p)`` a client kept: the parents of its ``A^m(p + 1)``."""
    return set((np.asarray(active_set.node_ids) // 2).tolist())


# -- Fed-PNE -----------------------------------------------------------------------------


@pytest.mark.parametrize("problem, alpha, seed", [("garland", 0.1, 0), ("doublesine", 0.9, 1), ("garland", 0.5, 2)])
def test_fedpne_shares_one_active_set_and_every_client_ends_on_the_best_global_mean(problem, alpha, seed):
    fed = synthetic_federation(problem, 5)
    T = 400_000
    sim, settings = _simulate(fed, "fed-pne", alpha, T, seed)
    phases = _phases(sim)
    assert len(phases) == sim.server.completed >= 3
    schedule = settings.schedule
    dropped = 0
    for instruction, reports, update, sets in phases:
        p = instruction.phase
        # every client pulls every node of the shared set ceil(f(p)) times, nothing else
        assert (instruction.global_pulls, instruction.local_pulls) == (math.ceil(schedule.f(p)), 0)
        assert all(np.all(r.counts == math.ceil(schedule.f(p))) for r in reports)
        assert update.phase_length == len(instruction.node_ids) * math.ceil(schedule.f(p))
        # the server's rule on the global means, recomputed from the clients' reports
        pooled = np.mean([r.means for r in reports], axis=0)
        np.testing.assert_allclose(update.global_means, pooled)
        expected = pooled + schedule.smoothness(p) <= pooled.max() - 2 * schedule.confidence_width(p)
        np.testing.assert_array_equal(update.eliminated, expected)
        dropped += int(expected.sum())
        # one active set, the same on every client, = children of the server's survivors
        survivors = instruction.node_ids[~update.eliminated]
        for s in sets:
            np.testing.assert_array_equal(s.node_ids, np.sort(np.concatenate([2 * survivors, 2 * survivors + 1])))
    assert dropped > 0  # the rule was exercised
    for client_set in sim.server.client_sets:
        np.testing.assert_array_equal(client_set, sim.server.client_sets[0])
    for client in sim.clients:
        np.testing.assert_array_equal(client.state.active, sim.clients[0].state.active)
    # every client ends on the survivor of the last phase with the best global mean
    instruction, _, update, _ = phases[-1]
    keep = ~update.eliminated
    best = instruction.node_ids[keep][np.argmax(update.global_means[keep])]
    assert set(sim.server.final_nodes.values()) == {int(best)}
    for env in sim.envs:
        assert env.log.node_ids[-1] == best and env.log.total == T


def test_fedpne_server_never_drops_a_node_nobody_reported():
    settings = make_settings(3, algorithm="fed-pne", alpha=0.5, horizon=10_000, seed=0)
    policy = make_policy("fed-pne")
    width = settings.schedule.confidence_width(2)  # Hoeffding's, as the server machine passes it
    nothing = policy.server_eliminated(settings, 2, np.full(4, np.nan), width)
    np.testing.assert_array_equal(nothing, [False] * 4)
    partial = policy.server_eliminated(settings, 2, np.array([0.9, np.nan, 0.1, 0.88]), width)
    np.testing.assert_array_equal(partial, [False, False, True, False])


def test_fedpne_run_survives_a_phase_where_every_report_is_rejected():
    fed = synthetic_federation("garland", 3)
    settings = make_settings(3, algorithm="fed-pne", alpha=0.5, horizon=50_000, seed=0, min_fraction=0.0)  # go on
    policy = make_policy("fed-pne")
    server = ServerMachine(policy, settings)
    clients = [ClientMachine(policy, settings, m) for m in range(3)]
    envs = [SimulatedEnvironment(fed, m) for m in range(3)]
    instruction = server.next_instruction()
    for c, e in zip(clients, envs, strict=True):
        c.explore(instruction, e)
    update = server.aggregate([])  # every reply lost
    assert not update.eliminated.any() and np.isnan(update.global_means).all()
    sets = [c.eliminate(update, e) for c, e in zip(clients, envs, strict=True)]
    server.collect(sets)
    np.testing.assert_array_equal(server.union(), [4, 5, 6, 7])


# -- PF-PNE ------------------------------------------------------------------------------


@pytest.mark.parametrize("problem, alpha, eps, seed", [("garland", 0.5, 0.0, 0), ("doublesine", 0.9, 0.1, 1),
                                                       ("garland", 0.1, 0.02, 3)])
def test_pfpne_never_keeps_a_node_that_fails_either_elimination(problem, alpha, eps, seed):
    fed = synthetic_federation(problem, 5)
    T = 400_000
    sim, settings = _simulate(fed, "pf-pne", alpha, T, seed, pf_pne_eps=eps)
    schedule = settings.schedule
    phases = _phases(sim)
    assert len(phases) >= 3
    global_drops = local_drops = 0
    for instruction, reports, update, sets in phases:
        p = instruction.phase
        n = math.ceil(schedule.f(p))
        assert (instruction.global_pulls, instruction.local_pulls) == (0, n)
        union = instruction.node_ids
        held = np.stack([r.counts > 0 for r in reports])  # (M, nodes): who holds which node
        means = np.stack([r.means for r in reports])
        assert np.all(np.stack([r.counts for r in reports])[held] == n)
        assert update.phase_length == held.sum(axis=1).max() * n
        # global rule on the pooled means (average over the clients holding the node)
        pooled = (means * held).sum(axis=0) / held.sum(axis=0)
        width, slack = schedule.confidence_width(p), schedule.smoothness(p)
        fails_global = pooled + slack + 2 * eps <= pooled.max() - 2 * width
        np.testing.assert_array_equal(update.eliminated, fails_global)
        b = SQRT2 * math.sqrt(math.log(T) / n)
        for m, active_set in enumerate(sets):
            own = held[m]
            local = means[m, own]
            fails_local = local + slack + b <= local.max() - b
            passes = set(union[own][~fails_local & ~fails_global[own]].tolist())
            kept = _kept(active_set)
            assert kept <= set(union[own].tolist())
            if passes:
                assert kept == passes, f"phase {p} client {m}"
            else:  # nothing survives both: the client keeps its best node by local mean
                assert kept == {int(union[own][np.argmax(local)])}, f"phase {p} client {m}"
            global_drops += int(fails_global[own].sum())
            local_drops += int(fails_local.sum())
    assert local_drops > 0  # the local rule was exercised
    if eps == 0.0:
        assert global_drops > 0  # with no slack the global rule bites too
    # after the last phase every client exploits its best kept node by local mean
    instruction, reports, update, sets = phases[-1]
    for m, report in enumerate(reports):
        kept = np.array(sorted(_kept(sets[m])))
        idx = np.searchsorted(instruction.node_ids, kept)
        assert sim.server.final_nodes[m] == kept[np.argmax(report.means[idx])]


@pytest.mark.parametrize("algorithm", ["fed-pne", "pf-pne"])
def test_baselines_are_reproducible_and_pull_exactly_the_horizon(algorithm):
    fed = synthetic_federation("doublesine", 4)
    a, _ = _simulate(fed, algorithm, 0.5, 200_000, seed=7)
    b, _ = _simulate(fed, algorithm, 0.5, 200_000, seed=7)
    for ea, eb in zip(a.envs, b.envs, strict=True):
        assert ea.log.total == 200_000
        np.testing.assert_array_equal(ea.log.node_ids, eb.log.node_ids)
        np.testing.assert_array_equal(ea.log.counts, eb.log.counts)
    assert a.server.final_nodes == b.server.final_nodes


# -- hand-computed phases ------------------------------------------------------------------
#
# Two clients on [0, 1], no noise, each objective a step: value ``left`` on [0, 1/2) and
# ``right`` on [1/2, 1]. Phase 1 works on nodes 2 = [0, 1/2) (pulled at 0.25) and
# 3 = [1/2, 1] (pulled at 0.75). With nu1 = 0.1, rho = 0.5, M = 2, T = 10^6:
#   f(1) = 2 ln T / (M nu1^2 rho^2) = 400 ln T = 5526.20...,   f(2) = 4 f(1) = 22104.8...
#   nu1 rho^1 = 0.05,   B_1 = sqrt(2) sqrt(ln T / (M f(1))) = 0.05 (= nu1 rho^h).
# PF-XAB / Fed-PNE drop k in phase 1 iff  est_k + 0.05 <= max - 0.1,  i.e. a gap >= 0.15.

T_HAND = 10**6
LN_T = math.log(T_HAND)
F1 = 400 * LN_T
F2 = 4 * F1


def _steps(values: list[tuple[float, float]]) -> Federation:
    objectives = [lambda x, lo=lo, hi=hi: np.where(x[:, 0] < 0.5, lo, hi) for lo, hi in values]
    return Federation.from_callables(objectives, {"x": (0.0, 1.0)}, noise_sigma=0.0, name="steps")


class HandRun:
    """A two-client run driven one exchange at a time, like ``engine.simulate``."""

    def __init__(self, algorithm: str, values: list[tuple[float, float]], alpha: float, eps: float = 0.1):
        fed = _steps(values)
        own = {"pf_pne_eps": eps} if algorithm == "pf-pne" else {}  # PF-PNE's own parameter; others refuse it
        self.settings = make_settings(2, algorithm=algorithm, alpha=alpha, horizon=T_HAND, seed=0, nu1=0.1, rho=0.5,
                                      **own)
        policy = make_policy(algorithm)
        self.server = ServerMachine(policy, self.settings)
        self.clients = [ClientMachine(policy, self.settings, m) for m in range(2)]
        self.envs = [SimulatedEnvironment(fed, m) for m in range(2)]

    def phase(self) -> tuple[PhaseInstruction, list[LocalReport], GlobalUpdate, list[set[int]]]:
        instruction = self.server.next_instruction()
        assert isinstance(instruction, PhaseInstruction)
        pairs = list(zip(self.clients, self.envs, strict=True))
        reports = [c.explore(instruction, e) for c, e in pairs]
        update = self.server.aggregate(reports)
        sets = [c.eliminate(update, e) for c, e in pairs]
        self.server.collect(sets)
        return instruction, reports, update, [set(s.node_ids.tolist()) for s in sets]


def test_hand_schedule_constants():
    s = make_settings(2, alpha=0.5, horizon=T_HAND, seed=0, nu1=0.1, rho=0.5).schedule
    assert s.f(1) == pytest.approx(F1) and s.f(2) == pytest.approx(F2)
    assert s.smoothness(1) == pytest.approx(0.05)
    assert s.confidence_width(1) == pytest.approx(0.05)


def test_pfxab_hand_computed_phases():
    # alpha = 0.5; client 0: mu = (0.9, 0.5), client 1: mu = (0.3, 0.6) on nodes (2, 3)
    run = HandRun("pf-xab", [(0.9, 0.5), (0.3, 0.6)], alpha=0.5)
    instruction, reports, update, sets = run.phase()
    n_g, n_l = math.ceil(0.5 * F1), math.ceil(2 * 0.5 * F1)  # 2764, 5527
    assert (instruction.global_pulls, instruction.local_pulls) == (n_g, n_l) == (2764, 5527)
    assert update.phase_length == 2 * n_g + 2 * n_l == 16582
    np.testing.assert_allclose(reports[0].means, [0.9, 0.5])
    np.testing.assert_array_equal(reports[0].counts, [n_g + n_l] * 2)
    np.testing.assert_allclose(update.global_means, [0.6, 0.55])
    # client 0: mu' = (0.75, 0.525): gap 0.225 >= 0.15, node 3 dropped
    # client 1: mu' = (0.45, 0.575): gap 0.125 <  0.15, both kept
    assert sets == [{4, 5}, {4, 5, 6, 7}]
    assert run.clients[0].state.choice == 2 and run.clients[1].state.choice == 3
    # phase 2: A(2) = {4, 5, 6, 7}; client 0 explores 4 n_g + 2 n_l and waits on its best local node (4)
    instruction, reports, update, sets = run.phase()
    n_g, n_l = math.ceil(0.5 * F2), math.ceil(F2)  # 11053, 22105
    assert (instruction.global_pulls, instruction.local_pulls) == (n_g, n_l)
    assert update.phase_length == 4 * n_g + 4 * n_l
    log = run.envs[0].log
    assert log.node_ids[-1] == 4 and log.counts[-1] == 2 * n_l  # exploitation while waiting
    assert run.envs[1].log.counts[-1] == n_l  # client 1 explores for the whole phase
    assert sum(e.log.total for e in run.envs) == 2 * (16582 + update.phase_length)


@pytest.mark.parametrize(
    "values, eliminated, next_set",
    [
        # global means (0.8, 0.45): gap 0.35 >= 0.15 -> node 3 dropped for everyone
        ([(0.9, 0.5), (0.7, 0.4)], [False, True], {4, 5}),
        # global means (0.6, 0.55): gap 0.05 -> nothing dropped, though client 0's local gap is 0.4
        ([(0.9, 0.5), (0.3, 0.6)], [False, False], {4, 5, 6, 7}),
    ],
)
def test_fedpne_hand_computed_phase(values, eliminated, next_set):
    run = HandRun("fed-pne", values, alpha=0.5)
    instruction, _, update, sets = run.phase()
    n = math.ceil(F1)  # 5527, the same for every client and node
    assert (instruction.global_pulls, instruction.local_pulls) == (n, 0)
    assert update.phase_length == 2 * n
    np.testing.assert_array_equal(update.eliminated, eliminated)
    assert sets == [next_set, next_set]
    best = 2 if values[0][0] + values[1][0] > values[0][1] + values[1][1] else 3
    assert run.clients[0].state.choice == run.clients[1].state.choice == best


# PF-PNE, phase 1: n = ceil(f(1)) = 5527, b = sqrt(2) sqrt(ln T / n) = 0.070706...
#   local rule:  drop k iff local_k + 0.05 + b <= max local - b, i.e. a gap >= 0.05 + 2b = 0.19141...
#   global rule: drop k iff pooled_k + 0.05 + 2 eps <= max pooled - 0.1, i.e. a gap >= 0.15 + 2 eps
@pytest.mark.parametrize(
    "values, eps, eliminated, next_sets",
    [
        # pooled (0.6, 0.55), no global drop; local gaps 0.4 and 0.3 >= 0.191: each keeps its own best
        ([(0.9, 0.5), (0.3, 0.6)], 0.1, [False, False], [{4, 5}, {6, 7}]),
        # pooled (0.85, 0.6), gap 0.25 >= 0.15 with eps = 0: node 3 dropped for client 1 too,
        # although its local gap 0.1 < 0.191 keeps node 3 locally
        ([(0.9, 0.5), (0.8, 0.7)], 0.0, [False, True], [{4, 5}, {4, 5}]),
        # same means, eps = 0.1: threshold 0.35 > 0.25, client 1 keeps both
        ([(0.9, 0.5), (0.8, 0.7)], 0.1, [False, False], [{4, 5}, {4, 5, 6, 7}]),
        # pooled (0.625, 0.35), gap 0.275 >= 0.15: node 3 dropped globally; client 1's local gap 0.3
        # drops node 2 locally: nothing survives both, so client 1 keeps its best local node, 3
        ([(0.95, 0.1), (0.3, 0.6)], 0.0, [False, True], [{4, 5}, {6, 7}]),
        # b decides: client 1's local gap 0.18 < 0.191 keeps both, 0.2 >= 0.191 drops node 3
        ([(0.9, 0.5), (0.8, 0.62)], 1.0, [False, False], [{4, 5}, {4, 5, 6, 7}]),
        ([(0.9, 0.5), (0.8, 0.6)], 1.0, [False, False], [{4, 5}, {4, 5}]),
    ],
)
def test_pfpne_hand_computed_phase(values, eps, eliminated, next_sets):
    run = HandRun("pf-pne", values, alpha=0.5, eps=eps)
    instruction, _, update, sets = run.phase()
    n = math.ceil(F1)
    assert (instruction.global_pulls, instruction.local_pulls) == (0, n)
    assert update.phase_length == 2 * n
    np.testing.assert_allclose(update.global_means, np.mean(values, axis=0))
    np.testing.assert_array_equal(update.eliminated, eliminated)
    assert sets == next_sets
    # the node to exploit is the best kept node by local mean
    for m, client in enumerate(run.clients):
        kept = sorted(k // 2 for k in next_sets[m])
        assert client.state.choice == max(kept, key=lambda k: values[m][k - 2])


def test_pfpne_pooled_mean_averages_only_the_clients_holding_a_node():
    # after phase 1 of the first case above, client 0 holds {4, 5} and client 1 holds {6, 7}
    run = HandRun("pf-pne", [(0.9, 0.5), (0.3, 0.6)], alpha=0.5, eps=0.1)
    run.phase()
    instruction, reports, update, sets = run.phase()
    np.testing.assert_array_equal(instruction.node_ids, [4, 5, 6, 7])
    np.testing.assert_array_equal(reports[0].counts > 0, [True, True, False, False])
    # each node is held by one client: its pooled mean is that client's local mean
    np.testing.assert_allclose(update.global_means, [0.9, 0.9, 0.6, 0.6])
    # phase 2: nu1 rho^2 = B_2 = 0.025, so drop iff gap >= 0.025 + 2 * 0.1 + 2 * 0.025 = 0.275; gap 0.3
    np.testing.assert_array_equal(update.eliminated, [False, False, True, True])
    # client 1 loses both nodes to the global rule and keeps its best local node (a tie: the first, 6)
    assert sets == [{8, 9, 10, 11}, {12, 13}]


# -- the two baselines whose clients work alone: local-only and random-search --------------

DOMAIN = {"x": (0.0, 1.0), "y": (-2.0, 2.0)}
SOLO_T = 20_000


def _bump(centre: float, spread: float):
    """A smooth objective in [0, 1] with its peak at ``(centre, 0)`` (one client's own)."""
    def objective(points: np.ndarray) -> np.ndarray:
        return np.exp(-((points[:, 0] - centre) ** 2 + (points[:, 1] / 4) ** 2) / spread)
    return objective


OBJECTIVES = [_bump(0.2, 0.05), _bump(0.5, 0.1), _bump(0.8, 0.02)]


def _fed(objectives=OBJECTIVES, noise: str = "uniform") -> Federation:
    return Federation.from_callables(objectives, DOMAIN, noise=noise, noise_sigma=0.1, value_range=(0.0, 1.0))


def _logs(fed: Federation, algorithm: str, **parameters) -> tuple[list, object]:
    """Each client's pull log (segments ``(node, count)``) and the simulation of one in-process run."""
    sim, _ = _simulate(fed, algorithm, parameters.pop("alpha", 0.5), parameters.pop("horizon", SOLO_T), **parameters)
    return [(env.log.node_ids, env.log.counts) for env in sim.envs], sim


def test_local_only_sends_no_means_and_each_client_is_the_client_alone() -> None:
    from pfxab_flower.algorithms.baselines.solo import solo_seed

    fed = _fed()
    logs, sim = _logs(fed, "local-only", alpha=0.5, seed=3)
    # one exchange, the final one: nothing went up but each client's final node and point
    assert len(sim.messages) == 1
    (instruction, replies), = sim.messages
    assert isinstance(instruction, FinishInstruction) and instruction.phases == 0
    assert [type(r) for r in replies] == [FinishReport] * 3
    result = sim.driver.result("inprocess")
    assert result.summary["phases"] == 0 and result.summary["communication_rounds"] == 1
    assert result.summary["pulls_scored"] == [SOLO_T] * 3 and result.summary["rejected_replies"] == 0
    # client m does exactly what a one-client PF-XAB (alpha 1) on its own objective does with its own seed
    for m, (nodes, counts) in enumerate(logs):
        alone_logs, alone = _logs(_fed([OBJECTIVES[m]]), "pf-xab", alpha=1.0, internal_seed=solo_seed(3, m))
        np.testing.assert_array_equal(nodes, alone_logs[0][0])
        np.testing.assert_array_equal(counts, alone_logs[0][1])
        assert result.summary["final_nodes"][m] == alone.driver.final_reports[0].node_id
        assert alone.server.completed >= 3  # the client alone did eliminate, phase after phase
    # what it optimises does not depend on alpha (only its score does), nor on the other clients
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
               for a, b in zip(_logs(fed, "local-only", alpha=0.9, seed=3)[0], logs, strict=True))


def test_random_search_pulls_its_share_at_distinct_random_points_then_exploits_the_best() -> None:
    from pfxab_flower.algorithms.baselines.random_search import random_points
    from pfxab_flower.arms.partition import POINT_DEPTH, depth_of

    fed = _fed(noise="none")  # rewards are the objective itself, so the best observed point is known
    n = random_points(0.05, SOLO_T, POINT_DEPTH)
    assert n == 1000
    logs, sim = _logs(fed, "random-search", random_fraction=0.05, seed=1)
    summary = sim.driver.result("inprocess").summary
    assert summary["random_fraction"] == 0.05 and summary["phases"] == 0 and summary["communication_rounds"] == 1
    drawn = []
    for m, (nodes, counts) in enumerate(logs):
        explored, exploited = nodes[:n], nodes[n:]
        assert counts[:n].tolist() == [1] * n and np.unique(explored).size == n  # n distinct points, once each
        assert np.all(depth_of(explored) == POINT_DEPTH)
        best = explored[np.argmax(fed.evaluate(m, fed.partition.midpoints(explored)))]
        assert exploited.tolist() == [best] and counts[n:].tolist() == [SOLO_T - n]
        assert summary["final_nodes"][m] == best and summary["pulls_scored"][m] == SOLO_T
        np.testing.assert_array_equal(summary["final_points"][m], fed.partition.midpoints(np.array([best]))[0])
        drawn.append(fed.partition.unit_midpoints(explored))
    # uniform over the domain: each tenth of each axis holds about a tenth of the points; each client its own
    for points in drawn:
        for axis in range(2):
            share = np.histogram(points[:, axis], bins=10, range=(0.0, 1.0))[0] / n
            assert np.all(np.abs(share - 0.1) < 0.04), share
    assert not np.array_equal(drawn[0], drawn[1])
    again, _ = _logs(fed, "random-search", random_fraction=0.05, seed=1)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(again, logs, strict=True))  # the seed fixes the points
    assert not np.array_equal(_logs(fed, "random-search", random_fraction=0.05, seed=2)[0][0][0], logs[0][0])


def test_random_search_share_is_as_written_and_checked_once() -> None:
    from pfxab_flower.algorithms.baselines.random_search import random_points
    from pfxab_flower.running.engine import run

    assert random_points(0.07, 100, 48) == 7 and random_points(0.01, 2_000_000, 48) == 20_000
    assert random_points(1.0, 100, 48) == 100 and random_points(0.5, 100, 3) == 8  # at most every cell once
    fed = _fed()
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(ConfigError, match=r"^random_fraction=.* is invalid; allowed: a number in \(0, 1\]$"):
            run(fed, "random-search", random_fraction=bad, horizon=100)
    with pytest.raises(ConfigError, match="unknown keyword 'random_fraction' for algorithm 'pf-xab'"):
        run(fed, "pf-xab", random_fraction=0.1, horizon=100)
    everything = run(fed, "random-search", random_fraction=1.0, horizon=300).summary  # no exploitation left
    assert everything["pulls_scored"] == [300] * 3


def test_baselines_through_run_and_compare() -> None:
    import pfxab_flower

    fed = _fed()
    single = {a: {s: pfxab_flower.run(fed, a, alpha=0.3, horizon=SOLO_T, seed=s).summary for s in (0, 1)}
              for a in ("pf-xab", "local-only", "random-search")}
    for algorithm in ("local-only", "random-search"):
        summary = single[algorithm][0]
        assert summary["algorithm"] == algorithm and summary["pulls_scored"] == [SOLO_T] * 3
        assert summary["phases"] == 0 and summary["communication_rounds"] == 1 and summary["regret"] > 0
        assert len(summary["final_nodes"]) == 3 and summary["evaluations"] > 0
    runs = pfxab_flower.compare(fed, algorithms=["pf-xab", "local-only", "random-search"], alpha=0.3,
                                horizon=SOLO_T, seeds=[0, 1], progress=False).runs
    assert {"algorithm", "seed", "regret"} <= set(runs.columns) and len(runs) == 6
    for row in runs.to_dict("records"):
        assert row["regret"] == single[row["algorithm"]][row["seed"]]["regret"]


def test_baselines_on_the_command_line(capsys) -> None:
    from pfxab_flower.simulations.cli.main import main

    assert main(["run", "--algorithm", "random-search", "--random-fraction", "0.02", "--num-clients", "3",
                 "--horizon", "5000", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["algorithm"] == "random-search" and summary["random_fraction"] == 0.02
    assert summary["pulls_scored"] == [5000] * 3
    assert main(["compare", "--algorithms", "pf-xab,local-only,random-search", "--num-clients", "3", "--horizon",
                 "20000", "--seeds", "0-1", "--no-progress"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[0] for line in lines[2:]] == ["pf-xab", "local-only", "random-search"]


BASELINE_KEYS = ("regret", "regret_per_client", "final_nodes", "final_points", "pulls_scored", "phases",
                 "communication_rounds", "values_up", "rejected_replies")


@pytest.mark.parametrize("algorithm", ["local-only", "random-search"])
def test_baselines_through_flowers_legacy_server_loop_give_the_in_process_numbers(algorithm: str) -> None:
    """The legacy strategy and NumPy client of each baseline under Flower's own ``Server`` loop, without Ray
    (tests/flower_loopback.py; the Message API: tests/test_flower_message.py, for every algorithm)."""
    from pfxab_flower.client_apps import federation_sessions
    from pfxab_flower.problems import build_federation
    from pfxab_flower.running.engine import run_config
    from pfxab_flower.schema.run_config import AppOptions, RunConfig
    from pfxab_flower.simulations.flower.app_builders import strategy_of
    from tests.flower_loopback import run_loopback

    config = RunConfig(problem="garland", algorithm=algorithm, num_clients=3, alpha=0.5, horizon=10_000, seed=1)
    federation = build_federation(config)
    strategy = strategy_of(config, AppOptions(api="legacy"), federation)
    run_loopback(strategy, federation_sessions(federation), config.num_clients)
    flower, inprocess = strategy.run_result().summary, run_config(config).summary
    for key in BASELINE_KEYS:
        assert flower[key] == inprocess[key], (algorithm, key)
    assert flower["engine"] == "flower"


@pytest.mark.exhaustive  # default tier: local-only on Ray (tests/test_flower_ray.py), both APIs without Ray (above)
@pytest.mark.ray
@pytest.mark.timeout(240)
@pytest.mark.usefixtures("shared_ray")
@pytest.mark.parametrize("api", ["message", "legacy"])
def test_baselines_on_flower_give_the_in_process_numbers(api: str) -> None:
    from pfxab_flower.running.engine import run_config
    from pfxab_flower.schema.run_config import AppOptions, RunConfig
    from pfxab_flower.simulations.flower.in_process_simulation import run_flower_simulation

    for algorithm in ("local-only", "random-search"):
        config = RunConfig(problem="garland", algorithm=algorithm, num_clients=3, alpha=0.5, horizon=10_000, seed=1)
        flower = run_flower_simulation(config, options=AppOptions(round_timeout=patient(60.0), api=api)).summary
        inprocess = run_config(config).summary
        for key in BASELINE_KEYS:
            assert flower[key] == inprocess[key], (algorithm, key)
        assert flower["engine"] == "flower"
