"""Smooth federations: every client's objective a sum of two Gaussian bumps, shifted per client, in d dimensions.

The practice map's smooth family (``bumps``, ``bumps-2d``, ``-3d``, ``-5d``) beside Garland's and DoubleSine's
cusps. The bumps and the optimum's method: :func:`bumps_federation`, docs/practice.md.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from pfxab_flower.arms.domain import Dimension, Domain
from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.parameter import check_against
from pfxab_flower.problems.federation import NUM_CLIENTS, Federation
from pfxab_flower.problems.optimum import Optimum
from pfxab_flower.problems.registry import SPREAD, ProblemRun
from pfxab_flower.problems.synthetic import shifts

#: The bumps of every client before its shift: height, width and centre (the same in every coordinate).
HEIGHTS = np.array([0.55, 0.45])
WIDTHS = np.array([0.2, 0.08])
CENTRES = np.array([0.35, 0.65])
#: Points of the diagonal the optimum's search starts from (then refined to 1e-12).
_DIAGONAL_GRID = 20_001


def bump_values(all_shifts: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Every client's objective at ``points`` (shape ``(n, d)``): shape ``(len(all_shifts), n)``."""
    centres = CENTRES[None, :] + all_shifts[:, None]  # (M, J)
    squared = ((points[None, None, :, :] - centres[:, :, None, None]) ** 2).sum(axis=3)  # (M, J, n)
    values: np.ndarray = (HEIGHTS[None, :, None] * np.exp(-squared / (2 * WIDTHS[None, :, None] ** 2))).sum(axis=1)
    return values


def one_client(all_shifts: np.ndarray, client: int, points: np.ndarray) -> np.ndarray:
    """Client ``client``'s objective at ``points``."""
    values: np.ndarray = bump_values(all_shifts[client : client + 1], points)[0]
    return values


def bumps_optimum(all_shifts: np.ndarray, dimension: int, alpha: float) -> Optimum:
    """Each client's maximum of ``alpha mu_m + (1 - alpha) mu``, on the diagonal ``x = (t, ..., t)``.

    Every bump is centred on the diagonal: writing ``x = t 1 + y`` with ``y`` orthogonal to ``1``,
    ``|x - c 1|^2 = d (t - c)^2 + |y|^2``, so every term is largest at ``y = 0`` (and ``t 1`` is in the
    cube when ``x`` is). The 1-D maximum over ``t`` is found on a grid of :data:`_DIAGONAL_GRID` points, then
    refined (bounded Brent) around the 3 best grid points.
    """
    from scipy.optimize import minimize_scalar  # here: scipy costs ~0.2 s to import

    M = len(all_shifts)
    t = np.linspace(0.0, 1.0, _DIAGONAL_GRID)
    on_diagonal = bump_values(all_shifts, np.repeat(t[:, None], dimension, axis=1))
    values, points = np.empty(M), np.empty((M, dimension))
    step = t[1] - t[0]
    for m in range(M):
        weights = np.full(M, (1.0 - alpha) / M)
        weights[m] += alpha

        def negative(u: float, weights: np.ndarray = weights) -> float:
            x = np.full((1, dimension), u)
            return -float(weights @ bump_values(all_shifts, x)[:, 0])

        personalised = weights @ on_diagonal
        best_t, best_value = float(t[np.argmax(personalised)]), float(personalised.max())
        for i in np.argsort(-personalised)[:3]:
            res = minimize_scalar(negative, bounds=(max(0.0, t[i] - step), min(1.0, t[i] + step)), method="bounded",
                                  options={"xatol": 1e-12})
            if -res.fun > best_value:
                best_t, best_value = float(res.x), -float(res.fun)
        values[m], points[m] = best_value, best_t
    return Optimum(values=values, points=points, estimated=False,
                   method=f"on the diagonal: a grid of {_DIAGONAL_GRID} points, then bounded Brent")


def bumps_federation(dimension: int, num_clients: int = 10, spread: float = 0.3,
                     noise: NoiseModel | None = None) -> Federation:
    """The ``dimension``-dimensional smooth federation of ``num_clients`` clients.

    Client ``m`` sees ``mu_m(x) = sum_j h_j exp(-|x - c_j - s_m|^2 / (2 w_j^2))``, ``s_m`` the synthetic
    problems' shift (:func:`~pfxab_flower.problems.synthetic.shifts`) added to every coordinate: a broad bump
    (``h = 0.55``, ``w = 0.2``, centred at 0.35 in every coordinate) and a narrow one (``h = 0.45``,
    ``w = 0.08``, at 0.65). The heights sum to 1, so values lie in ``[0, 1]``; every peak is smooth (locally
    quadratic). Which bump holds a client's personalised optimum depends on ``d``, ``alpha`` and the client.
    The family was fixed before any algorithm was run on it. Its optimum: :func:`bumps_optimum`.
    """
    num_clients, spread = check_against(NUM_CLIENTS, num_clients), check_against(SPREAD, spread)
    all_shifts = shifts(num_clients, spread)
    domain = Domain(tuple(Dimension(f"x{i + 1}", 0.0, 1.0) for i in range(dimension)))
    return Federation(
        objectives=[partial(one_client, all_shifts, m) for m in range(num_clients)],
        domain=domain,
        noise=noise or NoiseModel(),
        name="bumps" if dimension == 1 else f"bumps-{dimension}d",
        optimum_is_estimate=False,
        batch=partial(bump_values, all_shifts),
        value_range=(0.0, 1.0),  # the heights sum to 1
        exact_optimum=partial(bumps_optimum, all_shifts, dimension),
    )


def _builder(dimension: int, config: ProblemRun, noise: NoiseModel) -> Federation:
    return bumps_federation(dimension, config.num_clients, config.spread, noise)


# The registered problems (pfxab_flower/problems/registry.py names them by reference).
bumps_1d = partial(_builder, 1)
bumps_2d = partial(_builder, 2)
bumps_3d = partial(_builder, 3)
bumps_5d = partial(_builder, 5)
