"""``pf-xab-adaptive``: PF-XAB with the cheapest pull split that keeps its widths.

Its one departure from PF-XAB is the split of a phase's pulls between the union and the
own set (``cheapest_split``). The guarantee rests on two facts checked here: the split
keeps the personalised estimate worth ``M f`` pooled pulls (so the paper's widths hold),
and it never costs more pulls than PF-XAB's split. The rest (the same messages on every
engine) is checked by the suites that run every registered algorithm.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pfxab_flower.algorithms import PFXAB, PFXABAdaptive
from pfxab_flower.algorithms.elimination.pfxab_adaptive import worth_a_phase
from pfxab_flower.algorithms.splits import cheapest_split
from pfxab_flower.problems import build_federation
from pfxab_flower.running import engine
from pfxab_flower.schema.run_config import RunConfig

GRID = list(itertools.product((0.0, 0.1, 0.5, 0.9, 1.0), (1, 2, 10, 100), (1.0, 1.5, 2.0, 4.0, 20.0)))


def weight_squares(alpha: float, M: int, g: float, loc: float) -> float:
    """``sum w^2`` of a client's personalised estimate (every other client: ``g`` pulls of the node)."""
    a, c = alpha + (1 - alpha) / M, (1 - alpha) / M
    return a * a / (g + loc) + ((M - 1) * c * c / g if M > 1 and alpha < 1 else 0.0)


@pytest.mark.parametrize(("alpha", "M", "ratio"), GRID)
def test_the_split_keeps_the_widths_and_is_the_cheapest(alpha, M, ratio) -> None:
    f = 1000.0
    g, loc = cheapest_split(alpha, M, f, ratio)
    assert g >= 0 and loc >= 0 and g + loc >= f * (1 - 1e-12)  # a client's own node never has fewer than f pulls
    assert weight_squares(alpha, M, g, loc) == pytest.approx(1 / (M * f), rel=1e-9)  # tight: no pull wasted
    paper = ((1 - alpha) * f, M * alpha * f)
    assert ratio * g + loc <= ratio * paper[0] + paper[1] + 1e-9 * f  # PF-XAB's split is a feasible point
    # no other split meeting the constraint is cheaper: every g on a fine grid, with its smallest loc
    if alpha < 1 and M > 1:
        a, c = alpha + (1 - alpha) / M, (1 - alpha) / M
        room = 1 / (M * f) - (M - 1) * c * c / np.geomspace(1e-3 * f, 1e3 * f, 20_001)
        gs = np.geomspace(1e-3 * f, 1e3 * f, 20_001)[room > 0]
        ls = np.maximum(a * a / room[room > 0] - gs, 0.0)
        assert ratio * g + loc <= (ratio * gs + ls).min() * (1 + 1e-6)


@pytest.mark.parametrize(("alpha", "sizes"), [(0.1, (8, 4)), (0.5, (20, 4)), (0.9, (3, 3)), (0.5, (2, 2))])
def test_the_policys_pulls_are_whole_and_keep_the_widths(alpha, sizes) -> None:
    settings = engine.make_settings(10, algorithm="pf-xab-adaptive", alpha=alpha, horizon=200_000, seed=0)
    f = 123.4
    g, loc = PFXABAdaptive().phase_pulls(settings, f, *sizes)
    assert isinstance(g, int) and isinstance(loc, int)
    assert weight_squares(alpha, 10, g, loc) <= 1 / (10 * f)
    paper_g, paper_l = PFXAB().pulls(settings, f)
    assert sizes[0] * g + sizes[1] * loc <= sizes[0] * paper_g + sizes[1] * paper_l + sum(sizes)


@pytest.mark.parametrize("rho", [0.3, 0.5, 0.7, 0.9])
def test_a_phase_starts_exactly_when_it_lowers_the_regret_bound(rho) -> None:
    """The share is the solution of ``7 L + 3 rho (R - L) <= 3 R`` (the bounds of ``worth_a_phase``' docstring)."""
    share, remaining = worth_a_phase(rho), 1_000_000
    for length in np.linspace(1, remaining, 2_001):
        with_phase, without = 7 * length + 3 * rho * (remaining - length), 3 * remaining
        assert (with_phase <= without) == (length <= share * remaining + 1e-6)
    assert worth_a_phase(0.5) == pytest.approx(1.5 / 5.5)


def test_it_runs_cheaper_phases_and_stops_where_the_bound_says() -> None:
    config = RunConfig(problem="garland", num_clients=5, alpha=0.5, horizon=200_000, seed=3)
    federation = build_federation(config)
    runs = {name: engine.run(federation, name, alpha=0.5, horizon=200_000, seed=3) for name in
            ("pf-xab", "pf-xab-adaptive")}
    paper, adaptive = runs["pf-xab"].phases, runs["pf-xab-adaptive"].phases
    # phase 1: the same two nodes for everyone, so every pull is global; PF-XAB's local pulls are the saving
    assert adaptive["local_pulls"].iloc[0] == 0 and paper["local_pulls"].iloc[0] > 0
    assert adaptive["phase_length"].iloc[0] < paper["phase_length"].iloc[0]
    share = worth_a_phase(0.5)
    before = np.concatenate([[0], adaptive["time"].to_numpy()[:-1]])
    assert np.all(adaptive["phase_length"].to_numpy() <= share * (200_000 - before))
    assert runs["pf-xab-adaptive"].summary["communication_rounds"] == 2 * len(adaptive) + 1
    # the phase after the last did not start because of the rule (its depth and the evaluation budget allowed it)
    settings = engine.make_settings(5, algorithm="pf-xab-adaptive", alpha=0.5, horizon=200_000, seed=3)
    assert settings.schedule.depth_allowed(len(adaptive) + 1)
