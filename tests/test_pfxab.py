"""PF-XAB's schedule, budget rule, exact accounting and convergence."""

import itertools
import math

import numpy as np
import pytest

from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.messages import GlobalUpdate, PhaseInstruction
from pfxab_flower.algorithms.schedule import Schedule
from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.arms.partition import depth_of
from pfxab_flower.problems.synthetic import synthetic_federation
from pfxab_flower.running.engine import make_settings, run, simulate
from tests.conftest import tent_federation


def _sim(fed, alpha, horizon, seed=0, algorithm="pf-xab", **kw):
    settings = make_settings(fed.num_clients, algorithm=algorithm, alpha=alpha, horizon=horizon, seed=seed, **kw)
    return simulate(fed, make_policy(algorithm), settings, keep_messages=True), settings


def _phase_segments(log, boundaries):
    """Split a pull log's segments at the phase boundaries (cumulative time)."""
    ends = np.cumsum(log.counts)
    return [np.flatnonzero((ends > lo) & (ends <= hi)) for lo, hi in itertools.pairwise(boundaries)]


def test_schedule_formulas():
    s = Schedule(horizon=2_000_000, num_clients=10, nu1=1.0, rho=0.5)
    f3 = 2 * math.log(2_000_000) / (10 * 1.0 * 0.5**6)
    assert s.f(3) == pytest.approx(f3)
    assert s.confidence_width(3) == pytest.approx(math.sqrt(2) * math.sqrt(math.log(2_000_000) / (10 * f3)))
    assert s.confidence_width(3) == pytest.approx(s.smoothness(3))  # B_p = nu1 rho^h with c = sqrt(2)


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_pull_counts_follow_the_spec_and_every_client_pulls_exactly_the_horizon(alpha):
    fed = synthetic_federation("garland", 4)
    T = 300_000
    sim, settings = _sim(fed, alpha, T)
    M = fed.num_clients
    instructions = [b for b, _ in sim.messages if isinstance(b, PhaseInstruction)]
    updates = [b for b, _ in sim.messages if isinstance(b, GlobalUpdate)]
    assert len(instructions) == sim.server.completed >= 3
    boundaries = [0]
    for instruction, update in zip(instructions, updates, strict=True):
        p = instruction.phase
        f = settings.schedule.f(p)
        assert instruction.global_pulls == math.ceil((1 - alpha) * f)
        assert instruction.local_pulls == math.ceil(M * alpha * f)
        assert np.all(depth_of(instruction.node_ids) == p)
        boundaries.append(boundaries[-1] + update.phase_length)
    reports = [replies for b, replies in sim.messages if isinstance(b, PhaseInstruction)]
    for m, env in enumerate(sim.envs):
        assert env.log.total == T
        for p, segs in enumerate(_phase_segments(env.log, boundaries)):
            instruction, length = instructions[p], updates[p].phase_length
            nodes, counts = env.log.node_ids[segs], env.log.counts[segs]
            # every pull of a phase is of this phase's depth, and the phase fills exactly L_p
            assert counts.sum() == length
            assert np.all(depth_of(nodes) == instruction.phase)
            union, g, n_l = instruction.node_ids, instruction.global_pulls, instruction.local_pulls
            own = union[reports[p][m].counts == g + n_l] if n_l else np.zeros(0, dtype=np.int64)
            expected_nodes = ([*union.tolist()] if g else []) + own.tolist()
            expected_counts = [g] * (len(union) if g else 0) + [n_l] * len(own)
            explored = sum(expected_counts)
            # global exploration of A(p), then local exploration of A^m(p), then exploitation
            assert nodes[: len(expected_nodes)].tolist() == expected_nodes
            assert counts[: len(expected_nodes)].tolist() == expected_counts
            if explored < length:
                assert len(nodes) == len(expected_nodes) + 1 and counts[-1] == length - explored
            else:
                assert len(nodes) == len(expected_nodes)
        # after the last phase the client exploits one node until T
        tail = np.flatnonzero(np.cumsum(env.log.counts) > boundaries[-1])
        assert len(tail) <= 1
        if len(tail):
            assert env.log.node_ids[tail[0]] == sim.server.final_nodes[m]
            assert env.log.counts[tail[0]] == T - boundaries[-1]


