"""How much a stochastic objective's *mean* varies around its best point, from single noisy trials.

:func:`pfxab_flower.calibrate` needs that variation per depth; a noisy objective's single trials
show only the noise, so here every quantity is a mean over many trials with its standard error,
and a depth counts only when it stands :func:`significance` errors above zero. The method:
docs/flower.md ("Scale, resolution and horizon", stochastic objectives).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

#: The chance that a flat objective shows a variation at some depth of some site.
FAMILY_ERROR = 0.05
#: A cell mean is taken this many standard errors towards the less favourable side in the spans.
SPAN_ERRORS = 2.0


def significance(tests: int) -> float:
    """How many standard errors a variation must stand above zero, among ``tests`` (depths x sites)."""
    return NormalDist().inv_cdf(1.0 - FAMILY_ERROR / max(tests, 1))


def cells_of(unit_points: np.ndarray, depth: int) -> np.ndarray:
    """The node id of the depth-``depth`` cell holding each of ``unit_points`` (``(n, d)``, unit coordinates)."""
    points = np.atleast_2d(unit_points)
    ndim = points.shape[1]
    node = np.ones(len(points), dtype=np.int64)
    lower = np.zeros_like(points)
    width = np.ones(ndim)
    for level in range(depth):
        axis = level % ndim
        width[axis] *= 0.5
        upper = points[:, axis] >= lower[:, axis] + width[axis]
        lower[:, axis] += width[axis] * upper
        node = 2 * node + upper
    return node


def two_values(values: np.ndarray) -> tuple[float, float] | None:
    """The two values a 0/1-like objective takes (``(a, a)`` if one), or ``None`` if it takes more."""
    distinct = np.unique(values)
    if len(distinct) > 2:
        return None
    return float(distinct[0]), float(distinct[-1])


def trial_noise(values: np.ndarray, repeated: tuple[np.ndarray, np.ndarray] | None,
                value_range: tuple[float, float]) -> float:
    """One trial's standard deviation: Bernoulli's for a two-valued objective, else from repeated trials.

    ``repeated`` holds ``(first, again)`` trials at the same points (``None`` for a two-valued one).
    """
    pair = two_values(values)
    if pair is not None:
        low, high = pair
        success = float(np.mean(values == high)) if high > low else 0.0
        sd = (high - low) * math.sqrt(success * (1.0 - success))
    else:
        assert repeated is not None
        first, again = repeated
        sd = math.sqrt(float(np.mean((again - first) ** 2)) / 2.0)
    return min(sd, (value_range[1] - value_range[0]) / 2.0)


def difference(top: np.ndarray, away: np.ndarray, pair: tuple[float, float] | None) -> tuple[float, float]:
    """``mean(top) - mean(away)`` and its standard error (``nan``, ``inf`` when a side has fewer than two values).

    Two-valued trials: the two-proportion test's error, from the pooled success rate with the
    Agresti-Coull count (a region's own rate would make a chance shortfall look surer than it is,
    and a region where every trial succeeded noise-free). Otherwise each side's own variance (Welch).
    """
    if len(top) < 2 or len(away) < 2:
        return math.nan, math.inf
    shortfall = float(np.mean(top) - np.mean(away))
    if pair is not None and pair[1] > pair[0]:
        pooled = (float(np.sum(top == pair[1]) + np.sum(away == pair[1])) + 1.0) / (len(top) + len(away) + 2.0)
        variance = (pair[1] - pair[0]) ** 2 * pooled * (1.0 - pooled) * (1.0 / len(top) + 1.0 / len(away))
    else:
        variance = float(np.var(top, ddof=1)) / len(top) + float(np.var(away, ddof=1)) / len(away)
    return shortfall, math.sqrt(variance)


@dataclass(frozen=True)
class CellVariation:
    """One site's measured variation per depth ``1..depths`` and its standard error."""

    variation: np.ndarray
    standard_error: np.ndarray


def mean_variation(unit_points: np.ndarray, values: np.ndarray, best: np.ndarray, depths: int,
                   pair: tuple[float, float] | None) -> CellVariation:
    """The variation of the mean (docs/flower.md) in the cells of depth ``1..depths`` around ``best``.

    ``unit_points`` are the points drawn in the cells around ``best`` (not the survey's), ``values`` their trials.
    """
    chain = [int(cells_of(best, depth)[0]) for depth in range(depths + 2)]
    ids = [cells_of(unit_points, depth) for depth in range(depths + 2)]
    top = values[ids[depths] == chain[depths]]
    variation, error = np.empty(depths), np.empty(depths)
    for depth in range(1, depths + 1):
        away = (ids[depth] == chain[depth]) & (ids[depth + 1] != chain[depth + 1])
        variation[depth - 1], error[depth - 1] = difference(top, values[away], pair)
    return CellVariation(variation, error)


def smoothed_best(unit_points: np.ndarray, values: np.ndarray, neighbours: int) -> int:
    """The survey point whose ``neighbours`` nearest points (itself included) have the highest mean trial.

    A single noisy trial says little (a 0/1 objective has many points at its maximum); the mean of a
    neighbourhood estimates the objective's mean there.
    """
    from scipy.spatial import cKDTree

    k = min(len(values), neighbours)
    _, nearest = cKDTree(unit_points).query(unit_points, k=k)
    smoothed = values[np.asarray(nearest).reshape(len(values), k)].mean(axis=1)
    return int(np.argmax(smoothed))
