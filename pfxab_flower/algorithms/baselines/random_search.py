"""Random search: uniformly random points, then the best one observed (what the model of smoothness buys).

Each client pulls ``ceil(fraction * T)`` distinct random cells once each, then exploits the best;
nothing is shared (docs/algorithms/random-search.md).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from pfxab_flower.algorithms.baselines.solo import SoloPolicy, SoloRun, solo_seed
from pfxab_flower.algorithms.phased import Settings
from pfxab_flower.arms.partition import point_depth
from pfxab_flower.parameter import Parameter

if TYPE_CHECKING:
    from pfxab_flower.problems.sampling import Environment

def random_points(fraction: float, horizon: int, depth: int) -> int:
    """How many random points a client pulls: ``ceil(fraction * T)``, at most the ``2**depth`` cells.

    The share is taken as written (``0.07`` is 7/100, not its binary float), so 0.07 of 100 pulls is 7.
    """
    from fractions import Fraction  # here: every `pfxab` start imports this module to register the algorithm

    return min(math.ceil(Fraction(repr(float(fraction))) * horizon), 1 << depth)


class RandomSearch(SoloPolicy):
    name = "random-search"
    label = "Random-Search"
    description = ("baseline: each client pulls random_fraction of its horizon at uniformly random points "
                   "(once each), then exploits the best observed")
    parameters = (
        Parameter("random_fraction", float, 0.01, "a number in (0, 1]",
                  "random-search: share of the horizon spent on uniformly random points, in (0, 1]",
                  lambda value: 0.0 < value <= 1.0, after="max_evaluations", late=True),
    )
    smoothness_model = False

    def alone(self, settings: Settings, client: int, env: Environment) -> SoloRun:
        """Pull ``n`` distinct random cells once each: ``(the best observed, n)``, in no phase."""
        depth = point_depth(settings.spec.max_depth)
        count = random_points(settings.options["random_fraction"], settings.horizon, depth)
        if settings.spec.max_evaluations is not None:  # each random point is one new point to evaluate
            count = min(count, settings.spec.max_evaluations)
        rng = np.random.default_rng(solo_seed(settings.seed, client))
        nodes = (1 << depth) + rng.choice(1 << depth, size=count, replace=False)
        rewards = env.pull(nodes, np.ones(count, dtype=np.int64), rng)
        return SoloRun(int(nodes[np.argmax(rewards)]), count)
