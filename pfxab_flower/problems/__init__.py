"""Federations: the ground truth of a simulation (objectives, noise, optima)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pfxab_flower.noise import NoiseModel
from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.synthetic import BASE_FUNCTIONS, synthetic_federation

if TYPE_CHECKING:
    from pfxab_flower.config import RunConfig


def build_federation(config: RunConfig) -> Federation:
    """The federation a run configuration names."""
    noise = NoiseModel(config.noise, config.noise_sigma)
    if config.problem in BASE_FUNCTIONS:
        return synthetic_federation(config.problem, config.clients, config.spread, noise)
    if config.problem == "landmine":
        from pfxab_flower.problems.landmine import landmine_federation

        return landmine_federation(config, noise)
    raise ValueError(f"unknown problem {config.problem!r}")  # RunConfig already rejects it


__all__ = ["Federation", "build_federation", "synthetic_federation"]
