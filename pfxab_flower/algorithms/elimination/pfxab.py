"""PF-XAB (the paper's Algorithms 1-2): personalised federated X-armed bandit.

Each client optimises ``alpha mu_m + (1 - alpha) mu``: it pulls the union of active sets for the
global mean and its own set for its local mean, and eliminates on the personalised estimate; the
server only unions active sets and averages means. Details: docs/algorithms/pf-xab.md.
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
