"""What every machine of one run shares: the run's spec (:class:`~pfxab_flower.algorithms.run_spec.RunSpec`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pfxab_flower.algorithms.bounds import ConfidenceBound, bound_named
from pfxab_flower.algorithms.run_spec import RunSpec
from pfxab_flower.algorithms.schedule import Schedule
from pfxab_flower.faults import DEFAULT_MIN_FRACTION


@dataclass(frozen=True)
class Settings:
    """The spec (what the server sends every client) and the server's own quorum; the schedule derived from it.

    An algorithm's own parameters are ``options[name]`` (PF-SH: ``options["candidates"]``).
    """

    spec: RunSpec
    min_fraction: float = DEFAULT_MIN_FRACTION  # share of the M clients an exchange needs (ServerMachine)
    schedule: Schedule = field(init=False)

    def __post_init__(self) -> None:
        spec = self.spec
        object.__setattr__(self, "schedule", Schedule(horizon=spec.horizon, num_clients=spec.num_clients,
                                                      nu1=spec.nu1, rho=spec.rho, max_depth=spec.max_depth))

    @property
    def alpha(self) -> float:
        return self.spec.alpha

    @property
    def seed(self) -> int:
        return self.spec.seed

    @property
    def confidence(self) -> str:
        """The confidence bound's name (:data:`~pfxab_flower.algorithms.bounds.BOUNDS`): ``hoeffding``, the paper's."""
        return self.spec.confidence

    @property
    def reward_range(self) -> tuple[float, float]:
        """Where a reward (and so a local mean) can lie: the server rejects a report outside it (ServerMachine)."""
        return self.spec.reward_range

    @property
    def options(self) -> Mapping[str, Any]:
        """The algorithm's own parameters, by name (read only by its policy)."""
        return self.spec.options

    @property
    def bound(self) -> ConfidenceBound:
        """The run's confidence bound: its widths, phase lengths and the statistics its clients report."""
        return bound_named(self.confidence)

    @property
    def reward_span(self) -> float:
        """``b``: the span of the reward range (e.g. the range term of the Bernstein width)."""
        return self.reward_range[1] - self.reward_range[0]

    @property
    def num_clients(self) -> int:
        return self.spec.num_clients

    @property
    def horizon(self) -> int:
        return self.spec.horizon

    @cached_property
    def bounded_phases(self) -> int:
        """An upper bound on the phases the horizon leaves room for, with the confidence bound's fewest samples per
        node (:meth:`~pfxab_flower.algorithms.schedule.Schedule.max_phases`): computed once, as every message a
        client receives is checked against it."""
        return self.schedule.max_phases(lambda phase: self.bound.fewest_samples(self, phase))
