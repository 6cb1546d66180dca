"""How much a stochastic objective's *mean* varies around its best point, from single noisy trials.

:func:`pfxab_flower.calibrate` measures the smoothness model ``f(x*) - f(x) <= nu1 rho^h`` in
the depth-``h`` cell that holds the optimum. For an exact objective the largest shortfall of a
few points of the cell shows it. A stochastic objective gives one noisy trial per call (a 0/1
success, a bounded score with heavy tails), and the spread of single trials says nothing about
the mean: a 0/1 objective's trials always span 1. So here every quantity is a mean over many
trials at uniformly random points, with its standard error:

* the **top** is the mean over the deepest cell around the best point (that cell is tiny, so
  it estimates ``f`` there);
* the **variation** of depth ``h`` is the top minus the mean over the half of the depth-``h``
  cell away from the best point (the depth-``h + 1`` sibling of the best point's cell). A mean
  over a region is at most its largest shortfall, so this is a lower bound of what an exact
  objective would show, unbiased for the half's mean;
* the **standard error** of that difference comes from the regions' own values (it includes
  the objective's variation across a region as well as the noise, which is what a mean of
  uniform points varies by); for a two-valued objective (0/1) from Bernoulli's variance at the
  pooled success rate (the two-proportion test), so that a chance shortfall does not look surer
  than it is, nor a region where every trial succeeded noise-free;
* the **noise** (one trial's standard deviation) is Bernoulli's ``(b - a) sqrt(p (1 - p))`` for
  a two-valued objective (``p`` its survey's success rate: by Jensen's inequality at least the
  mean of the points' own variances), else the spread of repeated trials,
  ``sqrt(mean((y' - y)^2) / 2)``; never more than half the declared value range
  (Popoviciu's bound on any variable within it).

Every point drawn uniformly in a cell that contains a region is uniform in that region, so
every shallower cell's points count in each mean. The survey's do not: the best point is where
the survey's trials happened to be high, so its neighbours' trials are biased upwards. A depth
counts only when its variation stands :func:`significance` standard errors above zero, a
threshold that keeps the chance of any false one, over all depths and sites, at
:data:`FAMILY_ERROR` (Bonferroni): a flat objective shows none.
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
    """The variation of the mean (see the module) in the cells of depth ``1..depths`` around ``best``.

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
