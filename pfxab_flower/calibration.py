"""Settings that eliminate: ``nu1`` and ``rho`` measured on each site's own objective, with a small budget.

PF-XAB's phases are designed for the smoothness model ``f(x*) - f(x) <= nu1 rho^h`` in the
depth-``h`` cell that holds the optimum: phase ``h`` pulls each node until its width is
``nu1 rho^h``, and drops a node only ``3 nu1 rho^h`` below the best one
(:mod:`pfxab_flower.resolution`). The defaults (``nu1 = 1``, ``rho = 0.5``) suit rewards
spanning ``[0, 1]`` on a 1-D domain; an objective spanning 0.2, or one in three
dimensions (a cell's diameter halves only every third depth), then explores uniformly.

:func:`calibrate` measures the model instead. Each site evaluates:

1. ``samples - POINTS_PER_CELL * depths`` uniform random points of the domain (its *survey*: the span of its values);
2. around its best survey point, ``POINTS_PER_CELL`` uniform points in that point's cell of
   every depth ``1..depths`` (the cell that most likely holds its optimum): the observed
   *variation* of depth ``h`` is the largest shortfall from the best value seen in that cell.

Every site samples the same survey points (so the global mean can be formed) but its own
cells. ``rho`` is the decay of the variation per depth (a least-squares fit of its logarithm,
over the depths whose variation stands above the noise), ``nu1`` the smallest scale with
``nu1 rho^h`` above every measured variation (the model's constant, not a guess at it).
A ``stochastic`` objective (one noisy trial per call: 0/1 outcomes, a bounded score) is measured
by means over many trials instead, with their standard errors (:mod:`pfxab_flower.noisy_cells`):
single trials show only the noise.

The result says at which depth elimination becomes possible (``3 nu1 rho^h`` below the
values' span) and how many phases fit the horizon if nothing were eliminated, for the
calibrated settings and the defaults, and one verdict (:data:`VERDICTS`), so a user sees
whether the run will eliminate before spending its budget. The evidence (one row per depth)
is a table; ``pfxab calibrate --plot`` draws it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from pfxab_flower.config import check
from pfxab_flower.errors import ConfigError
from pfxab_flower.noisy_cells import (
    SPAN_ERRORS,
    cells_of,
    mean_variation,
    significance,
    smoothed_best,
    trial_noise,
    two_values,
)
from pfxab_flower.partition import MAX_DEPTH, Partition
from pfxab_flower.problems.federation import Federation
from pfxab_flower.resolution import first_eliminating_depth, uniform_plan
from pfxab_flower.spec import AlgorithmSpec

if TYPE_CHECKING:
    import pandas as pd

#: Points drawn in each site's cell of each depth.
POINTS_PER_CELL = 8
#: The fitted ``rho`` is kept in this range (a decay outside it is a fit to noise, not to the objective).
RHO_RANGE = (0.3, 0.97)
#: Default evaluations per site (the repeats of a stochastic objective come on top).
DEFAULT_SAMPLES = 384
#: Standard errors beyond the threshold that give a real variation 9 chances in 10 to stand out (``z_0.9``).
POWER_Z = 1.2816
#: Defaults of the run parameters, for the comparison the result prints.
DEFAULT_NU1, DEFAULT_RHO = 1.0, 0.5


#: The verdicts of :attr:`Resolution.verdict` (and :attr:`Calibration.verdict`, the calibrated settings' one).
VERDICTS = ("eliminates", "may eliminate", "explores uniformly", "no horizon given")


@dataclass(frozen=True)
class Resolution:
    """What a run with one ``(nu1, rho)`` can do within its horizon, if nothing were eliminated."""

    nu1: float
    rho: float
    phases: int | None  # phases that fit the horizon (None: no horizon given)
    elimination_depth: int | None  # first depth where 3 nu1 rho^h is below the least span the cells can have
    earliest_depth: int | None  # first depth where 3 nu1 rho^h is below the most they can have (no earlier)
    #: first measured depth whose variation lies above ``nu1 rho^h`` (the smoothness model fails there), if any
    model_below_from: int | None = None

    @property
    def eliminates(self) -> bool | None:
        """Whether elimination is expected before the last phase that fits: ``True`` (the least span the
        cells can have allows it), ``False`` (not even the most they can have does), ``None`` if the
        measurements cannot tell (or no horizon was given). Estimates are taken as exact."""
        if self.phases is None:
            return None
        if self.elimination_depth is not None and self.elimination_depth < self.phases:
            return True
        if self.earliest_depth is None or self.earliest_depth >= self.phases:
            return False
        return None

    @property
    def verdict(self) -> str:
        """:attr:`eliminates` in words, one of :data:`VERDICTS`."""
        if self.phases is None:
            return VERDICTS[3]
        return {True: VERDICTS[0], None: VERDICTS[1], False: VERDICTS[2]}[self.eliminates]

    def describe(self, name: str) -> str:
        """One line: from which depth elimination is possible and expected, the phases that fit, the verdict."""
        depth = "never" if self.earliest_depth is None else f"from depth {self.earliest_depth}"
        if self.elimination_depth is not None:
            depth += f", expected from depth {self.elimination_depth}"
        fit = "" if self.phases is None else f"; {self.phases} phase(s) fit the horizon: {self.verdict}"
        below = ("" if self.model_below_from is None else
                 f"; its model lies below the measured variation from depth {self.model_below_from} "
                 "(the smoothness assumption fails there)")
        return f"{name} (nu1={self.nu1:.4g}, rho={self.rho:.4g}): elimination possible {depth}{fit}{below}"


@dataclass(frozen=True)
class Calibration:
    """Proposed ``nu1``, ``rho`` and value range, with the evidence and what they buy within the horizon."""

    nu1: float
    rho: float
    value_range: tuple[float, float]  # the values observed (noise included for a stochastic objective)
    span: float  # the widest range of a site's (or the global mean's) survey cell means, at most
    noise: float  # one evaluation's standard deviation (0 unless the objective is stochastic)
    evaluations: list[int]  # rows each site's objective was given
    evidence: pd.DataFrame = field(repr=False)  # one row per depth (see calibrate)
    calibrated: Resolution
    defaults: Resolution
    horizon_needed: int | None = None  # when the calibrated settings are not expected to eliminate: the least
    # horizon at which some consistent setting is

    @property
    def verdict(self) -> str:
        """What a run with the proposal does within the horizon: one of :data:`VERDICTS`."""
        return self.calibrated.verdict

    def settings(self) -> dict[str, float]:
        """The keywords to pass to :func:`pfxab_flower.run` (``run(federation, **c.settings(), ...)``)."""
        return {"nu1": self.nu1, "rho": self.rho}

    def summary(self) -> dict[str, Any]:
        """The proposal and its consequences, JSON-ready."""
        def resolution(r: Resolution) -> dict[str, Any]:
            return {"nu1": r.nu1, "rho": r.rho, "phases_that_fit": r.phases, "earliest_depth": r.earliest_depth,
                    "elimination_depth": r.elimination_depth, "eliminates": r.eliminates, "verdict": r.verdict,
                    "model_below_from": r.model_below_from}
        return {"nu1": self.nu1, "rho": self.rho, "verdict": self.verdict, "advice": self.advice(),
                "value_range": list(self.value_range), "span": self.span, "noise": self.noise,
                "evaluations": self.evaluations, "calibrated": resolution(self.calibrated),
                "defaults": resolution(self.defaults), "horizon_needed": self.horizon_needed}

    def advice(self) -> str:
        """The verdict in one sentence, with what would change it (the last line of :meth:`report`)."""
        r = self.calibrated
        if r.phases is None:
            return "no horizon given: calibrate(..., horizon=T) says whether a run of T pulls per client eliminates"
        longer = ("no horizon up to 1e9" if self.horizon_needed is None
                  else f"a horizon of {self.horizon_needed:,} or more")
        if r.verdict == "eliminates":
            return (f"the proposal is expected to eliminate from depth {r.elimination_depth}, before the last of the "
                    f"{r.phases} phases that fit: run with nu1={self.nu1:.4g}, rho={self.rho:.4g}")
        if r.verdict == "may eliminate":
            sharper = "; more samples narrow the measurements" if self.noise > 0 else ""
            return (f"the proposal may eliminate: possible from depth {r.earliest_depth}, but the measurements "
                    f"cannot tell whether it does before the last of the {r.phases} phases that fit, nor whether "
                    f"any setting consistent with them does; {longer} would make one expected{sharper}")
        return (f"the run explores uniformly: the proposal cannot eliminate before the last of the {r.phases} "
                f"phases that fit, and no setting consistent with the measured variation is expected to; {longer} "
                "would make one expected")

    def report(self) -> str:
        """A few lines for a terminal: the proposal, the evidence table, what each setting buys, the verdict."""
        noise = f"; one evaluation's noise: sd {self.noise:.3g}" if self.noise > 0 else ""
        lines = [f"proposed: nu1={self.nu1:.4g} rho={self.rho:.4g} value_range=({self.value_range[0]:.4g}, "
                 f"{self.value_range[1]:.4g}); {sum(self.evaluations)} evaluations "
                 f"({', '.join(map(str, self.evaluations))} per site){noise}",
                 self.evidence.to_string(index=False, float_format=lambda v: f"{v:.4g}"),
                 self.calibrated.describe("calibrated"), self.defaults.describe("defaults"),
                 f"verdict: {self.advice()}"]
        return "\n".join(lines)


def _checked(name: str, value: Any, allowed: str, ok: bool) -> None:
    if not ok:
        raise ConfigError(f"{name}={value!r} is invalid; allowed: {allowed}")


def calibrate(
    federation: Federation,
    *,
    horizon: int | None = None,
    alpha: float = 0.5,
    algorithm: str = "pf-xab",
    samples: int = DEFAULT_SAMPLES,
    depths: int | None = None,
    seed: int = 0,
) -> Calibration:
    """Sample each site's objective and propose ``nu1``, ``rho`` and the value range (see the module).

    ``samples`` is each site's budget (survey and cells; a stochastic objective that is not 0/1
    also repeats ``samples / 8`` survey points), ``depths`` the deepest cell measured (default
    ``3 d + 3``, at most 15, for ``d`` dimensions). With ``horizon`` (and ``alpha``,
    ``algorithm``, as the run will use them) the result also says how many phases fit and
    whether elimination is possible before the last, for the proposal and the defaults.
    Objective calls go through the federation's checks (:meth:`Federation.evaluate`).
    """
    if not isinstance(federation, Federation):
        raise ConfigError(f"federation={federation!r} is invalid; allowed: a Federation (Federation.from_callables)")
    ndim = federation.domain.ndim
    depths = min(3 * ndim + 3, 15) if depths is None else depths
    _checked("depths", depths, f"an integer in [2, {MAX_DEPTH}]",
             isinstance(depths, int) and not isinstance(depths, bool) and 2 <= depths <= MAX_DEPTH)
    least = 2 * POINTS_PER_CELL * depths
    _checked("samples", samples, f"an integer >= {least} (two points per depth and cell, {POINTS_PER_CELL} per "
             f"cell, {depths} depths)", isinstance(samples, int) and not isinstance(samples, bool)
             and samples >= least)
    seed = check("seed", seed, label="seed")
    spec = None
    if horizon is not None:  # checked as the run will check it, before any evaluation
        spec = AlgorithmSpec.build(algorithm, num_clients=federation.num_clients, horizon=horizon, alpha=alpha)

    rng = np.random.default_rng(seed)
    if federation.evaluation == "stochastic":
        sampled = _sample_noisy(federation, rng, samples, depths)
    else:
        sampled = _sample_exact(federation, rng, samples, depths)
    survey, survey_units, noise, evaluations = sampled.survey, sampled.units, sampled.noise, sampled.evaluations
    partition = federation.partition
    observed = (float(survey.min()), float(survey.max()))
    worst, error, used = sampled.variation, sampled.standard_error, sampled.used
    spans, widest = _personalised_spans(partition, survey_units, survey, alpha, noise, worst)
    depth_index = np.arange(1, depths + 1)
    if not used.any():
        raise ConfigError(_nothing_measured(samples, sampled, observed))
    # A decay needs two depths of exact values, three of noisy ones; with fewer, or a fit that does not
    # decay (the largest shortfall in nested cells cannot grow with depth), a Lipschitz decay for the dimension.
    slope = 0.0
    if used.sum() >= (2 if sampled.exact else 3):
        slope = float(np.polyfit(depth_index[used], np.log(worst[used]), 1)[0])
    fitted = float(np.clip(math.exp(slope) if slope < 0 else 2.0 ** (-1.0 / ndim), *RHO_RANGE))
    envelope = _Envelope(depth_index[used], worst[used])
    rho = fitted if spec is None else _earliest_elimination(spec, envelope, spans, fitted)
    nu1 = envelope.nu1(rho)
    needed = None
    if spec is not None and not _resolution(spec, nu1, rho, spans).eliminates:
        needed = _horizon_needed(spec, envelope, spans, fitted)

    import pandas as pd  # here: pandas costs ~0.2 s to import, and `pfxab --help` reads this module

    evidence = pd.DataFrame({
        "depth": depth_index,
        "cell_diameter": [float(np.linalg.norm(w) / math.sqrt(ndim)) for w in partition.unit_cells(
            np.array([1 << int(h) for h in depth_index], dtype=np.int64))[1]],
        "variation": worst,
        "standard_error": error,
        "span": spans,
        "model": nu1 * rho ** depth_index,
        "default_model": DEFAULT_NU1 * DEFAULT_RHO ** depth_index,
        "used_in_fit": used,
    })
    return Calibration(
        nu1=nu1, rho=rho, value_range=observed, span=float(max(spans)), noise=noise, evaluations=evaluations,
        evidence=evidence, calibrated=_resolution(spec, nu1, rho, spans, widest),
        defaults=replace(_resolution(spec, DEFAULT_NU1, DEFAULT_RHO, spans, widest),
                         model_below_from=envelope.below_from(DEFAULT_NU1, DEFAULT_RHO)),
        horizon_needed=needed,
    )


@dataclass(frozen=True)
class _Sampled:
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


def _sample_exact(federation: Federation, rng: np.random.Generator, samples: int, depths: int) -> _Sampled:
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
    floor = 1e-12 * max(abs(float(survey.min())), abs(float(survey.max())), 1.0)
    return _Sampled(survey, units, 0.0, evaluations, worst, np.zeros(depths), worst > floor, exact=True)


def _sample_noisy(federation: Federation, rng: np.random.Generator, samples: int, depths: int) -> _Sampled:
    """A stochastic objective (one trial per call): means over many trials (:mod:`pfxab_flower.noisy_cells`).

    Half the samples go to the cells (``samples / (2 depths)`` per depth, at least ``POINTS_PER_CELL``),
    the rest to the survey; a site whose survey is not two-valued repeats its first ``samples / 8``
    survey points to measure its noise. A depth counts (``used``) when some site's variation stands
    :func:`~pfxab_flower.noisy_cells.significance` standard errors above zero; the variation reported
    is that of the site where it stands furthest above.
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
        survey[site] = federation.evaluate(site, points)
        repeated = None
        if two_values(survey[site]) is None:
            repeated = (survey[site, :repeats], federation.evaluate(site, points[:repeats]))
        noise = max(noise, trial_noise(survey[site], repeated, federation.value_range))
        best = units[smoothed_best(units, survey[site], neighbours)]
        cells = [int(cells_of(best, depth)[0]) for depth in range(1, depths + 1)]
        lower, width = partition.unit_cells(np.array(cells, dtype=np.int64))
        inside = (lower[:, None, :] + width[:, None, :] * rng.random((depths, per_cell, ndim))).reshape(-1, ndim)
        values = federation.evaluate(site, federation.domain.to_user(inside))
        measured = mean_variation(inside, values, best, depths, two_values(values))
        variation[site], error[site] = measured.variation, measured.standard_error
        evaluations.append(len(points) + (0 if repeated is None else repeats) + len(values))
    needed = significance(sites * depths)
    above = np.nan_to_num(variation - needed * error, nan=-np.inf)
    pick = np.argmax(above, axis=0)
    columns = np.arange(depths)
    worst = np.maximum(np.nan_to_num(variation[pick, columns], nan=0.0), 0.0)
    return _Sampled(survey, units, noise, evaluations, worst, error[pick, columns], above[pick, columns] > 0,
                    exact=False, significance=needed)


