"""d-dimensional Garland and DoubleSine: the 1-D problem in every coordinate, for maps over the dimension.

Client ``m`` sees ``mu_m(x) = (1/d) sum_i g((x_i - s_m) mod 1)`` with the 1-D shifts (:mod:`.synthetic`),
so its personalised optimum is the 1-D one at ``(x*, ..., x*)``, computed exactly by the 1-D method.
What grows with ``d`` is the search: each cell of a depth is coarser per axis (docs/practice.md).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from pfxab_flower.arms.domain import Dimension, Domain
from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.optimum import Optimum
from pfxab_flower.problems.registry import ProblemRun
from pfxab_flower.problems.synthetic import BASE_FUNCTIONS, all_shifted, shifted, shifts, synthetic_federation


def _repeated_optimum(line: Federation, dimension: int, alpha: float) -> Optimum:
    """The 1-D federation's personalised optimum, in every one of ``dimension`` coordinates."""
    one = line.optimum(alpha)
    return Optimum(values=one.values, points=np.repeat(one.points, dimension, axis=1), estimated=False,
                   method=f"the 1-D problem's optimum in each of {dimension} coordinates ({one.method})")


def separable_federation(
    name: str, dimension: int, num_clients: int = 10, spread: float = 0.3, noise: NoiseModel | None = None
) -> Federation:
    """The ``dimension``-dimensional ``garland`` or ``doublesine`` federation (see the module docstring)."""
    line = synthetic_federation(name, num_clients, spread, noise)  # checks the name, clients and spread
    g, all_shifts = BASE_FUNCTIONS[name][0], shifts(num_clients, spread)
    domain = Domain(tuple(Dimension(f"x{i + 1}", 0.0, 1.0) for i in range(dimension)))
    return Federation(
        objectives=[partial(shifted, g, float(s)) for s in all_shifts],
        domain=domain,
        noise=line.noise,
        name=f"{name}-{dimension}d",
        optimum_is_estimate=False,
        batch=partial(all_shifted, g, all_shifts),
        value_range=line.value_range,
        exact_optimum=partial(_repeated_optimum, line, dimension),
    )


def _builder(name: str, dimension: int, config: ProblemRun, noise: NoiseModel) -> Federation:
    return separable_federation(name, dimension, config.num_clients, config.spread, noise)


# The registered problems (pfxab_flower/problems/registry.py names them by reference).
garland_2d = partial(_builder, "garland", 2)
garland_3d = partial(_builder, "garland", 3)
garland_5d = partial(_builder, "garland", 5)
doublesine_2d = partial(_builder, "doublesine", 2)
doublesine_3d = partial(_builder, "doublesine", 3)
doublesine_5d = partial(_builder, "doublesine", 5)
