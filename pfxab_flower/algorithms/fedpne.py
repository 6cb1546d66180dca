"""Fed-PNE (Li et al., AAAI 2024), as reconstructed in the specification.

Fed-PNE optimises the *global* objective only. Every client pulls every node of
the one shared active set ``ceil(f(p))`` times; the server eliminates on global
means with the PF-XAB rule (``drop k if mu_k + nu1 rho^h <= max_j mu_j - 2 B_p``)
and every client adopts the server's survivors, so all active sets are equal;
each client finally exploits the node with the best global mean.
"""

from __future__ import annotations

import math

import numpy as np

from pfxab_flower.algorithms.bernstein import eliminate_with_widths
from pfxab_flower.algorithms.phased import ClientView, Policy, Settings, eliminate_below


class FedPNE(Policy):
    name = "fed-pne"

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        return math.ceil(f), 0

    def server_eliminated(
        self, settings: Settings, phase: int, pooled_means: np.ndarray, pooled_widths: np.ndarray | None
    ) -> np.ndarray:
        schedule = settings.schedule
        if pooled_widths is not None:  # bernstein
            return ~eliminate_with_widths(pooled_means, pooled_widths, slack=schedule.smoothness(phase))
        return ~eliminate_below(
            pooled_means, slack=schedule.smoothness(phase), margin=2.0 * schedule.confidence_width(phase)
        )

    def score(self, settings: Settings, view: ClientView) -> np.ndarray:
        return view.global_means

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        return ~view.server_eliminated
