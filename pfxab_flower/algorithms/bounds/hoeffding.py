"""Hoeffding widths: the paper's ``B_p = nu1 rho^h``, the ``confidence = "hoeffding"`` option (the default).

A width depends on the number of pulls only (the worst noise the rewards allow), so every node has
the same width and a client reports its means only. The formulas: docs/algorithms/index.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from pfxab_flower.algorithms.bounds.base import ClientView, ConfidenceBound, Design, RunView, Widths
from pfxab_flower.algorithms.schedule import C


def eliminate_below(estimates: np.ndarray, slack: float, margin: Widths) -> np.ndarray:
    """Keep mask of the rule ``drop k if estimate_k + slack <= max_j estimate_j - margin``.

    A NaN estimate (a node no valid report sampled) is no evidence: it is kept and
    is not the reference; with no finite estimate at all, every node is kept.
    """
    estimates = np.asarray(estimates, dtype=float)
    known = np.isfinite(estimates)
    if not known.any():
        return np.ones(estimates.shape, dtype=bool)
    keep: np.ndarray = ~(estimates + slack <= estimates[known].max() - margin)
    return keep


class Hoeffding(ConfidenceBound):
    """The paper's widths: one width per phase for every node, from the number of pulls alone."""

    name = "hoeffding"

    def samples(self, settings: RunView, phase: int, design: Design) -> float:
        return settings.schedule.f(phase)

    def global_widths(
        self, settings: RunView, phase: int, pooled: Mapping[str, np.ndarray], holders: np.ndarray, min_count: int
    ) -> float:
        return settings.schedule.confidence_width(phase)

    def personalised_widths(self, settings: RunView, view: ClientView) -> float:
        return settings.schedule.confidence_width(view.phase)

    def local_widths(self, settings: RunView, view: ClientView) -> float:
        """``c sqrt(log(T) / n)`` for the fewest pulls ``n`` of the client's own nodes."""
        samples = max(int(view.local_counts.min()), 1)
        return C * math.sqrt(math.log(settings.horizon) / samples)

    def keep(self, estimates: np.ndarray, widths: Widths, slack: float) -> np.ndarray:
        """The paper's rule: ``drop k if estimate_k + slack <= max_j estimate_j - 2 width`` (one width for all)."""
        return eliminate_below(estimates, slack=slack, margin=2.0 * widths)
