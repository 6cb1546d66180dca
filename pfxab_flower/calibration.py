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
For a ``stochastic`` objective, each site also evaluates its first survey points again: the
spread of the repeats is the noise, taken off every variation before the fit.

The result says at which depth elimination becomes possible (``3 nu1 rho^h`` below the
values' span) and how many phases fit the horizon if nothing were eliminated, for the
calibrated settings and the defaults, so a user sees whether the run will eliminate
before spending its budget. The evidence (one row per depth) is a table;
``pfxab calibrate --plot`` draws it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pfxab_flower.config import check
from pfxab_flower.errors import ConfigError
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
#: Defaults of the run parameters, for the comparison the result prints.
DEFAULT_NU1, DEFAULT_RHO = 1.0, 0.5


@dataclass(frozen=True)
class Resolution:
    """What a run with one ``(nu1, rho)`` can do within its horizon, if nothing were eliminated."""

    nu1: float
    rho: float
    phases: int | None  # phases that fit the horizon (None: no horizon given)
    elimination_depth: int | None  # first depth where 3 nu1 rho^h is below the least span the cells can have
    earliest_depth: int | None  # first depth where 3 nu1 rho^h is below the most they can have (no earlier)

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


@dataclass(frozen=True)
class Calibration:
    """Proposed ``nu1``, ``rho`` and value range, with the evidence and what they buy within the horizon."""

    nu1: float
    rho: float
    value_range: tuple[float, float]  # the values observed (noise included for a stochastic objective)
    span: float  # the widest range of a site's (or the global mean's) survey values, noise taken off
    noise: float  # spread of repeated evaluations (0 unless the objective is stochastic)
    evaluations: list[int]  # rows each site's objective was given
    evidence: pd.DataFrame = field(repr=False)  # one row per depth (see calibrate)
    calibrated: Resolution
    defaults: Resolution
    horizon_needed: int | None = None  # when no consistent setting eliminates: the least horizon at which one does

    def settings(self) -> dict[str, float]:
        """The keywords to pass to :func:`pfxab_flower.run` (``run(federation, **c.settings(), ...)``)."""
        return {"nu1": self.nu1, "rho": self.rho}

    def summary(self) -> dict[str, Any]:
        """The proposal and its consequences, JSON-ready."""
        def resolution(r: Resolution) -> dict[str, Any]:
            return {"nu1": r.nu1, "rho": r.rho, "phases_that_fit": r.phases, "earliest_depth": r.earliest_depth,
                    "elimination_depth": r.elimination_depth, "eliminates": r.eliminates}
        return {"nu1": self.nu1, "rho": self.rho, "value_range": list(self.value_range), "span": self.span,
                "noise": self.noise, "evaluations": self.evaluations, "calibrated": resolution(self.calibrated),
                "defaults": resolution(self.defaults), "horizon_needed": self.horizon_needed}

    def report(self) -> str:
        """A few lines for a terminal: the proposal, the evidence table, and what each setting buys."""
        lines = [f"proposed: nu1={self.nu1:.4g} rho={self.rho:.4g} value_range=({self.value_range[0]:.4g}, "
                 f"{self.value_range[1]:.4g}); {sum(self.evaluations)} evaluations "
                 f"({', '.join(map(str, self.evaluations))} per site)",
                 self.evidence.to_string(index=False, float_format=lambda v: f"{v:.4g}")]
        for name, r in (("calibrated", self.calibrated), ("defaults", self.defaults)):
            depth = "never" if r.earliest_depth is None else f"from depth {r.earliest_depth}"
            if r.elimination_depth is not None:
                depth += f", expected from depth {r.elimination_depth}"
            fit = "" if r.phases is None else f"; {r.phases} phase(s) fit the horizon"
            verdict = {True: "; expected to eliminate", False: "; explores uniformly", None: ""}[r.eliminates]
            if r.phases is not None and r.eliminates is None:
                verdict = "; may eliminate"
            lines.append(f"{name} (nu1={r.nu1:.4g}, rho={r.rho:.4g}): elimination possible {depth}{fit}{verdict}")
        if self.calibrated.phases is not None and self.calibrated.eliminates is not True:
            longer = ("no horizon up to 1e9" if self.horizon_needed is None
                      else f"a horizon of {self.horizon_needed:,} or more")
            lines.append("no setting consistent with the measured variation is expected to eliminate before the "
                         f"last phase that fits this horizon; {longer} would")
        return "\n".join(lines)


def _cell_of(partition: Partition, unit_point: np.ndarray, depth: int) -> int:
    """The node id of the depth-``depth`` cell holding ``unit_point`` (unit coordinates)."""
    node, lower, width = 1, np.zeros(partition.domain.ndim), np.ones(partition.domain.ndim)
    for level in range(depth):
        axis = level % partition.domain.ndim
        width[axis] *= 0.5
        upper = unit_point[axis] >= lower[axis] + width[axis]
        lower[axis] += width[axis] * upper
        node = 2 * node + int(upper)
    return node


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

    ``samples`` is each site's budget (half survey, half cells; a stochastic objective also
    repeats ``samples / 8`` survey points), ``depths`` the deepest cell measured (default
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
    partition = federation.partition
    stochastic = federation.evaluation == "stochastic"
    survey_units = rng.random((samples - POINTS_PER_CELL * depths, ndim))
    survey_points = federation.domain.to_user(survey_units)
    repeats = max(samples // 8, 2) if stochastic else 0

    survey = np.empty((federation.num_clients, len(survey_points)))
    variation = np.zeros((federation.num_clients, depths))
    noise, evaluations = 0.0, []
    for site in range(federation.num_clients):
        survey[site] = federation.evaluate(site, survey_points)
        if repeats:
            again = federation.evaluate(site, survey_points[:repeats])
            noise = max(noise, float(np.quantile(np.abs(again - survey[site, :repeats]), 0.9)))
        best = int(np.argmax(survey[site]))
        cells = [_cell_of(partition, survey_units[best], depth) for depth in range(1, depths + 1)]
        lower, width = partition.unit_cells(np.array(cells, dtype=np.int64))
        inside = lower[:, None, :] + width[:, None, :] * rng.random((depths, POINTS_PER_CELL, ndim))
        values = federation.evaluate(site, federation.domain.to_user(inside.reshape(-1, ndim)))
        values = values.reshape(depths, POINTS_PER_CELL)
        top = np.maximum(values.max(axis=1), survey[site, best])
        variation[site] = (top - values.min(axis=1))
        evaluations.append(len(survey_points) + repeats + values.size)

    observed = (float(survey.min()), float(survey.max()))
    worst = np.maximum(variation.max(axis=0) - noise, 0.0)
    spans, widest = _personalised_spans(partition, survey_units, survey, alpha, noise, worst)
    floor = max(noise, 1e-12 * max(abs(observed[0]), abs(observed[1]), 1.0))
    depth_index = np.arange(1, depths + 1)
    used = worst > floor
    if not used.any():
        raise ConfigError(f"samples={samples!r} found no variation of the objective above the noise ({noise:.3g}) "
                          "in any cell; allowed: an objective that varies over its domain (or more samples)")
    if used.sum() >= 2:
        slope = np.polyfit(depth_index[used], np.log(worst[used]), 1)[0]
        fitted = float(np.clip(math.exp(slope), *RHO_RANGE))
    else:  # the objective varies measurably in one depth only: a Lipschitz decay for the dimension
        fitted = float(np.clip(2.0 ** (-1.0 / ndim), *RHO_RANGE))
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
        "span": spans,
        "model": nu1 * rho ** depth_index,
        "default_model": DEFAULT_NU1 * DEFAULT_RHO ** depth_index,
        "used_in_fit": used,
    })
    return Calibration(
        nu1=nu1, rho=rho, value_range=observed, span=float(max(spans)), noise=noise, evaluations=evaluations,
        evidence=evidence, calibrated=_resolution(spec, nu1, rho, spans, widest),
        defaults=_resolution(spec, DEFAULT_NU1, DEFAULT_RHO, spans, widest), horizon_needed=needed,
    )


