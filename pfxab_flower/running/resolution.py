"""Whether a run's scale settings can eliminate anything within its horizon, from the settings alone.

A node is dropped only ``3 nu1 rho^h`` below the best one, so nothing is eliminated at a depth where
that is at least the values' span; when the phases that fit the horizon end before such a depth,
:func:`uniform_exploration_warning` says so before the run starts. Details: docs/flower.md
("Scale, resolution and horizon").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pfxab_flower.algorithms.run_spec import RunSpec
from pfxab_flower.arms.partition import MAX_DEPTH, nodes_at_depth
from pfxab_flower.schema.spec import FULL_RANGE

if TYPE_CHECKING:
    from pfxab_flower.problems.federation import Federation

#: An estimate must lie this many ``nu1 rho^h`` below the best one to be dropped (slack + 2 widths).
ELIMINATION_MARGIN = 3.0
#: The deepest level whose cell centres the check evaluates (``2^h`` points per client).
SPAN_DEPTH = 11


def first_eliminating_depth(nu1: float, rho: float, spans: Sequence[float], deepest: int = MAX_DEPTH) -> int | None:
    """The first depth ``h >= 1`` with ``3 nu1 rho^h < spans[h - 1]`` (``None``: none down to ``deepest``).

    ``spans[h - 1]`` bounds how far apart two nodes' means at depth ``h`` lie; depths past the
    last span given use the last one.
    """
    if not spans:
        return None
    for depth in range(1, deepest + 1):
        span = spans[min(depth, len(spans)) - 1]
        if ELIMINATION_MARGIN * nu1 * rho**depth < span:
            return depth
    return None


def mean_spans(federation: Federation, deepest: int) -> Iterator[float]:
    """For ``h = 1..deepest`` in turn: the widest range of any client's local means, or of the global means,
    over the centres of depth ``h`` (what a personalised mix of them can span at most).

    One depth at a time (``2^h`` points per client), so a caller that has its answer stops evaluating.
    """
    for depth in range(1, deepest + 1):
        centres = federation.partition.midpoints(nodes_at_depth(depth))
        local = np.array([federation.evaluate(m, centres) for m in range(federation.num_clients)])
        yield float(max(np.ptp(local, axis=1).max(), np.ptp(local.mean(axis=0))))


def _eliminating_depth_of(nu1: float, rho: float, federation: Federation,
                          deepest: int) -> tuple[int | None, list[float]]:
    """:func:`first_eliminating_depth` over :func:`mean_spans` ``(federation, deepest)``, and the spans it used.

    It stops at the first depth that eliminates: the deeper spans cannot change that answer (all
    ``deepest`` of them are evaluated only when no depth but perhaps the last one eliminates).
    """
    spans: list[float] = []
    for span in mean_spans(federation, deepest):
        spans.append(span)
        if first_eliminating_depth(nu1, rho, spans, deepest=len(spans)) is not None:
            break
    return first_eliminating_depth(nu1, rho, spans), spans


@dataclass(frozen=True)
class UniformPlan:
    """The phases of a run in which nothing is eliminated: the worst case of its schedule."""

    lengths: tuple[int, ...]  # pulls per client of phases 1, 2, ... that fit the horizon

    @property
    def phases(self) -> int:
        return len(self.lengths)


def uniform_plan(spec: RunSpec) -> UniformPlan:
    """The phases that fit ``spec``'s horizon when every node of every depth stays active.

    Phase ``p`` has ``2^p`` nodes in the union and in every client's own set, pulled as the
    algorithm's policy says for the Hoeffding ``f(p)``; it starts only if it fits what remains
    (the server's rule, :meth:`~pfxab_flower.algorithms.phased.ServerMachine.next_instruction`).
    """
    from pfxab_flower.algorithms import make_policy
    from pfxab_flower.algorithms.phased import Settings

    settings = Settings(spec)
    policy = make_policy(spec.algorithm)
    schedule = settings.schedule
    lengths: list[int] = []
    used, phase = 0, 1
    while policy.refines_partition and not policy.solo and schedule.depth_allowed(phase):
        n_global, n_local = policy.phase_pulls(settings, schedule.f(phase), 1 << phase, 1 << phase)
        length = (1 << phase) * (n_global + n_local)
        if length < 1 or not policy.phase_fits(settings, length, spec.horizon - used):
            break
        lengths.append(length)
        used += length
        phase += 1
    return UniformPlan(tuple(lengths))


def uniform_exploration_warning(spec: RunSpec, truth: Federation | None = None) -> str | None:
    """One line if ``spec`` cannot eliminate any node before its last phase that fits, else ``None``.

    How far apart two nodes' means can lie comes from ``truth`` (a federation whose objectives
    are the mean rewards: the simulations' ground truth, evaluated at the cell centres of the
    depths that fit, at most ``2^12`` points per client) or else from the spec's reward range.
    With neither (no range declared), or Bernstein widths (which come from the data, not the
    settings), nothing can be told in advance and ``None`` is returned. The rule treats the
    estimates as exact: their real error is far below the width (docs/comparison.md).
    """
    from pfxab_flower.algorithms.bounds import bound_named

    if not bound_named(spec.confidence).widths_known_in_advance:
        return None
    plan = uniform_plan(spec)
    if plan.phases == 0:
        return None
    if truth is not None:
        depth, spans = _eliminating_depth_of(spec.nu1, spec.rho, truth, min(plan.phases, SPAN_DEPTH))
    elif spec.reward_range != FULL_RANGE:
        spans = [spec.reward_range[1] - spec.reward_range[0]]
        depth = first_eliminating_depth(spec.nu1, spec.rho, spans)
    else:
        return None
    if depth is not None and depth < plan.phases:
        return None
    before = f"before depth {depth}" if depth is not None else "at any depth"
    return (f"with nu1={spec.nu1:g}, rho={spec.rho:g} nothing can be eliminated {before} (a node must lie "
            f"3 nu1 rho^h below the best, and the means span at most {max(spans):.4g}), but only {plan.phases} "
            f"phase(s) fit horizon={spec.horizon}: the run explores uniformly (`pfxab calibrate` measures "
            "what can eliminate; docs/flower.md#scale-resolution-and-horizon)")


def first_point_warning(spec: RunSpec) -> str | None:
    """One line if no client of ``spec``'s run can leave its first point, the domain's centre, within the horizon
    (no phase fits, or a baseline's search pulls nothing), else ``None``: checked from the spec alone."""
    from pfxab_flower.algorithms import make_policy
    from pfxab_flower.algorithms.baselines.solo import SoloPolicy
    from pfxab_flower.algorithms.messages import PhaseInstruction
    from pfxab_flower.algorithms.phased import ServerMachine, Settings

    policy, settings = make_policy(spec.algorithm), Settings(spec)
    if isinstance(policy, SoloPolicy):
        searches = policy.searches(settings)
    else:  # a throwaway server: its first instruction is a phase if one fits
        searches = isinstance(ServerMachine(policy, settings).next_instruction(), PhaseInstruction)
    if searches:
        return None
    return (f"horizon={spec.horizon} is too small for {spec.algorithm} to leave its first point: no phase fits, so "
            f"every client pulls the domain's centre all {spec.horizon} times (a larger horizon, or an algorithm "
            "that draws points from the first pull: random-search, optuna-tpe)")
