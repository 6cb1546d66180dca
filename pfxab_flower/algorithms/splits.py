"""The personalised estimate ``alpha * local + (1 - alpha) * global`` and how a round's pulls are split between the
union's nodes (global) and a client's own (local): shared by the algorithms that use them (the split's derivation:
docs/algorithms/pf-xab-adaptive.md), so that none imports another's module.
"""

from __future__ import annotations

import math

import numpy as np


def personalised_estimate(alpha: float, local_means: np.ndarray, global_means: np.ndarray) -> np.ndarray:
    """A client's estimate of what it optimises, per node: ``alpha * local + (1 - alpha) * global`` (the paper's)."""
    estimate: np.ndarray = alpha * local_means + (1.0 - alpha) * global_means
    return estimate


def cheapest_split(alpha: float, num_clients: int, f: float, ratio: float) -> tuple[float, float]:
    """``(g, l)`` (real) with the fewest pulls ``ratio g + l`` whose personalised estimate is worth ``M f`` pulls.

    ``ratio`` is ``|A(p)| / |A^m(p)|`` (at least 1).
    """
    M = num_clients
    a = alpha + (1.0 - alpha) / M
    k = (M - 1) * ((1.0 - alpha) / M) ** 2
    total = M * f  # 1 / s
    if k == 0.0:  # alpha = 1 or one client: the global mean adds nothing; only the own pulls count
        return 0.0, a * a * total
    if a * math.sqrt(max(ratio - 1.0, 0.0)) <= math.sqrt(k):
        return (a * a + k) * total, 0.0
    root = math.sqrt(k * (ratio - 1.0))
    g = math.sqrt(k / (ratio - 1.0)) * (a + root) * total
    return g, a * (a + root) * total - g
