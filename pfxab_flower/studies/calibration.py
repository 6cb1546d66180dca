"""Settings that eliminate: ``nu1`` and ``rho`` measured on each site's own objective, with a small budget.

:func:`calibrate` samples the sites (:mod:`~pfxab_flower.studies.calibration_samples`), chooses a setting
(:mod:`~pfxab_flower.studies.calibration_fit`) and says, before the budget is spent, whether a run eliminates:
one verdict (:data:`VERDICTS`) with the evidence as a table. Why the defaults often do not: docs/flower.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from pfxab_flower.algorithms.registry import algorithm_names, policy_class
from pfxab_flower.arms.partition import MAX_DEPTH
from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.limits import MAX_CALIBRATION_SAMPLES as MAX_SAMPLES
from pfxab_flower.problems.federation import Federation
from pfxab_flower.schema.catalogue import check
from pfxab_flower.schema.spec import AlgorithmSpec
from pfxab_flower.studies.calibration_fit import (
    RHO_GRID,
    RHO_RANGE,
    VERDICTS,
    Envelope,
    Resolution,
    earliest_elimination,
    horizon_needed,
    personalised_spans,
    resolution_of,
    within_nu1_range,
)
from pfxab_flower.studies.calibration_samples import (
    POINTS_PER_CELL,
    POWER_Z,
    nothing_measured,
    sample_exact,
    sample_noisy,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BUDGET_SHARE", "DEFAULT_NU1", "DEFAULT_RHO", "DEFAULT_SAMPLES", "MAX_SAMPLES", "POINTS_PER_CELL",
           "POWER_Z", "RHO_GRID", "RHO_RANGE", "VERDICTS", "Calibration", "Resolution", "calibrate"]

#: Default evaluations per site (the repeats of a stochastic objective come on top).
DEFAULT_SAMPLES = 384
#: The most of each site's budget (its horizon, when given) a calibration spends: the default samples are cut
#: to it, and more samples than it are refused (a 0/1 site with a budget of 300 trials was given 384).
BUDGET_SHARE = 0.1
#: Defaults of the run parameters, for the comparison the result prints.
DEFAULT_NU1, DEFAULT_RHO = 1.0, 0.5
#: What the verdict of an algorithm that uses no ``nu1`` and ``rho`` (pf-sh) is computed for.
REFERENCE = "pf-xab"


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
    algorithm: str = "pf-xab"  # the algorithm the advice is for
    #: the algorithm's own options as the run would resolve them (pf-sh's candidate count); ``None`` when the
    #: algorithm uses ``nu1`` and ``rho`` (then they are what matters)
    own_options: dict[str, Any] | None = None

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
                "defaults": resolution(self.defaults), "horizon_needed": self.horizon_needed,
                "algorithm": self.algorithm, "uses_nu1_rho": self.own_options is None}

    def advice(self) -> str:
        """The verdict in one sentence, with what would change it, for :attr:`algorithm` (the last line of
        :meth:`report`): an algorithm that does not use ``nu1`` and ``rho`` is told so, and what shapes its run."""
        verdict = self._verdict()
        if self.own_options is not None:
            own = ", ".join(f"{name}={value!r}" for name, value in self.own_options.items()) or "none"
            return (f"{self.algorithm} does not use nu1 or rho, so nothing measured here changes its run (what does: "
                    f"its own options, here {own}); for {REFERENCE} and the others that use them: {verdict}")
        alternatives = smoothness_free()
        if self.calibrated.verdict == VERDICTS[0] or not alternatives:
            return verdict
        needs = "needs" if len(alternatives) == 1 else "need"
        return f"{verdict}; {', '.join(alternatives)} {needs} no nu1 or rho (docs/practice.md compares them)"

    def _verdict(self) -> str:
        """The calibrated setting's verdict in one sentence, with what would change it."""
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
        raise ConfigError(f"{spelled(name)}={value!r} is invalid; allowed: {allowed}")


def smoothness_free() -> list[str]:
    """The registered federated algorithms that use no ``nu1`` and ``rho`` (pf-sh), for the advice."""
    return [name for name in algorithm_names() if not policy_class(name).smoothness_model
            and not policy_class(name).solo]


#: Keywords :func:`calibrate` takes from the federation or measures itself, never from the caller.
NOT_GIVEN = {"num_clients": "the federation's", "nu1": "what calibrate measures", "rho": "what calibrate measures",
             "reward_range": "the federation's", "dimensions": "the federation's domain's", "report_pulls": "a run's"}


def _spec(federation: Federation, algorithm: str, horizon: int | None, alpha: float, seed: int,
          parameters: dict[str, Any]) -> AlgorithmSpec:
    """The run's spec, checked as ``run`` checks it (every keyword the algorithm takes), before any evaluation."""
    for name in parameters:
        if name in NOT_GIVEN:
            raise ConfigError(f"{spelled(name)}={parameters[name]!r} is invalid here; allowed: none ({name} is "
                              f"{NOT_GIVEN[name]})")
    given = {**parameters, **({} if horizon is None else {"horizon": horizon})}
    return AlgorithmSpec.build(algorithm, num_clients=federation.num_clients, alpha=alpha, seed=seed,
                               reward_range=federation.reward_range, dimensions=federation.domain.ndim, **given)


