"""From a calibration's measurements to a setting: which ``(nu1, rho)`` are consistent, and what each buys.

Every ``(nu1, rho)`` whose model ``nu1 rho^h`` lies above all measured variations is consistent
(:class:`Envelope`); among them the one under which elimination (``3 nu1 rho^h`` below the cells'
span, :func:`personalised_spans`) is possible in the most phases before the horizon ends is chosen.
:class:`Resolution` says what one setting can do within the horizon, in one of :data:`VERDICTS`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pfxab_flower.arms.partition import Partition
from pfxab_flower.errors import ConfigError
from pfxab_flower.limits import NU1_RANGE
from pfxab_flower.running.resolution import first_eliminating_depth, uniform_plan
from pfxab_flower.schema.spec import AlgorithmSpec
from pfxab_flower.studies.noisy_cells import SPAN_ERRORS, cells_of

#: The fitted ``rho`` is kept in this range (a decay outside it is a fit to noise, not to the objective).
RHO_RANGE = (0.3, 0.97)

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


def personalised_spans(partition: Partition, units: np.ndarray, survey: np.ndarray, alpha: float, noise: float,
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
class Envelope:
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


def earliest_elimination(spec: AlgorithmSpec, envelope: Envelope, spans: list[float], fitted: float) -> float:
    """The consistent ``rho`` (with its smallest ``nu1``) under which elimination is possible in the most
    phases before the last that fits; the fitted decay if none allows it (ties: the one nearest the fit)."""
    best: tuple[int, float] | None = None
    for rho in RHO_GRID.tolist():
        r = resolution_of(spec, envelope.nu1(rho), rho, spans)
        if r.eliminates:
            margin = (r.phases or 0) - (r.elimination_depth or 0)
            key = (margin, -abs(rho - fitted))
            if best is None or key > (best[0], -abs(best[1] - fitted)):
                best = (margin, rho)
    return fitted if best is None else best[1]


def within_nu1_range(envelope: Envelope, rho: float, fitted: float) -> float:
    """``rho`` if its ``nu1`` is one a run accepts (:data:`~pfxab_flower.limits.NU1_RANGE`), else the grid's ``rho``
    nearest the fit whose ``nu1`` is; a one-line :class:`ConfigError` if no ``rho`` gives one."""
    low, high = NU1_RANGE
    if low <= envelope.nu1(rho) <= high:
        return rho
    fits = [r for r in RHO_GRID.tolist() if low <= envelope.nu1(r) <= high]
    if not fits:
        raise ConfigError(f"the measured variation ({', '.join(f'{v:.3g}' for v in envelope.variations)} at depths "
                          f"{', '.join(map(str, envelope.depths))}) needs nu1 outside [{low:g}, {high:g}] for every "
                          f"rho in [{RHO_RANGE[0]}, {RHO_RANGE[1]}]; allowed: an objective whose values vary within "
                          "what a run accepts (rescale it)")
    return float(min(fits, key=lambda r: abs(r - fitted)))


def horizon_needed(spec: AlgorithmSpec, envelope: Envelope, spans: list[float], fitted: float) -> int | None:
    """The smallest horizon of the 1-2-5 series (up to ``1e9``) at which some consistent setting eliminates."""
    for exponent in range(2, 10):
        for mantissa in (1, 2, 5):
            horizon = int(mantissa * 10**exponent)
            if horizon <= spec.horizon:
                continue
            longer = spec.replace(horizon=horizon)
            rho = earliest_elimination(longer, envelope, spans, fitted)
            if resolution_of(longer, envelope.nu1(rho), rho, spans).eliminates:
                return horizon
    return None


def resolution_of(spec: AlgorithmSpec | None, nu1: float, rho: float, spans: list[float],
                widest: list[float] | None = None) -> Resolution:
    phases = None if spec is None else uniform_plan(spec.replace(nu1=nu1, rho=rho)).phases
    return Resolution(nu1, rho, phases, first_eliminating_depth(nu1, rho, spans),
                      first_eliminating_depth(nu1, rho, spans if widest is None else widest))
