"""``pf-sh``: personalised successive halving over candidates every client draws from the run's seed.

What is checked here is what the algorithm claims of itself: every machine derives the same
candidates from the seed alone (only ids and means travel), each round keeps at most half of every
client's candidates on its personalised estimate, a round costs each client about ``K`` pulls while
it halves, alpha's two ends are pure federation and a client alone, and the count follows the
documented model (no exponent assumed). Failures and trust: tests/test_pf_sh_faults.py. That every
engine gives the same numbers is checked by the suites that run every registered algorithm.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pfxab_flower import Federation, run
from pfxab_flower.algorithms.halving.candidates import candidate_nodes
from pfxab_flower.algorithms.halving.pf_sh import PFSH
from pfxab_flower.algorithms.halving.pf_sh_model import (
    COUNT_GRID,
    EXPONENTS,
    best_count,
    modelled_regret,
    screen_count,
    tail_exponent,
    union_share,
)
from pfxab_flower.algorithms.halving.successive_halving import most_candidates, round_split
from pfxab_flower.algorithms.splits import cheapest_split
from pfxab_flower.errors import ConfigError
from pfxab_flower.problems import synthetic_federation
from pfxab_flower.running import engine
from pfxab_flower.schema.spec import AlgorithmSpec


def tents(centres: tuple[float, ...], noise_sigma: float = 0.1) -> Federation:
    objectives = [lambda x, c=c: 1.0 - np.abs(x[:, 0] - c) for c in centres]
    return Federation.from_callables(objectives, {"x": (0.0, 1.0)}, noise_sigma=noise_sigma)


def test_every_machine_draws_the_same_candidates_from_the_seed_and_only_ids_and_means_travel() -> None:
    federation = synthetic_federation("garland", 4)
    settings = engine.make_settings(4, algorithm="pf-sh", horizon=20_000, seed=7, candidates=64)
    sim = engine.simulate(federation, PFSH(), settings, keep_messages=True)
    candidates = candidate_nodes(7, 64, 48)
    assert candidates.size == 64 and np.unique(candidates).size == 64
    assert np.array_equal(candidates, candidate_nodes(7, 64, 48))  # a function of the seed alone
    assert not np.array_equal(candidates, candidate_nodes(8, 64, 48))
    first, replies = sim.messages[0]
    assert np.array_equal(first.node_ids, candidates)  # the server's first union: all of them
    for reply in replies:  # a client answers with one mean and count per candidate of the union, nothing else
        assert np.array_equal(reply.node_ids, candidates) and reply.means.shape == (64,)
    points = federation.partition.midpoints(candidates)
    assert np.all((points >= 0) & (points <= 1))


def test_each_round_keeps_at_most_half_of_every_clients_candidates_and_the_last_keeps_one() -> None:
    federation = synthetic_federation("doublesine", 5)
    result = run(federation, "pf-sh", alpha=0.5, horizon=50_000, seed=1, candidates=100)
    assert len(result.phases) == result.summary["phases"] <= math.ceil(math.log2(100))
    assert result.summary["communication_rounds"] == 2 * result.summary["phases"] + 1
    sim = engine.simulate(federation, PFSH(), engine.make_settings(5, algorithm="pf-sh", alpha=0.5, horizon=50_000,
                                                                   seed=1, candidates=100), keep_messages=True)
    held = [100] * 5
    for phase in range(1, len(sim.server.history) + 1):
        for report in sim.messages[2 * phase - 1][1]:  # the active-set replies of the phase
            assert 1 <= report.node_ids.size <= (held[report.client] + 1) // 2
            held[report.client] = report.node_ids.size
    assert held == [1] * 5
    final = result.summary["final_nodes"]
    assert all(node in candidate_nodes(1, 100, 48) for node in final)


def test_at_alpha_zero_every_client_keeps_the_same_survivors_and_a_halving_round_costs_k_pulls() -> None:
    federation = synthetic_federation("garland", 6)
    sim = engine.simulate(federation, PFSH(), engine.make_settings(6, algorithm="pf-sh", alpha=0.0, horizon=30_000,
                                                                   seed=2, candidates=64), keep_messages=True)
    history = sim.server.history
    for phase, row in enumerate(history, start=1):
        sets = [report.node_ids for report in sim.messages[2 * phase - 1][1]]
        assert all(np.array_equal(s, sets[0]) for s in sets) and row["next_active_nodes"] == sets[0].size
        assert row["local_pulls"] == 0  # the union is every client's set: global pulls only
        if row["active_nodes"] == 64 >> (phase - 1):  # the clients halved so far: K pulls a round
            assert row["phase_length"] == 64


def test_at_alpha_one_a_client_halves_alone_exactly_as_a_one_client_run_does() -> None:
    centres = (0.2, 0.5, 0.7)
    together = engine.simulate(tents(centres), PFSH(), engine.make_settings(3, algorithm="pf-sh", alpha=1.0,
                                                                           horizon=10_000, seed=4, candidates=50))
    alone = engine.simulate(tents(centres[:1]), PFSH(), engine.make_settings(1, algorithm="pf-sh", alpha=1.0,
                                                                            horizon=10_000, seed=4, candidates=50))
    assert together.server.history[0]["global_pulls"] == 0  # nothing is pulled for the others
    assert together.stores[0].state.choice == alone.stores[0].state.choice
    assert np.array_equal(together.envs[0].log.node_ids, alone.envs[0].log.node_ids)
    assert np.array_equal(together.envs[0].log.counts, alone.envs[0].log.counts)


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.5, 0.9, 1.0])
@pytest.mark.parametrize(("union", "own"), [(64, 64), (100, 32), (40, 4), (7, 1)])
def test_a_round_takes_the_cheapest_split_for_about_k_pulls(alpha, union, own) -> None:
    M, K = 10, 64
    g, loc = round_split(alpha, M, K, union, own)
    assert isinstance(g, int) and isinstance(loc, int)
    unit_g, unit_l = cheapest_split(alpha, M, 1.0, union / own)
    assert (g > 0) == (unit_g > 1e-12) and (loc > 0) == (unit_l > 1e-12)  # the split's shape, whole pulls
    length = union * g + own * loc
    assert length >= K * (1 - 1e-9) or g <= 1  # a round never spends less than K, but one pull a candidate
    assert length <= K + union + own  # at most the rounding more


def test_the_count_is_the_most_any_exponent_asks_for_and_grows_with_the_horizon() -> None:
    for horizon, alpha in ((10**4, 0.1), (10**6, 0.9)):
        count = screen_count(horizon, alpha, 10, most_candidates(10))
        asked = [best_count(horizon, b, alpha, 10, most_candidates(10)) for b in EXPONENTS]
        assert count == max(asked) and count in COUNT_GRID
        for b in (0.5, 2.0, 8.0):  # each exponent's count is the least modelled regret
            best = best_count(horizon, b, alpha, 10, most_candidates(10))
            assert all(modelled_regret(best, horizon, b, alpha, 10) <= modelled_regret(k, horizon, b, alpha, 10)
                       for k in COUNT_GRID if k <= horizon)
    counts = [screen_count(horizon, 0.5, 10, 10**5) for horizon in (10**4, 10**5, 10**6)]
    assert counts == sorted(set(counts))
    assert screen_count(1, 0.5, 3, 10**5) == 1 and screen_count(10, 0.5, 3, 10**5) <= 10


def test_a_round_costs_the_unions_pulls_so_clients_and_alpha_enter_the_model() -> None:
    # the union of M clients' top halves: one client's half at alpha = 0, nearly everything as alpha nears 1
    assert union_share(0.5, 0.0, 10) == pytest.approx(0.5)
    assert 0.5 < union_share(0.5, 0.5, 10) < union_share(0.5, 0.9, 10) < 1 - 0.5**10 + 1e-9
    assert union_share(0.5, 0.9, 2) < union_share(0.5, 0.9, 10)
    # a wider union costs more pulls a round, so the same count is dearer at alpha = 0.9 than at 0.1
    assert modelled_regret(4096, 10**6, 2.0, 0.9, 10) > modelled_regret(4096, 10**6, 2.0, 0.1, 10)


@pytest.mark.parametrize("exponent", [0.5, 1.0, 2.0, 6.0])
def test_the_first_rounds_estimates_show_the_peaks_exponent(exponent) -> None:
    rng = np.random.default_rng(3)
    values = 0.9 - 0.7 * rng.random(4096) ** (1 / exponent)  # gaps with P(G <= e) = (e / 0.7)**b
    estimate = tail_exponent(values)
    assert estimate is not None and abs(estimate - exponent) / exponent < 0.25
    assert tail_exponent(values[:10]) is None  # too few candidates to say


def test_the_count_is_resolved_where_the_run_is_specified_and_shown_in_the_summary() -> None:
    federation = synthetic_federation("garland", 3)
    result = run(federation, "pf-sh", horizon=100_000, seed=0)
    assert result.summary["candidates"] == screen_count(100_000, 0.5, 3, most_candidates(3))
    assert run(federation, "pf-sh", horizon=100_000, seed=0, candidates=40).summary["candidates"] == 40
    spec = AlgorithmSpec.build("pf-sh", num_clients=3, horizon=10**6, alpha=0.9)  # no dimension needed
    assert spec.options["candidates"] == screen_count(10**6, 0.9, 3, most_candidates(3))
    with pytest.raises(ConfigError, match=r"^candidates=-1 is invalid; allowed: an integer in \[0, "):
        run(federation, "pf-sh", horizon=1000, candidates=-1)
    with pytest.raises(ConfigError, match=r"^unknown keyword 'candidates' for algorithm 'pf-xab'"):
        run(federation, "pf-xab", horizon=1000, candidates=10)


def test_a_servers_values_are_bounded_by_pf_shs_own_rounds_depth_and_candidates() -> None:
    """A ClientApp bounds what a server sends by the run (issue 37): for pf-sh that is its ``ceil(log2 K)`` rounds,
    candidates at depth 48 and at most ``K`` of them, not the partition's phases and depths."""
    from pfxab_flower.algorithms.messages import PhaseInstruction
    from pfxab_flower.algorithms.phased import ProtocolError
    from pfxab_flower.algorithms.phased.client import ClientMachine

    settings = engine.make_settings(2, algorithm="pf-sh", horizon=20_000, seed=3, candidates=16)
    machine = ClientMachine(PFSH(), settings, 0)
    candidates = candidate_nodes(3, 16, 48)

    def refused(phase: int, ids: np.ndarray, fragment: str) -> None:
        with pytest.raises(ProtocolError, match=fragment):
            machine.explore(PhaseInstruction(phase, ids, 1, 1, settings.spec), env=None)  # type: ignore[arg-type]

    refused(5, candidates, r"phase 5 is not one this run can have: \[1, 4\]")
    refused(1, np.array([2, 3]), "not distinct nodes of depth 48")
    refused(1, np.sort(np.concatenate([candidates, candidate_nodes(4, 16, 48)])), "not distinct nodes of depth 48")


