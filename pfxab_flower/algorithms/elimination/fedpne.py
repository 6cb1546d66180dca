"""Fed-PNE (Li et al., AAAI 2024), as reconstructed in the specification.

It optimises the *global* objective only: the server eliminates on global means and every client
adopts its survivors, then exploits the best global mean. Details: docs/algorithms/fed-pne.md.
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