def _budget(samples: int | None, depths: int | None, ndim: int, horizon: int | None) -> tuple[int, int]:
    """Each site's samples and the depths measured: the defaults cut to :data:`BUDGET_SHARE` of the horizon (one
    line when that share cannot measure two depths); given ones checked against it and :data:`MAX_SAMPLES`."""
    cap = None if horizon is None else math.floor(BUDGET_SHARE * horizon)
    if depths is not None:
        _checked("depths", depths, f"an integer in [2, {MAX_DEPTH}]",
                 isinstance(depths, int) and not isinstance(depths, bool) and 2 <= depths <= MAX_DEPTH)
    if samples is None:
        samples = DEFAULT_SAMPLES if cap is None else min(DEFAULT_SAMPLES, cap)
        least = 2 * 2 * POINTS_PER_CELL
        if samples < least:
            raise ConfigError(f"{spelled('horizon')}={horizon!r} is too small to calibrate: {BUDGET_SHARE:.0%} of "
                              f"each site's budget is {samples} evaluations, fewer than the {least} that two depths "
                              f"need; allowed: a horizon of at least {math.ceil(least / BUDGET_SHARE)}, or a run "
                              "without calibration (nu1 and rho at their defaults)")
        deepest = min(3 * ndim + 3, 15, samples // (2 * POINTS_PER_CELL))
        return samples, deepest if depths is None else depths
    depths = min(3 * ndim + 3, 15) if depths is None else depths
    least = 2 * POINTS_PER_CELL * depths
    most = MAX_SAMPLES if cap is None else min(MAX_SAMPLES, cap)
    share = "" if cap is None else f", and at most {BUDGET_SHARE:.0%} of horizon={horizon}, each site's budget"
    _checked("samples", samples, f"an integer in [{least}, {most}] (two points per depth and cell, "
             f"{POINTS_PER_CELL} per cell, {depths} depths; at most {MAX_SAMPLES:,}{share})",
             isinstance(samples, int) and not isinstance(samples, bool) and least <= samples <= most)
    return samples, depths


def calibrate(
    federation: Federation,
    *,
    horizon: int | None = None,
    alpha: float = 0.5,
    algorithm: str = "pf-xab",
    samples: int | None = None,
    depths: int | None = None,
    seed: int = 0,
    **parameters: Any,
) -> Calibration:
    """Sample each site's objective and propose ``nu1``, ``rho`` and the value range (see the module).

    ``samples`` is each site's budget (survey and cells; a stochastic objective that is not 0/1
    also repeats ``samples / 8`` survey points): by default :data:`DEFAULT_SAMPLES`, at most
    :data:`BUDGET_SHARE` of the ``horizon``; ``depths`` the deepest cell measured (default
    ``3 d + 3``, at most 15, for ``d`` dimensions, fewer if the samples cannot measure them).
    With ``horizon`` (and ``alpha``, ``algorithm`` and the algorithm's other keywords, e.g.
    ``candidates``, ``max_depth``, as the run will use them, checked as ``run`` checks them) the
    result also says how many phases fit and whether elimination is possible before the last, for
    the proposal and the defaults, and the advice is for that algorithm (one that uses no ``nu1``
    and ``rho`` is told so). Objective calls go through the federation's checks (:meth:`Federation.evaluate`).
    """
    if not isinstance(federation, Federation):
        raise ConfigError(f"federation={federation!r} is invalid; allowed: a Federation (Federation.from_callables)")
    ndim = federation.domain.ndim
    seed = check("seed", seed, label="seed")
    spec = _spec(federation, algorithm, horizon, alpha, seed, parameters)  # before any evaluation
    samples, depths = _budget(samples, depths, ndim, horizon)
    policy = policy_class(spec.algorithm)()
    own_options = None if policy.smoothness_model else dict(spec.options)
    # the phases nu1 and rho shape: the algorithm's own, or (pf-sh) those of the algorithm the advice then speaks of
    shaped = None if horizon is None else policy.smoothness_spec(spec) if policy.smoothness_model else \
        spec.replace(algorithm=REFERENCE, options={})

    rng = np.random.default_rng(seed)
    if federation.evaluation == "stochastic":
        sampled = sample_noisy(federation, rng, samples, depths)
    else:
        sampled = sample_exact(federation, rng, samples, depths)
    survey, survey_units, noise, evaluations = sampled.survey, sampled.units, sampled.noise, sampled.evaluations
    partition = federation.partition
    observed = (float(survey.min()), float(survey.max()))
    worst, error, used = sampled.variation, sampled.standard_error, sampled.used
    spans, widest = personalised_spans(partition, survey_units, survey, alpha, noise, worst)
    depth_index = np.arange(1, depths + 1)
    if not used.any():
        raise ConfigError(nothing_measured(samples, sampled, observed))
    # A decay needs two depths of exact values, three of noisy ones; with fewer, or a fit that does not
    # decay (the largest shortfall in nested cells cannot grow with depth), a Lipschitz decay for the dimension.
    slope = 0.0
    if used.sum() >= (2 if sampled.exact else 3):
        slope = float(np.polyfit(depth_index[used], np.log(worst[used]), 1)[0])
    fitted = float(np.clip(math.exp(slope) if slope < 0 else 2.0 ** (-1.0 / ndim), *RHO_RANGE))
    envelope = Envelope(depth_index[used], worst[used])
    rho = fitted if shaped is None else earliest_elimination(shaped, envelope, spans, fitted)
    rho = within_nu1_range(envelope, rho, fitted)
    nu1 = envelope.nu1(rho)
    needed = None
    if shaped is not None and not resolution_of(shaped, nu1, rho, spans).eliminates:
        needed = horizon_needed(shaped, envelope, spans, fitted)

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
        evidence=evidence, calibrated=resolution_of(shaped, nu1, rho, spans, widest),
        defaults=replace(resolution_of(shaped, DEFAULT_NU1, DEFAULT_RHO, spans, widest),
                         model_below_from=envelope.below_from(DEFAULT_NU1, DEFAULT_RHO)),
        horizon_needed=needed, algorithm=spec.algorithm, own_options=own_options,
    )
