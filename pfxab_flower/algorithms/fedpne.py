"""Fed-PNE (Li et al., AAAI 2024), as reconstructed in the specification.

Fed-PNE optimises the *global* objective only. Every client pulls every node of
the one shared active set ``ceil(f(p))`` times; the server eliminates on global
means with the PF-XAB rule (``drop k if mu_k + nu1 rho^h <= max_j mu_j - 2 B_p``, ``B_p``
the global means' width under the run's confidence bound)
and every client adopts the server's survivors, so all active sets are equal;
each client finally exploits the node with the best global mean.
"""

from __future__ import annotations

import math

import numpy as np

from pfxab_flower.algorithms.bounds import Widths
from pfxab_flower.algorithms.phased import ClientView, Policy, Settings


class FedPNE(Policy):
    name = "fed-pne"
    label = "Fed-PNE"
    description = "Fed-PNE (Li et al., AAAI 2024): federated phased node elimination on the global objective"

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        return math.ceil(f), 0

    def server_eliminated(
        self, settings: Settings, phase: int, pooled_means: np.ndarray, pooled_widths: Widths
    ) -> np.ndarray:
        return ~settings.bound.keep(pooled_means, pooled_widths, slack=settings.schedule.smoothness(phase))

    def score(self, settings: Settings, view: ClientView) -> np.ndarray:
        return view.global_means

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        return ~view.server_eliminated
