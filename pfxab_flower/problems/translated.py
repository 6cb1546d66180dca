"""Garland and DoubleSine with their optima moved off the domain's centre: a random translation drawn from the seed.

Client ``m`` of ``garland-shifted-<d>d`` sees ``mu_m(x) = (1/d) sum_i g((x_i - s_m - t_i) mod 1)``: the problem of
:mod:`.separable` (:mod:`.synthetic` in 1-D) with every coordinate translated by ``t_i`` (:func:`translation`),
so its personalised optimum is the 1-D one, moved to ``(x* + t_i) mod 1`` per axis, of the same value
(docs/algorithms/index.md, "The shifted problems"). Each seed is its own translation.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from pfxab_flower.arms.domain import Dimension, Domain
from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.optimum import Optimum
from pfxab_flower.problems.registry import ProblemRun, problem
from pfxab_flower.problems.synthetic import BASE_FUNCTIONS, shifted, shifts, synthetic_federation

#: Keeps the translation's stream apart from every other stream drawn from the run's seed.
TRANSLATION_STREAM = 0x7A45


def translation(seed: int, dimension: int) -> np.ndarray:
    """The run's translation ``t``, uniform on ``[0, 1)^d``: ``default_rng(SeedSequence(seed, spawn_key=(0x7A45,)))``'s
    first ``d`` uniforms, the same on every engine and in every process."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(TRANSLATION_STREAM,)))
    return rng.random(dimension)


def _all_offsets(g: Callable[[np.ndarray], np.ndarray], offsets: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Every client's objective at once: ``(M, n)``, client ``m`` translated by its row ``offsets[m]`` (``(d,)``)."""
    values: np.ndarray = g(np.mod(points[None, :, :] - offsets[:, None, :], 1.0)).mean(axis=2)
    return values


def _moved_optimum(line: Federation, moved: np.ndarray, alpha: float) -> Optimum:
    """The 1-D federation's personalised optimum, moved by ``t_i`` in each coordinate (its value unchanged)."""
    one = line.optimum(alpha)
    return Optimum(values=one.values, points=np.mod(one.points + moved[None, :], 1.0), estimated=False,
                   method=f"the 1-D problem's optimum translated in each of {len(moved)} coordinates ({one.method})")


def translated_federation(
    name: str, dimension: int, seed: int, num_clients: int = 10, spread: float = 0.3, noise: NoiseModel | None = None
) -> Federation:
    """The ``garland`` or ``doublesine`` federation in ``dimension`` coordinates, translated by ``seed``'s ``t``."""
    line = synthetic_federation(name, num_clients, spread, noise)  # checks the name, clients and spread
    moved = translation(seed, dimension)
    offsets = shifts(num_clients, spread)[:, None] + moved[None, :]  # (M, d): client m's shift in each coordinate
    g = BASE_FUNCTIONS[name][0]
    axes = ("x",) if dimension == 1 else tuple(f"x{i + 1}" for i in range(dimension))
    return Federation(
        objectives=[partial(shifted, g, row) for row in offsets],
        domain=Domain(tuple(Dimension(axis, 0.0, 1.0) for axis in axes)),
        noise=line.noise,
        name=f"{name}-shifted" + ("" if dimension == 1 else f"-{dimension}d"),
        optimum_is_estimate=False,
        batch=partial(_all_offsets, g, offsets),
        value_range=line.value_range,
        exact_optimum=partial(_moved_optimum, line, moved),
    )


def shifted_federation(config: ProblemRun, noise: NoiseModel) -> Federation:
    """The registered problems ``<family>-shifted[-<d>d]`` (pfxab_flower/problems/registry.py): the family from the
    problem's name, the dimension from its registration, the translation from the run's seed."""
    dimension = problem(config.problem).dimension
    assert dimension is not None  # every shifted problem is registered with its dimension
    return translated_federation(config.problem.split("-")[0], dimension, config.seed, config.num_clients,
                                 config.spread, noise)
