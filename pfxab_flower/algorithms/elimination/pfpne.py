"""PF-PNE (Li et al., AISTATS 2024): personalised phased node elimination, as reconstructed in the specification.

Clients pull their own active sets; the server drops a node for everyone on the pooled means (with
the heterogeneity slack ``eps``), each client on its local means (docs/algorithms/pf-pne.md).
"""

from __future__ import annotations

import math

import numpy as np

from pfxab_flower.algorithms.bounds import Widths
from pfxab_flower.algorithms.phased import ClientView, Policy, Settings
from pfxab_flower.parameter import Parameter


class PFPNE(Policy):
    name = "pf-pne"
    label = "PF-PNE"
    description = ("PF-PNE (Li et al., AISTATS 2024): personalised phased node elimination, "
                   "heterogeneity slack pf_pne_eps")
    parameters = (
        Parameter("pf_pne_eps", float, 0.1, "a number >= 0", "PF-PNE heterogeneity slack eps >= 0",
                  lambda value: value >= 0,
                  after="max_evaluations", on_every_wire=True),
    )

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        return 0, math.ceil(f)

    def server_eliminated(
        self, settings: Settings, phase: int, pooled_means: np.ndarray, pooled_widths: Widths
    ) -> np.ndarray:
        slack = settings.schedule.smoothness(phase) + 2.0 * settings.options["pf_pne_eps"]
        return ~settings.bound.keep(pooled_means, pooled_widths, slack=slack)

    def score(self, settings: Settings, view: ClientView) -> np.ndarray:
        return view.local_means

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        bound = settings.bound
        local_keep = bound.keep(view.local_means, bound.local_widths(settings, view),
                                slack=settings.schedule.smoothness(view.phase))
        keep: np.ndarray = local_keep & ~view.server_eliminated
        if not keep.any():
            keep[np.argmax(view.local_means)] = True
        return keep