def test_compare_runs_pf_sh_beside_the_baselines_on_a_users_own_federation_and_from_the_command_line(tmp_path) -> None:
    """The comparison a person tuning their own black box makes: pf-sh against random search and local-only, in
    Python on their ``Federation`` (the count resolved from its domain) and with ``pfxab compare``."""
    import json

    from pfxab_flower.simulations.cli.main import main
    from pfxab_flower.studies.comparison import compare

    federation = tents((0.2, 0.3, 0.35))
    result = compare(federation, algorithms=["pf-sh", "random-search", "local-only"], seeds=[0, 1], progress=False,
                     alpha=0.5, horizon=20_000)
    assert sorted(result.runs["algorithm"].unique()) == ["local-only", "pf-sh", "random-search"]
    assert len(result.runs) == 6 and result.runs["regret"].notna().all()
    alone = run(federation, "pf-sh", alpha=0.5, horizon=20_000, seed=1)
    pf_sh = result.runs[(result.runs["algorithm"] == "pf-sh") & (result.runs["seed"] == 1)]
    assert pf_sh["regret"].item() == alone.summary["regret"]  # the same run as run() gives

    out = tmp_path / "cmp"
    assert main(["compare", "--problem", "garland", "--num-clients", "3", "--horizon", "20000", "--seeds", "0-1",
                 "--algorithms", "pf-sh,random-search,local-only", "--no-progress", "--out", str(out)]) == 0
    written = (out / "summary.csv").read_text(encoding="utf-8")
    assert all(name in written for name in ("pf-sh", "random-search", "local-only"))
    assert json.loads((out / "pfxab-manifest.json").read_text(encoding="utf-8"))
