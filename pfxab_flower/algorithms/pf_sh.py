"""PF-SH: personalised successive halving over ``K`` candidates every client draws from the run's seed.

Each round every client pulls the union of survivors (global means) and its own survivors (local
means), then keeps the better half by its personalised estimate; the derivation of the split, the
candidate count and the guarantee is in docs/algorithms/pf-sh.md.
"""

from __future__ import annotations

import math

import numpy as np

from pfxab_flower.algorithms.candidates import CandidatePolicy, candidate_depth
from pfxab_flower.algorithms.phased import ClientView, Settings
from pfxab_flower.algorithms.phased.state import ProtocolError
from pfxab_flower.algorithms.run_spec import SpecT
from pfxab_flower.algorithms.splits import cheapest_split
from pfxab_flower.arms.domain import DIMENSIONS
from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.parameter import Parameter, check_against

#: Most candidates of a run: every client holds them all in the first round (8 bytes each on the wire).
MAX_CANDIDATES = 1_000_000
#: Most candidates times clients (every client pulls and reports every candidate in the first round). Measured
#: in-process, garland-5d: 1000 clients x 16,777 candidates (2**24 pairs) took 15 min and 5.8 GB; at this limit
#: 1000 x 1,048 took 3 min and 420 MB (PF-XAB there: 4.5 min), 10 x 104,857 at T = 1e10 35 s and 390 MB.
MAX_CANDIDATE_PAIRS = 1 << 20
#: The Hölder exponent the candidate count assumes of a peak: a square-root cusp (Garland's). A smoother peak
#: needs fewer candidates (the rule then over-explores by a constant factor); a sharper one more (docs/algorithms).
PEAK_HOLDER = 0.5
#: The counts the rule chooses among: ``2**(k/8)``, rounded (steps of 9%).
COUNT_GRID = tuple(sorted({round(2 ** (k / 8)) for k in range(8, 8 * 20 + 1)}))


def modelled_regret(count: int, horizon: int, dimensions: int) -> float:
    """One client's regret, in units of its objective's span, of ``count`` candidates under the rule's model.

    A uniform candidate's gap ``G`` has ``P(G <= e) = e**b``, ``b = d / PEAK_HOLDER`` (the reservoir exponent of
    a Hölder peak in ``d`` dimensions). Round ``r`` costs ``K`` pulls on the top ``2**-(r-1)`` share of the
    candidates (mean gap ``b / (b + 1) 2**(-(r-1)/b)``); the rest of the horizon exploits the best candidate
    (expected gap ``Gamma(K+1) Gamma(1+1/b) / Gamma(K+1+1/b)``). Noise and halving errors are left out.
    """
    b = dimensions / PEAK_HOLDER
    used, cost = 0, 0.0
    for r in range(1, rounds(count) + 1):
        if used + count > horizon:
            break
        cost += count * b / (b + 1.0) * 2.0 ** (-(r - 1) / b)
        used += count
    best_gap = math.exp(math.lgamma(count + 1) + math.lgamma(1 + 1 / b) - math.lgamma(count + 1 + 1 / b))
    return cost + (horizon - used) * best_gap


def candidate_count(horizon: int, dimensions: int) -> int:
    """``K``: the count of :data:`COUNT_GRID` (at most ``T``) with the least :func:`modelled_regret`.

    The number of clients and ``alpha`` do not enter: every round costs about ``K`` pulls whatever the split
    (the split decides how much a round tells, not what it costs), and the model leaves out the noise.
    """
    counts = [count for count in COUNT_GRID if count <= min(horizon, MAX_CANDIDATES)] or [min(2, horizon)]
    return min(counts, key=lambda count: modelled_regret(count, horizon, dimensions))


