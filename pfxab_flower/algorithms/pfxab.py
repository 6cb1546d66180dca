"""PF-XAB (the paper's Algorithms 1-2): personalised federated X-armed bandit.

Each client optimises ``mu'_m = alpha mu_m + (1 - alpha) mu``. In phase ``p``
(depth ``h = p``) it pulls every node of the union ``A(p)``
``ceil((1 - alpha) f(p))`` times (global exploration, so the server can
estimate ``mu``) and every node of its own ``A^m(p)`` ``ceil(M alpha f(p))``
times (local exploration). It then drops node ``k`` if
``mu'_k + nu1 rho^h <= max_j mu'_j - 2 B_p`` with
``mu'_k = alpha local_k + (1 - alpha) global_k``. The server only unions
active sets and averages means.
"""

from __future__ import annotations

import math

import numpy as np

from pfxab_flower.algorithms.phased import ClientView, Policy, Settings, eliminate_below


class PFXAB(Policy):
    name = "pf-xab"

    def pulls(self, settings: Settings, phase: int) -> tuple[int, int]:
        f = settings.schedule.f(phase)
        alpha = settings.alpha
        return math.ceil((1.0 - alpha) * f), math.ceil(settings.num_clients * alpha * f)

    def score(self, settings: Settings, view: ClientView) -> np.ndarray:
        return settings.alpha * view.local_means + (1.0 - settings.alpha) * view.global_means

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        schedule = settings.schedule
        return eliminate_below(
            self.score(settings, view),
            slack=schedule.smoothness(view.phase),
            margin=2.0 * schedule.confidence_width(view.phase),
        )
