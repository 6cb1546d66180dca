"""PF-SH: personalised successive halving over ``K`` candidates every client draws from the run's seed.

Each round every client pulls the union of survivors (global means) and its own, then keeps at most the
better half by its personalised estimate (fewer when its first round or its measured noise says so).
Derivation: docs/algorithms/pf-sh.md; the model: :mod:`pfxab_flower.algorithms.halving.pf_sh_model`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from pfxab_flower.algorithms.halving.candidates import CandidatePolicy, candidate_depth
from pfxab_flower.algorithms.halving.pf_sh_model import best_count, round_split, rounds, screen_count, tail_exponent
from pfxab_flower.algorithms.phased import ClientView, Settings
from pfxab_flower.algorithms.phased.state import ProtocolError
from pfxab_flower.algorithms.run_spec import SpecT
from pfxab_flower.arms.partition import point_depth
from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.parameter import Parameter

#: Most candidates of a run: every client holds them all in the first round (8 bytes each on the wire).
MAX_CANDIDATES = 1_000_000
#: Most candidates times clients (every client pulls and reports every candidate in the first round). Measured
#: in-process, garland-5d: 1000 clients x 16,777 candidates (2**24 pairs) took 15 min and 5.8 GB; at this limit
#: 1000 x 1,048 took 3 min and 420 MB (PF-XAB there: 4.5 min), 10 x 104,857 at T = 1e10 35 s and 390 MB.
MAX_CANDIDATE_PAIRS = 1 << 20
#: The chance the trimming after a round drops a client's best candidate, over the whole run (a union bound).
TRIM_RISK = 0.05


def most_candidates(num_clients: int) -> int:
    """The most candidates a run of ``num_clients`` clients may have (:data:`MAX_CANDIDATE_PAIRS`)."""
    return min(MAX_CANDIDATES, MAX_CANDIDATE_PAIRS // num_clients)


def trim_width(settings: Settings, view: ClientView, scores: np.ndarray, count: int) -> np.ndarray:
    """How far below its best estimate a candidate may be and still be a client's best, per candidate.

    The personalised estimate of a candidate pulled ``n`` times by the client and ``g`` times by each of the
    others has variance ``s^2 (a^2 / n + k / g)`` (docs/algorithms/pf-sh.md), ``s^2`` the client's measured
    noise; the difference of two estimates is wider than ``z`` standard deviations with probability at most
    ``2 exp(-z^2 / 2)``, so ``z = sqrt(2 ln(2 R K / risk))`` bounds the chance of dropping the best over
    ``R`` rounds of ``K`` candidates by :data:`TRIM_RISK`.
    """
    M, alpha = settings.num_clients, settings.alpha
    a = alpha + (1.0 - alpha) / M
    k = (M - 1) * ((1.0 - alpha) / M) ** 2
    own = np.maximum(np.asarray(view.local_counts, dtype=float), 1.0)
    variance = view.noise_variance * (a * a / own + k / max(view.min_count, 1))
    best = int(np.argmax(scores))
    z = math.sqrt(2.0 * math.log(2.0 * max(rounds(count), 1) * count / TRIM_RISK))
    width: np.ndarray = z * np.sqrt(variance + variance[best])
    return width


class PFSH(CandidatePolicy):
    name = "pf-sh"
    label = "PF-SH"
    description = ("personalised successive halving: shared random candidates, halved each round on "
                   "alpha*local + (1-alpha)*global")
    parameters = (
        Parameter("candidates", int, 0,
                  f"an integer in [0, {MAX_CANDIDATES:,}] (0: the rule, from the horizon, clients and alpha)",
                  "pf-sh: candidate points K (0: the documented rule)", lambda value: 0 <= value <= MAX_CANDIDATES,
                  after="max_evaluations", late=True),
    )
    smoothness_model = False
    estimates_noise = True

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
                              f"with {spelled('clients')}={num_clients} (candidates x clients at most "
                              f"{MAX_CANDIDATE_PAIRS:,})")

    def resolve(self, spec: SpecT, dimensions: int | None) -> SpecT:
        """``candidates = 0`` becomes the rule's count (:func:`screen_count`), at most the clients' share of
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
        count = min(screen_count(spec.horizon, spec.alpha, spec.num_clients, most), 1 << depth)
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
        return settings.alpha * view.local_means + (1.0 - settings.alpha) * view.global_means

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        """At most the better half (rounded up) by personalised estimate; ties go to the lower candidate id.

        After the first round, no more than half the count the model asks for the exponent the client's
        estimates show (:func:`tail_exponent`, :func:`best_count`); after a later one, only those within
        :func:`trim_width` of the best (once the client has measured its noise), at least one.
        """
        scores = self.score(settings, view)
        kept = (len(scores) + 1) // 2
        count = self.count(settings)
        if view.phase == 1:
            exponent = tail_exponent(scores)
            if exponent is not None:
                asked = best_count(settings.horizon, exponent, settings.alpha, settings.num_clients, count)
                kept = min(kept, (asked + 1) // 2)
        elif math.isfinite(view.noise_variance):
            close = scores >= scores.max() - trim_width(settings, view, scores, count)
            kept = min(kept, max(1, int(np.count_nonzero(close))))
        order = np.lexsort((view.node_ids, -scores))
        keep = np.zeros(scores.shape, dtype=bool)
        keep[order[:kept]] = True
        return keep
