"""The phase schedule shared by the phased algorithms: pulls per node ``f(p)``, width ``B_p``, the budget rule.

Phase ``p`` works at depth ``h = p`` with ``f(p) = c^2 log(T) / (M nu1^2 rho^(2h))``, ``c = sqrt(2)``;
a phase starts only if it fits in the remaining budget, and after the last every client exploits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pfxab_flower.arms.partition import MAX_DEPTH

C = math.sqrt(2.0)


@dataclass(frozen=True)
class Schedule:
    """Horizon, federation size and smoothness constants: everything ``f(p)`` needs."""

    horizon: int
    num_clients: int
    nu1: float = 1.0
    rho: float = 0.5
    max_depth: int | None = None

    def f(self, phase: int) -> float:
        """``f(p)``: the base number of samples per node in phase ``p`` (depth ``p``); infinite where ``rho**(2p)``
        underflows (a policy whose phases are not depths can reach such a phase: its split ignores ``f``)."""
        denominator = self.num_clients * self.nu1**2 * self.rho ** (2 * phase)
        return C**2 * math.log(self.horizon) / denominator if denominator > 0 else math.inf

    def confidence_width(self, phase: int) -> float:
        """``B_p = c sqrt(log(T) / (M f(p)))``."""
        f = self.f(phase)
        if f == 0:  # T = 1: log(T) = 0, nothing is ever eliminated
            return math.inf
        return C * math.sqrt(math.log(self.horizon) / (self.num_clients * f))

    def smoothness(self, phase: int) -> float:
        """``nu1 rho^h``: the cell-diameter bound at the phase's depth."""
        return self.nu1 * self.rho**phase

    def depth_allowed(self, phase: int) -> bool:
        """Whether phase ``p`` may run: within ``max_depth`` and the deepest ``int64`` node id."""
        limit = MAX_DEPTH - 1 if self.max_depth is None else min(self.max_depth, MAX_DEPTH - 1)
        return phase <= limit

    def max_phases(self, f: Callable[[int], float] | None = None) -> int:
        """An upper bound on the number of phases, from the horizon alone.

        Every phase has a client exploring at least two nodes at least ``f(p)``
        times each (the children of its best node), so ``sum 2 f(p) <= T`` bounds
        the phases that can fit; ``max_depth`` bounds them too. ``f`` is a lower
        bound on a phase's samples per node (default: this schedule's ``f(p)``).
        """
        f = f or self.f
        used, phase = 0.0, 0
        while (
            self.depth_allowed(phase + 1)
            and f(phase + 1) > 0
            and used + 2 * f(phase + 1) <= self.horizon
        ):
            phase += 1
            used += 2 * f(phase)
        return phase
