"""PF-SH: personalised successive halving over ``K`` candidates every client draws from the run's seed.

Each round every client pulls the union of survivors (global means) and its own, then keeps at most the
better half by its personalised estimate (:class:`~.successive_halving.SuccessiveHalving`), fewer when its
first round or its measured noise says so. Derivation: docs/algorithms/pf-sh.md; the model: :mod:`.pf_sh_model`.
"""

from __future__ import annotations

import math

import numpy as np

from pfxab_flower.algorithms.halving.pf_sh_model import best_count, screen_count, tail_exponent
from pfxab_flower.algorithms.halving.successive_halving import MAX_CANDIDATES, SuccessiveHalving, rounds
from pfxab_flower.algorithms.phased import ClientView, Settings
from pfxab_flower.algorithms.run_spec import SpecT
from pfxab_flower.parameter import Parameter

#: The chance the trimming after a round drops a client's best candidate, over the whole run (a union bound).
TRIM_RISK = 0.05


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


class PFSH(SuccessiveHalving):
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

    def rule_count(self, spec: SpecT, most: int) -> int:
        """The count the model screens (:func:`screen_count`): the most any peak's exponent asks for."""
        return screen_count(spec.horizon, spec.alpha, spec.num_clients, most)

    def kept_count(self, settings: Settings, view: ClientView, scores: np.ndarray) -> int:
        """At most the better half (rounded up). After the first round, no more than half the count the model
        asks for the exponent the client's estimates show (:func:`tail_exponent`, :func:`best_count`); after a
        later one, only those within :func:`trim_width` of the best (once the client has measured its noise),
        at least one."""
        kept = super().kept_count(settings, view, scores)
        count = self.count(settings)
        if view.phase == 1:
            exponent = tail_exponent(scores)
            if exponent is not None:
                asked = best_count(settings.horizon, exponent, settings.alpha, settings.num_clients, count)
                kept = min(kept, (asked + 1) // 2)
        elif math.isfinite(view.noise_variance):
            close = scores >= scores.max() - trim_width(settings, view, scores, count)
            kept = min(kept, max(1, int(np.count_nonzero(close))))
        return kept
