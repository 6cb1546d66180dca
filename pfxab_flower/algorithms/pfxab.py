"""PF-XAB (the paper's Algorithms 1-2): personalised federated X-armed bandit.

Each client optimises ``mu'_m = alpha mu_m + (1 - alpha) mu``. In phase ``p``
(depth ``h = p``) it pulls every node of the union ``A(p)``
``ceil((1 - alpha) f(p))`` times (global exploration, so the server can
estimate ``mu``) and every node of its own ``A^m(p)`` ``ceil(M alpha f(p))``
times (local exploration). It then drops node ``k`` if
``mu'_k + nu1 rho^h <= max_j mu'_j - 2 B_p`` with
``mu'_k = alpha local_k + (1 - alpha) global_k``. The server only unions
active sets and averages means. Under ``confidence = "bernstein"`` each node has its
own width, that of the personalised estimate as a weighted sum of every pull behind it.
"""

from __future__ import annotations

import math

import numpy as np

from pfxab_flower.algorithms import bernstein
from pfxab_flower.algorithms.bernstein import eliminate_with_widths
from pfxab_flower.algorithms.phased import ClientView, Policy, Settings, eliminate_below


class PFXAB(Policy):
    name = "pf-xab"

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        alpha = settings.alpha
        return math.ceil((1.0 - alpha) * f), math.ceil(settings.num_clients * alpha * f)

    def score(self, settings: Settings, view: ClientView) -> np.ndarray:
        return settings.alpha * view.local_means + (1.0 - settings.alpha) * view.global_means

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        schedule = settings.schedule
        if view.local_widths is not None and view.global_widths is not None:  # bernstein
            return eliminate_with_widths(self.score(settings, view), self.widths(settings, view),
                                         slack=schedule.smoothness(view.phase))
        return eliminate_below(
            self.score(settings, view),
            slack=schedule.smoothness(view.phase),
            margin=2.0 * schedule.confidence_width(view.phase),
        )

    @staticmethod
    def widths(settings: Settings, view: ClientView) -> np.ndarray:
        """The personalised estimate's Bernstein width (:func:`.bernstein.personalised_widths`).

        A node no other client reported has only its local estimate, and its local width.
        """
        personalised = bernstein.personalised_widths(
            settings.alpha, view.pooled_variances, view.holders, view.local_counts, view.min_count,
            settings.reward_span, settings.log_3_delta)
        return np.where(np.isfinite(personalised), personalised, view.local_widths)
