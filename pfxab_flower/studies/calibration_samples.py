"""What a calibration's evaluations show: each site's survey of the domain and the variation in its cells.

Every site evaluates the same uniform survey points, then points in the cells around its best one; a
``stochastic`` objective is measured by means over many trials (:mod:`pfxab_flower.studies.noisy_cells`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pfxab_flower.problems.federation import Federation
from pfxab_flower.studies.noisy_cells import (
    cells_of,
    mean_variation,
    significance,
    smoothed_best,
    trial_noise,
    two_values,
)

#: Points drawn in each site's cell of each depth.
POINTS_PER_CELL = 8
#: Standard errors beyond the threshold that give a real variation 9 chances in 10 to stand out (``z_0.9``).
POWER_Z = 1.2816
#: A variation is real only above this share of the values' magnitude (at least 1): below, it is float rounding
#: (a constant objective's means, 0.3 summed and divided, differed by 1.1e-16 and gave ``nu1 = 1.6e-16``).
ROUNDING = 1e-12


def rounding_floor(values: np.ndarray) -> float:
    """The largest difference float rounding can make between means of ``values``: :data:`ROUNDING` of their size."""
    return ROUNDING * max(float(np.max(np.abs(values))) if np.size(values) else 0.0, 1.0)


def first_run(standing: np.ndarray) -> np.ndarray:
    """``standing`` (one flag per depth) kept only on its first unbroken run of ``True``.

    Every depth gets the same number of trials and a smooth objective's variation shrinks with
    depth, so a depth that stands out after one that did not is the noise's extreme, not the
    objective: with 384 trials per site, a 0/1 bump's depth 8 (cells 0.0625 wide) showed 0.37 +- 0.11
    after six depths that showed nothing, and alone set ``nu1 = 5.975``.
    """
    standing = np.asarray(standing, dtype=bool)
    kept = np.zeros_like(standing)
    if standing.any():
        start = int(np.argmax(standing))
        stop = start + (int(np.argmin(standing[start:])) if not standing[start:].all() else len(standing) - start)
        kept[start:stop] = True
    return kept


@dataclass(frozen=True)
class Sampled:
    """What the sites' evaluations showed: the survey, the noise, and the variation per depth."""

    survey: np.ndarray  # (sites, survey points): one value per site and point
    units: np.ndarray  # the survey points in unit coordinates
    noise: float  # one evaluation's standard deviation, largest over the sites (0 unless stochastic)
    evaluations: list[int]  # rows each site's objective was given
    variation: np.ndarray  # per depth 1..depths, the largest over the sites
    standard_error: np.ndarray  # of that variation (0 for an exact objective)
    used: np.ndarray  # the depths whose variation stands above the noise
    exact: bool  # whether the values are exact (one evaluation is the mean)
    significance: float = 0.0  # standard errors a variation must stand above zero (stochastic)


def sample_exact(federation: Federation, rng: np.random.Generator, samples: int, depths: int) -> Sampled:
    """An exact (or simulated: mean-valued) objective: the largest shortfall of a few points of each cell."""
    ndim, partition = federation.domain.ndim, federation.partition
    units = rng.random((samples - POINTS_PER_CELL * depths, ndim))
    points = federation.domain.to_user(units)
    survey = np.empty((federation.num_clients, len(points)))
    variation = np.zeros((federation.num_clients, depths))
    evaluations = []
    for site in range(federation.num_clients):
        survey[site] = federation.evaluate(site, points)
        best = int(np.argmax(survey[site]))
        cells = [int(cells_of(units[best], depth)[0]) for depth in range(1, depths + 1)]
        lower, width = partition.unit_cells(np.array(cells, dtype=np.int64))
        inside = lower[:, None, :] + width[:, None, :] * rng.random((depths, POINTS_PER_CELL, ndim))
        values = federation.evaluate(site, federation.domain.to_user(inside.reshape(-1, ndim)))
        values = values.reshape(depths, POINTS_PER_CELL)
        top = np.maximum(values.max(axis=1), survey[site, best])
        variation[site] = top - values.min(axis=1)
        evaluations.append(len(points) + values.size)
    worst = np.maximum(variation.max(axis=0), 0.0)
    return Sampled(survey, units, 0.0, evaluations, worst, np.zeros(depths), worst > rounding_floor(survey), exact=True)