def _personalised_spans(partition: Partition, units: np.ndarray, survey: np.ndarray, alpha: float, noise: float,
                        variation: np.ndarray) -> tuple[list[float], list[float]]:
    """For each depth ``h = 1, 2, ...``: how far below every site's best cell some cell lies, at least and at most.

    A node leaves the run (the union of the active sets) only when every site that holds it drops
    it, so what elimination needs at depth ``h`` is a cell whose personalised value (``alpha`` own
    + ``1 - alpha`` everyone's) is far below each site's best cell: ``max_k min_m (best_m - value_mk)``,
    from the cell means of the survey values. A survey point can lie ``variation`` from its cell
    centre's value, on either side, and the noise adds to it: the first list takes twice that off
    (a lower bound, so that an expected elimination is not one the estimates cannot show), the
    second adds it.
    """
    personalised = alpha * survey + (1.0 - alpha) * survey.mean(axis=0)
    least, most = [], []
    for depth, within in enumerate(variation, start=1):
        cells = np.array([_cell_of(partition, u, depth) for u in units])
        _, which = np.unique(cells, return_inverse=True)
        means = np.stack([np.bincount(which, weights=values) / np.bincount(which) for values in personalised])
        below_best = means.max(axis=1, keepdims=True) - means  # (sites, cells)
        gap = float(below_best.min(axis=0).max())
        least.append(max(gap - noise - 2.0 * float(within), 0.0))
        most.append(gap + noise + 2.0 * float(within))
    return least, most


@dataclass(frozen=True)
class _Envelope:
    """The measured variations: every ``(nu1, rho)`` with ``nu1 rho^h`` above all of them is consistent."""

    depths: np.ndarray
    variations: np.ndarray

    def nu1(self, rho: float) -> float:
        """The smallest ``nu1`` consistent with the measurements for this ``rho``."""
        return float(np.max(self.variations / rho**self.depths))


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