def _nothing_measured(samples: int, sampled: _Sampled, observed: tuple[float, float]) -> str:
    """The one line when no depth shows variation: what was measured, and what this sample count can resolve."""
    if sampled.exact:
        return (f"samples={samples!r} found no variation of the objective in the cells around its best point "
                f"(every value there equals the best, {observed[1]:.6g}, to 1e-12); allowed: an objective that "
                "varies near its best point (a flat top has no scale to measure)")
    errors = np.where(np.isfinite(sampled.standard_error), sampled.standard_error, np.inf)
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


def _personalised_spans(partition: Partition, units: np.ndarray, survey: np.ndarray, alpha: float, noise: float,
                        variation: np.ndarray) -> tuple[list[float], list[float]]:
    """For each depth ``h = 1, 2, ...``: how far below every site's best cell some cell lies, at least and at most.

    A node leaves the run (the union of the active sets) only when every site that holds it drops
    it, so what elimination needs at depth ``h`` is a cell whose personalised value (``alpha`` own
    + ``1 - alpha`` everyone's) is far below each site's best cell: ``max_k min_m (best_m - value_mk)``,
    from the cell means of the survey values. A survey point can lie ``variation`` from its cell
    centre's value, on either side: the first list takes twice that off (a lower bound, so that an
    expected elimination is not one the estimates cannot show), the second adds it. A stochastic
    objective's cell means are noisy too: each cell's mean is taken ``SPAN_ERRORS`` standard errors
    (``noise / sqrt(points in the cell)``) towards the least gap for the first list, away for the second.
    """
    personalised = alpha * survey + (1.0 - alpha) * survey.mean(axis=0)
    least, most = [], []
    for depth, within in enumerate(variation, start=1):
        _, which = np.unique(cells_of(units, depth), return_inverse=True)
        counts = np.bincount(which)
        means = np.stack([np.bincount(which, weights=values) / counts for values in personalised])
        margin = SPAN_ERRORS * noise / np.sqrt(counts)  # (cells,): 0 for an exact objective
        lowest = (means - margin).max(axis=1, keepdims=True) - (means + margin)  # (sites, cells)
        highest = (means + margin).max(axis=1, keepdims=True) - (means - margin)
        least.append(max(float(lowest.min(axis=0).max()) - 2.0 * float(within), 0.0))
        most.append(float(highest.min(axis=0).max()) + 2.0 * float(within))
    return least, most


