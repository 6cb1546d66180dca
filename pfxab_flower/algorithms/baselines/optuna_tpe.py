"""Per-site Optuna TPE: each client runs its own TPE study, one evaluation per trial, then exploits its best point.

What a site with an expensive black box would do alone (Bergstra et al., NeurIPS 2011; Optuna's ``TPESampler``):
``min(tpe_trials, T)`` trials at cells of :data:`~pfxab_flower.arms.partition.POINT_DEPTH`, then its best observed
point until ``T``. Needs the optional extra ``optuna``; its trial budget and cost: docs/algorithms/optuna-tpe.md.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from pfxab_flower.algorithms.baselines.solo import SoloPolicy, SoloRun, solo_seed
from pfxab_flower.algorithms.phased import Settings
from pfxab_flower.algorithms.phased.observed import best_of, merged
from pfxab_flower.arms.partition import point_depth, unit_nodes
from pfxab_flower.parameter import Parameter, between

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pfxab_flower.problems.sampling import Environment

#: The default most trials a site runs: the whole budget up to T = 1,000, where one site's study took
#: 6.5 s in 1-D and 21 s in 3-D on a 2-core machine (a trial's cost grows with the trials before it).
DEFAULT_TRIALS = 1000
#: The most trials one may ask for (at 1e6 a study would take days).
MAX_TRIALS = 100_000


def trials(settings: Settings) -> int:
    """How many trials a site runs: ``tpe_trials``, at most ``T`` and ``max_evaluations`` (one point each)."""
    count = min(int(settings.options["tpe_trials"]), settings.horizon)
    budget = settings.spec.max_evaluations
    return count if budget is None else min(count, budget)


@contextmanager
def _quiet(optuna: Any) -> Iterator[None]:
    """No line per trial on stderr (Optuna logs each at INFO); the caller's verbosity is restored."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(verbosity)


class OptunaTPE(SoloPolicy):
    name = "optuna-tpe"
    label = "Optuna-TPE"
    description = ("baseline: each site runs its own Optuna TPE study (one evaluation per trial) for tpe_trials of "
                   "its horizon, then exploits its best observed point (needs the optuna extra)")
    parameters = (
        Parameter("tpe_trials", int, DEFAULT_TRIALS, f"an integer in [1, {MAX_TRIALS:,}]",
                  "optuna-tpe: most trials a site runs before it exploits its best observed point (it runs "
                  "min(tpe_trials, T))", between(1, MAX_TRIALS), after="max_evaluations", late=True),
    )
    requires = ("optuna",)
    extra = "optuna"

    def alone(self, settings: Settings, client: int, env: Environment) -> SoloRun:
        """One study: each trial's point is the cell of its depth that holds TPE's proposal, pulled once."""
        import optuna  # here: the optional extra, imported (~1 s) only by a run that uses it

        depth = point_depth(settings.spec.max_depth)
        dimensions = int(np.asarray(env.point(1)).size)
        count = trials(settings)
        seed = solo_seed(settings.seed, client)
        rng = np.random.default_rng(seed)  # the rewards' noise
        nodes, rewards = np.zeros(count, dtype=np.int64), np.zeros(count)
        with _quiet(optuna):
            sampler = optuna.samplers.TPESampler(seed=seed % (1 << 32))  # Optuna 5's defaults: multivariate
            study = optuna.create_study(direction="maximize", sampler=sampler)
            for i in range(count):
                trial = study.ask()
                unit = np.array([[trial.suggest_float(f"u{j}", 0.0, 1.0) for j in range(dimensions)]])
                nodes[i] = unit_nodes(unit, depth)[0]
                rewards[i] = env.pull(nodes[i : i + 1], np.ones(1, dtype=np.int64), rng)[0]
                study.tell(trial, float(rewards[i]))
        best = best_of(*merged(nodes, rewards, np.ones(count, dtype=np.int64)))
        assert best is not None  # at least one trial: T >= 1
        return SoloRun(best.node_id, count)
