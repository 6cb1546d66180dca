"""How a round's pulls are split between the union's nodes (global) and a client's own (local): shared by the
algorithms that choose the split instead of taking the paper's (derivation: docs/algorithms/pf-xab-adaptive.md).
"""

from __future__ import annotations

import math


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
