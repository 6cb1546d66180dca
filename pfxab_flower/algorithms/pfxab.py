"""PF-XAB (the paper's Algorithms 1-2): personalised federated X-armed bandit.

Each client optimises ``mu'_m = alpha mu_m + (1 - alpha) mu``. In phase ``p``
(depth ``h = p``) it pulls every node of the union ``A(p)``
``ceil((1 - alpha) f(p))`` times (global exploration, so the server can
estimate ``mu``) and every node of its own ``A^m(p)`` ``ceil(M alpha f(p))``
times (local exploration). It then drops node ``k`` if
``mu'_k + nu1 rho^h <= max_j mu'_j - 2 B_p`` with
``mu'_k = alpha local_k + (1 - alpha) global_k``. The server only unions
active sets and averages means. ``B_p`` is the width of the personalised estimate
under the run's confidence bound (Hoeffding: the paper's, the same for every node;
Bernstein: each node's own, from every pull behind the estimate).
"""

from __future__ import annotations

import math

import numpy as np

from pfxab_flower.algorithms.phased import ClientView, Policy, Settings


class PFXAB(Policy):
    name = "pf-xab"
    label = "PF-XAB"
    description = ("PF-XAB (Arabzadeh, Grant, Leslie, TMLR 2024): each client optimises "
                   "alpha*local + (1-alpha)*global")

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        alpha = settings.alpha
        return math.ceil((1.0 - alpha) * f), math.ceil(settings.num_clients * alpha * f)

    def score(self, settings: Settings, view: ClientView) -> np.ndarray:
        return settings.alpha * view.local_means + (1.0 - settings.alpha) * view.global_means

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        bound = settings.bound
        return bound.keep(self.score(settings, view), bound.personalised_widths(settings, view),
                          slack=settings.schedule.smoothness(view.phase))