def sample_noisy(federation: Federation, rng: np.random.Generator, samples: int, depths: int) -> Sampled:
    """A stochastic objective (one trial per call): means over many trials (:mod:`pfxab_flower.studies.noisy_cells`).

    Half the samples go to the cells (``samples / (2 depths)`` per depth, at least ``POINTS_PER_CELL``),
    the rest to the survey (an objective that asks for ``rng`` gets a child of ``rng`` on each call); a site
    whose survey is not two-valued repeats its first ``samples / 8`` survey points to measure its noise. A
    depth counts (``used``) when some site's variation stands :func:`~pfxab_flower.studies.noisy_cells.significance`
    standard errors above zero and above float rounding (:func:`rounding_floor`), and only on the first unbroken
    run of such depths (:func:`first_run`); the variation reported is that of the site where it stands furthest.
    """
    ndim, partition, sites = federation.domain.ndim, federation.partition, federation.num_clients
    per_cell = max(POINTS_PER_CELL, samples // (2 * depths))
    units = rng.random((samples - per_cell * depths, ndim))
    points = federation.domain.to_user(units)
    repeats = max(samples // 8, 2)
    neighbours = max(POINTS_PER_CELL, round(math.sqrt(len(points))))
    survey = np.empty((sites, len(points)))
    variation, error = np.zeros((sites, depths)), np.full((sites, depths), np.inf)
    noise, evaluations = 0.0, []
    for site in range(sites):
        survey[site] = federation.evaluate(site, points, rng.spawn(1)[0])
        repeated = None
        if two_values(survey[site]) is None:
            repeated = (survey[site, :repeats], federation.evaluate(site, points[:repeats], rng.spawn(1)[0]))
        noise = max(noise, trial_noise(survey[site], repeated, federation.value_range))
        best = units[smoothed_best(units, survey[site], neighbours)]
        cells = [int(cells_of(best, depth)[0]) for depth in range(1, depths + 1)]
        lower, width = partition.unit_cells(np.array(cells, dtype=np.int64))
        inside = (lower[:, None, :] + width[:, None, :] * rng.random((depths, per_cell, ndim))).reshape(-1, ndim)
        values = federation.evaluate(site, federation.domain.to_user(inside), rng.spawn(1)[0])
        measured = mean_variation(inside, values, best, depths, two_values(values))
        variation[site], error[site] = measured.variation, measured.standard_error
        evaluations.append(len(points) + (0 if repeated is None else repeats) + len(values))
    needed = significance(sites * depths)
    above = np.nan_to_num(variation - needed * error, nan=-np.inf)
    pick = np.argmax(above, axis=0)
    columns = np.arange(depths)
    worst = np.maximum(np.nan_to_num(variation[pick, columns], nan=0.0), 0.0)
    standing = (above[pick, columns] > 0) & (worst > rounding_floor(survey))
    return Sampled(survey, units, noise, evaluations, worst, error[pick, columns], first_run(standing),
                    exact=False, significance=needed)


def nothing_measured(samples: int, sampled: Sampled, observed: tuple[float, float]) -> str:
    """The one line when no depth shows variation: what was measured, and what this sample count can resolve."""
    if not sampled.exact and sampled.noise <= rounding_floor(sampled.survey):  # the trials never varied
        return (f"samples={samples!r} found no trial further from another than float rounding "
                f"({rounding_floor(sampled.survey):.3g}; values {observed[0]:.6g} to {observed[1]:.6g}): a constant "
                "objective has no variation to measure; allowed: an objective that varies near its best point (with "
                "no variation, nu1 and rho do not matter)")
    if sampled.exact:
        return (f"samples={samples!r} found no variation of the objective in the cells around its best point "
                f"(every value there equals the best, {observed[1]:.6g}, to 1e-12); allowed: an objective that "
                "varies near its best point (a flat top has no scale to measure)")
    errors = np.where(np.isfinite(sampled.standard_error) & (sampled.standard_error > 0), sampled.standard_error,
                      np.inf)
    ratio = np.where(np.isfinite(errors), sampled.variation / errors, -np.inf)
    largest, sharpest = int(np.argmax(ratio)), int(np.argmin(errors))
    # what stands out with 9 chances in 10 at this sample count: (z + z_0.9) standard errors
    resolution = (sampled.significance + POWER_Z) * float(errors[sharpest])
    return (f"samples={samples!r} measured no variation of the objective's mean above its noise in the cells around "
            f"its best point (one evaluation's noise: sd {sampled.noise:.3g}; the largest measured, "
            f"{sampled.variation[largest]:.3g} +- {errors[largest]:.3g} at depth {largest + 1}, needed "
            f"{sampled.significance:.2g} standard errors); allowed: an objective whose mean varies by more than about "
            f"{resolution:.3g} near its best point (what stands out with 9 chances in 10 at this sample count, at "
            f"depth {sharpest + 1}), or more samples: that resolution halves with 4 times as many")