@dataclass(frozen=True)
class _Envelope:
    """The measured variations: every ``(nu1, rho)`` with ``nu1 rho^h`` above all of them is consistent."""

    depths: np.ndarray
    variations: np.ndarray

    def nu1(self, rho: float) -> float:
        """The smallest ``nu1`` consistent with the measurements for this ``rho``."""
        return float(np.max(self.variations / rho**self.depths))

    def below_from(self, nu1: float, rho: float) -> int | None:
        """The first measured depth whose variation lies above ``nu1 rho^h`` (``None``: the model holds)."""
        below = self.depths[self.variations > nu1 * rho**self.depths * (1.0 + 1e-12)]
        return int(below[0]) if below.size else None


#: The ``rho`` values :func:`calibrate` chooses among when it knows the horizon.
RHO_GRID = np.round(np.arange(RHO_RANGE[0], RHO_RANGE[1] + 1e-9, 0.01), 2)


def _earliest_elimination(spec: AlgorithmSpec, envelope: _Envelope, spans: list[float], fitted: float) -> float:
    """The consistent ``rho`` (with its smallest ``nu1``) under which elimination is possible in the most
    phases before the last that fits; the fitted decay if none allows it (ties: the one nearest the fit)."""
    best: tuple[int, float] | None = None
    for rho in RHO_GRID.tolist():
        r = _resolution(spec, envelope.nu1(rho), rho, spans)
        if r.eliminates:
            margin = (r.phases or 0) - (r.elimination_depth or 0)
            key = (margin, -abs(rho - fitted))
            if best is None or key > (best[0], -abs(best[1] - fitted)):
                best = (margin, rho)
    return fitted if best is None else best[1]


def _horizon_needed(spec: AlgorithmSpec, envelope: _Envelope, spans: list[float], fitted: float) -> int | None:
    """The smallest horizon of the 1-2-5 series (up to ``1e9``) at which some consistent setting eliminates."""
    for exponent in range(2, 10):
        for mantissa in (1, 2, 5):
            horizon = int(mantissa * 10**exponent)
            if horizon <= spec.horizon:
                continue
            longer = spec.replace(horizon=horizon)
            rho = _earliest_elimination(longer, envelope, spans, fitted)
            if _resolution(longer, envelope.nu1(rho), rho, spans).eliminates:
                return horizon
    return None


def _resolution(spec: AlgorithmSpec | None, nu1: float, rho: float, spans: list[float],
                widest: list[float] | None = None) -> Resolution:
    phases = None if spec is None else uniform_plan(spec.replace(nu1=nu1, rho=rho)).phases
    return Resolution(nu1, rho, phases, first_eliminating_depth(nu1, rho, spans),
                      first_eliminating_depth(nu1, rho, spans if widest is None else widest))
