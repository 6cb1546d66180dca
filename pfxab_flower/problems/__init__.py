"""Federations: the ground truth of a simulation (objectives, noise, optima), and the problems that make them.

A run names its problem (``RunConfig.problem``); :func:`build_federation` looks it up in
:mod:`pfxab_flower.problems.registry`, where :func:`register_problem` adds one.
"""

from __future__ import annotations

from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.registry import ProblemRun, problem, problem_names, register_problem, unregister_problem
from pfxab_flower.problems.synthetic import synthetic_federation


def build_federation(config: ProblemRun) -> Federation:
    """The federation of the registered problem a run configuration names, with the run's noise and evaluation.

    A real ``evaluation`` (``deterministic``, ``stochastic``) is scored against the problem's own objectives,
    which are its true means.

    A builder must return a :class:`Federation` of ``config.num_clients`` clients: anything else is
    refused in one line (the run, the Flower simulation's node count and the scoring all rely on it).
    """
    made = problem(config.problem).build(config, NoiseModel(config.noise, config.noise_sigma))
    if not isinstance(made, Federation) or made.num_clients != config.num_clients:
        got = f"{made.num_clients} clients" if isinstance(made, Federation) else type(made).__name__
        raise ConfigError(f"{spelled('problem')}={config.problem!r} built {got} for {spelled('num_clients')}="
                          f"{config.num_clients}; allowed: a builder that returns a Federation of "
                          "config.num_clients clients")
    return made.with_evaluation(config.evaluation)


__all__ = ["Federation", "build_federation", "problem", "problem_names", "register_problem", "synthetic_federation",
           "unregister_problem"]