def most_candidates(num_clients: int) -> int:
    """The most candidates a run of ``num_clients`` clients may have (:data:`MAX_CANDIDATE_PAIRS`)."""
    return min(MAX_CANDIDATES, MAX_CANDIDATE_PAIRS // num_clients)


def rounds(count: int) -> int:
    """Rounds until one candidate is left, halving (rounding up) each round: ``ceil(log2 K)``."""
    return max(0, math.ceil(math.log2(count))) if count > 1 else 0


def round_split(alpha: float, num_clients: int, budget: float, union_size: int, own_size: int) -> tuple[int, int]:
    """``(global, local)`` pulls per candidate of a round: the cheapest split whose personalised estimate is
    worth the most pulls for about ``budget`` pulls per client (at least one pull of every candidate held)."""
    ratio = max(union_size / own_size, 1.0) if own_size > 0 else 1.0
    unit_global, unit_local = cheapest_split(alpha, num_clients, 1.0, ratio)  # the split per unit of f
    unit_cost = own_size * (ratio * unit_global + unit_local)
    f = budget / unit_cost if unit_cost > 0 else 0.0
    global_pulls, local_pulls = _whole(unit_global * f), _whole(unit_local * f)
    if global_pulls == 0 and local_pulls == 0:
        local_pulls = 1
    return global_pulls, local_pulls


def _whole(pulls: float) -> int:
    """``pulls`` rounded up, after its floating-point error (``1.0000000002`` is one pull, not two)."""
    return math.ceil(round(pulls, 9))


class PFSH(CandidatePolicy):
    name = "pf-sh"
    label = "PF-SH"
    description = ("personalised successive halving: shared random candidates, halved each round on "
                   "alpha*local + (1-alpha)*global")
    parameters = (
        Parameter("candidates", int, 0,
                  f"an integer in [0, {MAX_CANDIDATES:,}] (0: the rule, from the horizon and dimensions)",
                  "pf-sh: candidate points K (0: the documented rule)", lambda value: 0 <= value <= MAX_CANDIDATES,
                  after="max_evaluations", late=True),
    )

    def resolve(self, spec: SpecT, dimensions: int | None) -> SpecT:
        """``candidates = 0`` becomes the rule's count for the run's horizon and dimensions (at most the
        clients' share of :data:`MAX_CANDIDATE_PAIRS`); a count given is checked against that share."""
        most = most_candidates(spec.num_clients)
        given = spec.options["candidates"]
        if given > most:
            raise ConfigError(f"{spelled('candidates')}={given!r} is invalid; allowed: an integer in [0, {most:,}] "
                              f"with {spec.num_clients} clients (candidates x clients at most "
                              f"{MAX_CANDIDATE_PAIRS:,})")
        if given != 0:
            return spec
        if dimensions is None:
            raise ConfigError(f"{spelled('candidates')}=0 is invalid without the search space's dimensions; allowed: "
                              "dimensions=d (the domain's) to derive the count, or candidates=K >= 1")
        count = min(candidate_count(spec.horizon, check_against(DIMENSIONS, dimensions, label="dimensions")), most)
        return spec.replace(options={**spec.options, "candidates": count})

    def count(self, settings: Settings) -> int:
        """``K``: the candidates of the run (the spec carries the resolved count: a server sends it)."""
        count = int(settings.options["candidates"])
        if count < 1:
            raise ProtocolError("candidates=0 reached a machine: the server resolves the count before it sends it")
        return count

    def most_kept(self, in_play: int) -> int:
        """Successive halving: the better half, rounded up."""
        return (in_play + 1) // 2

    def max_phases(self, settings: Settings) -> int:
        """``ceil(log2 K)`` rounds, whoever answers: a client that misses a round keeps all its survivors and
        ends with more than one, exploiting its best (a lost client cannot hold the others in exploration)."""
        return rounds(min(self.count(settings), 1 << candidate_depth(settings)))

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        return self.phase_pulls(settings, f, self.count(settings), self.count(settings))

    def phase_pulls(self, settings: Settings, f: float, union_size: int, own_size: int) -> tuple[int, int]:
        """About ``K`` pulls per client each round (the first round's one pull per candidate); ``f`` is unused."""
        if own_size <= 1:  # one survivor left: nothing to halve
            return 0, 0
        count = min(self.count(settings), 1 << candidate_depth(settings))
        return round_split(settings.alpha, settings.num_clients, count, union_size, own_size)

    def score(self, settings: Settings, view: ClientView) -> np.ndarray:
        return settings.alpha * view.local_means + (1.0 - settings.alpha) * view.global_means

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        """The better half (rounded up) by personalised estimate; ties go to the lower candidate id."""
        scores = self.score(settings, view)
        order = np.lexsort((view.node_ids, -scores))
        keep = np.zeros(scores.shape, dtype=bool)
        keep[order[: (len(scores) + 1) // 2]] = True
        return keep