def test_phase_length_is_the_longest_exploration_and_the_rest_is_exploitation():
    fed = synthetic_federation("garland", 3)
    sim, _ = _sim(fed, 0.5, 200_000)
    # replay the phase structure from the messages: L_p = |A(p)| n_g + max_m |A^m(p)| n_l
    msgs = sim.messages
    for (instruction, reports), (update, _) in zip(msgs[0:-1:2], msgs[1::2], strict=True):
        own_sizes = [int((r.counts > instruction.global_pulls).sum()) for r in reports]
        assert update.phase_length == len(instruction.node_ids) * instruction.global_pulls + max(
            own_sizes
        ) * instruction.local_pulls


def test_no_phase_starts_unless_it_fits_in_the_budget():
    fed = synthetic_federation("garland", 3)
    for T in (1, 10, 50, 5_000):
        sim, settings = _sim(fed, 0.5, T)
        assert sum(h["phase_length"] for h in sim.server.history) <= T
        assert all(env.log.total == T for env in sim.envs)
        assert sim.server.completed <= settings.schedule.max_phases()
    # T = 1: no phase fits, every client pulls the root's centre once
    sim, _ = _sim(fed, 0.5, 1)
    assert sim.server.completed == 0 and all(env.log.node_ids.tolist() == [1] for env in sim.envs)


def test_max_depth_stops_the_phases():
    fed = synthetic_federation("garland", 3)
    sim, _ = _sim(fed, 0.5, 2_000_000, max_depth=3)
    assert sim.server.completed == 3
    assert all(depth_of(np.array([n]))[0] == 3 for n in sim.server.final_nodes.values())


def test_engine_regret_equals_a_per_pull_loop():
    fed = synthetic_federation("garland", 3)
    T, alpha = 5000, 0.5
    result = run(fed, alpha=alpha, horizon=T, seed=3)
    sim, _ = _sim(fed, alpha, T, seed=3)
    optimum = fed.optimum(alpha).values
    part = fed.partition
    total = 0.0
    curve = np.zeros(T + 1)
    for m, env in enumerate(sim.envs):
        t = 0
        for node, count in zip(env.log.node_ids, env.log.counts, strict=True):
            x = part.midpoints(np.array([node]))
            for _ in range(count):  # the plain way: one pull, one regret term
                local = fed.local_values(x)[:, 0]
                gap = optimum[m] - (alpha * local[m] + (1 - alpha) * local.mean())
                total += gap
                t += 1
                curve[t] += gap
    assert result.summary["regret"] == pytest.approx(total, abs=1e-9)
    grid = np.array([1, 17, 999, 2500, 4321, 5000])
    assert np.allclose(result.curve_at(grid)["regret"], np.cumsum(curve)[grid], atol=1e-9)


def _reported_means(sim):
    return np.concatenate([r.means for _, replies in sim.messages for r in replies if hasattr(r, "means")])


def test_same_seed_same_output_and_seeds_differ_only_in_noise():
    fed = synthetic_federation("doublesine", 4)
    a = run(fed, alpha=0.5, horizon=100_000, seed=1).summary
    b = run(fed, alpha=0.5, horizon=100_000, seed=1).summary
    for key in ("regret", "regret_per_client", "final_points", "phases", "mean_reward_global", "bytes_up"):
        assert a[key] == b[key]
    # another seed draws other noise: the clients report other means ...
    means_1 = _reported_means(_sim(fed, 0.5, 100_000, seed=1)[0])
    means_2 = _reported_means(_sim(fed, 0.5, 100_000, seed=2)[0])
    assert not np.array_equal(means_1, means_2)
    # ... and noise is all a seed changes: without noise, every seed gives the same run
    quiet = synthetic_federation("doublesine", 4, noise=NoiseModel("uniform", 0.0))
    q1, q2 = (_sim(quiet, 0.5, 100_000, seed=s)[0] for s in (1, 2))
    assert np.array_equal(_reported_means(q1), _reported_means(q2))
    assert all(np.array_equal(e1.log.node_ids, e2.log.node_ids) for e1, e2 in zip(q1.envs, q2.envs, strict=True))


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_user_federation_converges_within_one_final_cell(alpha):
    centres = [0.2, 0.5, 0.7]
    fed = tent_federation(centres)
    result = run(fed, alpha=alpha, horizon=1_000_000, seed=0)
    # personalised argmax of alpha (1-|x-c_m|) + (1-alpha) mean_j (1-|x-c_j|): c_m unless alpha = 0 (median)
    truth = np.full(3, 0.5) if alpha == 0 else np.array(centres)
    depth = result.summary["phases"]
    assert depth >= 5
    finals = np.array(result.summary["final_points"])[:, 0]
    assert np.all(np.abs(finals - truth) <= 2.0**-depth)
