"""Successive halving over shared candidates as a base: the rounds every such policy runs, owned here.

Each round every client pulls the union of survivors (global means) and its own, with the cheapest split
(:func:`round_split`) of successive halving's budget, then keeps at most the better half of its own by its
personalised estimate. A subclass declares its ``candidates`` keyword and gives the count's rule
(:meth:`~SuccessiveHalving.rule_count`) and, if it keeps fewer, :meth:`~SuccessiveHalving.kept_count`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from pfxab_flower.algorithms.halving.candidates import CandidatePolicy, candidate_depth
from pfxab_flower.algorithms.phased import ClientView, Settings
from pfxab_flower.algorithms.phased.state import ProtocolError
from pfxab_flower.algorithms.run_spec import SpecT
from pfxab_flower.algorithms.splits import cheapest_split, personalised_estimate
from pfxab_flower.arms.partition import point_depth
from pfxab_flower.errors import ConfigError, spelled

#: Most candidates of a run: every client holds them all in the first round (8 bytes each on the wire).
MAX_CANDIDATES = 1_000_000
#: Most candidates times clients (every client pulls and reports every candidate in the first round). Measured
#: in-process, garland-5d: 1000 clients x 16,777 candidates (2**24 pairs) took 15 min and 5.8 GB; at this limit
#: 1000 x 1,048 took 3 min and 420 MB (PF-XAB there: 4.5 min), 10 x 104,857 at T = 1e10 35 s and 390 MB.
MAX_CANDIDATE_PAIRS = 1 << 20


def most_candidates(num_clients: int) -> int:
    """The most candidates a run of ``num_clients`` clients may have (:data:`MAX_CANDIDATE_PAIRS`)."""
    return min(MAX_CANDIDATES, MAX_CANDIDATE_PAIRS // num_clients)


def rounds(count: int) -> int:
    """Rounds until one candidate is left, halving (rounding up) each round: ``ceil(log2 K)``."""
    return max(0, math.ceil(math.log2(count))) if count > 1 else 0


def whole(pulls: float) -> int:
    """``pulls`` rounded up, after its floating-point error (``1.0000000002`` is one pull, not two)."""
    return math.ceil(round(pulls, 9))


def round_split(alpha: float, num_clients: int, budget: float, union_size: int, own_size: int) -> tuple[int, int]:
    """``(global, local)`` pulls per candidate of a round: the cheapest split whose personalised estimate is
    worth the most pulls for about ``budget`` pulls per client (at least one pull of every candidate held)."""
    ratio = max(union_size / own_size, 1.0) if own_size > 0 else 1.0
    unit_global, unit_local = cheapest_split(alpha, num_clients, 1.0, ratio)  # the split per unit of f
    unit_cost = own_size * (ratio * unit_global + unit_local)
    f = budget / unit_cost if unit_cost > 0 else 0.0
    global_pulls, local_pulls = whole(unit_global * f), whole(unit_local * f)
    if global_pulls == 0 and local_pulls == 0:
        local_pulls = 1
    return global_pulls, local_pulls


class SuccessiveHalving(CandidatePolicy):
    """Personalised successive halving over the ``candidates`` the spec carries. What it owns:

    - **The count.** ``candidates = 0`` becomes :meth:`rule_count`'s, at most the clients' share of
      :data:`MAX_CANDIDATE_PAIRS` and the cells of the candidates' depth; a count given is checked against both.
    - **The rounds.** At most ``ceil(log2 K)``; round ``r`` budgets ``2**(r-1)`` pulls for each candidate a client
      has in play (at most ``K``), split by :func:`round_split`; a client keeps at most the better half.
    - **The decision.** The personalised estimate; the best :meth:`kept_count`, ties to the lower candidate id.
    """

    def rule_count(self, spec: SpecT, most: int) -> int:
        """The count a run of ``spec`` draws when it gives none (at most ``most``)."""
        raise NotImplementedError

    def kept_count(self, settings: Settings, view: ClientView, scores: np.ndarray) -> int:
        """How many of its ``scores`` a client keeps after a round: the better half, rounded up."""
        return (len(scores) + 1) // 2

    def phase_line(self, row: Mapping[str, Any]) -> str:
        """A round in the words of successive halving: candidates, not the partition's nodes and depth."""
        return (f"phase {row['phase']}: {row['active_nodes']} candidates, {row['eliminated']} dropped, "
                f"{row['next_active_nodes']} kept, {row['phase_length']} pulls per client, "
                f"{row['communication_rounds']} exchanges so far")

    @classmethod
    def check_options(cls, num_clients: int, options: Mapping[str, Any]) -> None:
        """Candidates x clients at most :data:`MAX_CANDIDATE_PAIRS`."""
        most, given = most_candidates(num_clients), options["candidates"]
        if given > most:
            raise ConfigError(f"{spelled('candidates')}={given!r} is invalid; allowed: an integer in [0, {most:,}] "
                              f"with {spelled('num_clients')}={num_clients} (candidates x clients at most "
                              f"{MAX_CANDIDATE_PAIRS:,})")

    def resolve(self, spec: SpecT, dimensions: int | None) -> SpecT:
        """``candidates = 0`` becomes :meth:`rule_count`'s count, at most the clients' share of
        :data:`MAX_CANDIDATE_PAIRS` and the ``2**max_depth`` cells of the candidates' depth; a count given is
        checked against both (one line, before any work)."""
        self.check_options(spec.num_clients, spec.options)
        most, given = most_candidates(spec.num_clients), spec.options["candidates"]
        depth = point_depth(spec.max_depth)
        if given > 1 << depth:
            raise ConfigError(f"{spelled('candidates')}={given!r} is invalid with {spelled('max_depth')}="
                              f"{spec.max_depth}; allowed: at most {1 << depth:,} (the cells of depth {depth}), "
                              f"or a larger {spelled('max_depth')}")
        if given != 0:
            return spec
        count = min(self.rule_count(spec, most), 1 << depth)
        return spec.replace(options={**spec.options, "candidates": count})

    def count(self, settings: Settings) -> int:
        """``K``: the candidates of the run (the spec carries the resolved count: a server sends it)."""
        count = int(settings.options["candidates"])
        if count < 1:
            raise ProtocolError("candidates=0 reached a machine: the server resolves the count before it sends it")
        return min(count, 1 << candidate_depth(settings))

    def most_kept(self, in_play: int) -> int:
        """Successive halving: at most the better half, rounded up."""
        return (in_play + 1) // 2

    def max_phases(self, settings: Settings) -> int:
        """``ceil(log2 K)`` rounds at most, whoever answers (a client that misses rounds cannot hold the others in
        exploration: it exploits the best of the several it may still hold)."""
        return rounds(self.count(settings))

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        return self.phase_pulls(settings, f, self.count(settings), self.count(settings))

    def phase_pulls(self, settings: Settings, f: float, union_size: int, own_size: int) -> tuple[int, int]:
        """The first round's split: about ``K`` pulls per client (one per candidate); ``f`` is unused."""
        return self.round_pulls(settings, 1, f, union_size, own_size)

    def round_pulls(self, settings: Settings, phase: int, f: float, union_size: int,
                    own_size: int) -> tuple[int, int]:
        """Successive halving's budget: ``2**(r-1)`` pulls' worth for each candidate in play in round ``r`` (``K``
        per round while every client halves; less once they keep fewer), at most ``K``; ``f`` is unused."""
        if own_size <= 1:  # one survivor left: nothing to halve
            return 0, 0
        budget = min(self.count(settings), own_size << (phase - 1))
        return round_split(settings.alpha, settings.num_clients, budget, union_size, own_size)

    def score(self, settings: Settings, view: ClientView) -> np.ndarray:
        return personalised_estimate(settings.alpha, view.local_means, view.global_means)

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        """The :meth:`kept_count` best by personalised estimate; ties go to the lower candidate id."""
        scores = self.score(settings, view)
        order = np.lexsort((view.node_ids, -scores))
        keep = np.zeros(scores.shape, dtype=bool)
        keep[order[:self.kept_count(settings, view, scores)]] = True
        return keep
