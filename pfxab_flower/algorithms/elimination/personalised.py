"""The paper's personalised phased elimination (Algorithms 1-2) as a base: PF-XAB and its variants extend it.

Each client pulls the union of active sets for the global mean and its own set for its local mean, and
eliminates on the personalised estimate (:func:`~pfxab_flower.algorithms.splits.personalised_estimate`)
through the run's bound. It lives apart from PF-XAB's module so that a variant extends it, not PF-XAB.
"""

from __future__ import annotations

import math

import numpy as np

from pfxab_flower.algorithms.phased import ClientView, Policy, Settings
from pfxab_flower.algorithms.splits import personalised_estimate


class PersonalisedElimination(Policy):
    """PF-XAB's pulls, score and elimination; a subclass gives its name and whatever it changes."""

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        """The paper's split: ``ceil((1 - alpha) f)`` global pulls per node of the union, ``ceil(M alpha f)`` local."""
        alpha = settings.alpha
        return math.ceil((1.0 - alpha) * f), math.ceil(settings.num_clients * alpha * f)

    def score(self, settings: Settings, view: ClientView) -> np.ndarray:
        return personalised_estimate(settings.alpha, view.local_means, view.global_means)

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        """The bound's rule on the personalised estimate and its widths, with the schedule's smoothness slack."""
        bound = settings.bound
        return bound.keep(self.score(settings, view), bound.personalised_widths(settings, view),
                          slack=settings.schedule.smoothness(view.phase))
