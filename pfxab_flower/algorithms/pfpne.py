"""PF-PNE (Li et al., AISTATS 2024), as reconstructed in the specification.

PF-PNE optimises each client's *local* objective with a "double elimination".
Each client pulls every node of its own ``A^m(p)`` ``n = ceil(f(p))`` times.
The server pools each node's local means over the clients that hold it and
drops ``k`` for everyone if ``pooled_k + nu1 rho^h + 2 eps <= max_j pooled_j - 2 B_p``
(``eps`` bounds ``sup |mu_m - mu|``). Client ``m`` drops ``k`` if
``local_k + nu1 rho^h + b <= max_j local_j - b`` with ``b = c sqrt(log(T) / n)``.
A node stays only if it survives both; if none does, the client keeps its best
node by local mean. It finally exploits its best surviving node by local mean.
"""

from __future__ import annotations

import math

import numpy as np

from pfxab_flower.algorithms.bernstein import eliminate_with_widths
from pfxab_flower.algorithms.phased import ClientView, Policy, Settings, eliminate_below
from pfxab_flower.algorithms.schedule import C


class PFPNE(Policy):
    name = "pf-pne"

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        return 0, math.ceil(f)

    def server_eliminated(
        self, settings: Settings, phase: int, pooled_means: np.ndarray, pooled_widths: np.ndarray | None
    ) -> np.ndarray:
        schedule = settings.schedule
        if pooled_widths is not None:  # bernstein
            return ~eliminate_with_widths(pooled_means, pooled_widths,
                                          slack=schedule.smoothness(phase) + 2.0 * settings.pf_pne_eps)
        return ~eliminate_below(
            pooled_means,
            slack=schedule.smoothness(phase) + 2.0 * settings.pf_pne_eps,
            margin=2.0 * schedule.confidence_width(phase),
        )

    def score(self, settings: Settings, view: ClientView) -> np.ndarray:
        return view.local_means

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        if view.local_widths is not None:  # bernstein: each node's own local width
            local_keep = eliminate_with_widths(view.local_means, view.local_widths,
                                               slack=settings.schedule.smoothness(view.phase))
        else:
            samples = max(int(view.local_counts.min()), 1)
            b = C * math.sqrt(math.log(settings.horizon) / samples)
            local_keep = eliminate_below(view.local_means, slack=settings.schedule.smoothness(view.phase) + b,
                                         margin=b)
        keep = local_keep & ~view.server_eliminated
        if not keep.any():
            keep[np.argmax(view.local_means)] = True
        return keep
