"""Optuna-TPE-Fed: a federated personalised TPE baseline (``pip install -e ".[optuna]"``) on the proposal skeleton.

Each phase every client's study proposes one point, every client pulls every proposal, and study ``m`` is told
``alpha y_m + (1 - alpha) mean_j y_j`` at each. A client's study is rebuilt from its history every phase with a
sampler seeded from ``(seed, client, phase)``, so every engine gives the same numbers. docs/algorithms/pf-smbo.md.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from types import ModuleType

import numpy as np

from pfxab_flower.algorithms.phased import Settings
from pfxab_flower.algorithms.run_spec import SpecT
from pfxab_flower.algorithms.surrogate.pool import nodes_of, unit_centres
from pfxab_flower.algorithms.surrogate.proposals import History, ProposalPolicy, Round, cached_plan, proposal_depth
from pfxab_flower.errors import ConfigError

#: Most phases (each is one trial of every study): the studies' cost grows with their trials.
MAX_PHASES = 200
#: Fresh asks before a proposal falls back to a uniform point (a TPE point in a cell already held is asked again).
ASKS = 8


def optuna_module() -> ModuleType:
    """Optuna, or a one-line :class:`ConfigError` saying how to install it."""
    try:
        import optuna
    except ImportError:
        raise ConfigError('algorithm=optuna-tpe-fed needs optuna; allowed: pip install -e ".[optuna]" '
                          "(or another algorithm)") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def tpe_plan(horizon: int, num_clients: int, depth: int) -> tuple[Round, ...]:
    """``R = min(T // M, MAX_PHASES)`` phases of ``M`` proposals, each pulled ``T // (R M)`` times by everyone."""
    phases = max(1, min(horizon // num_clients, MAX_PHASES, (1 << depth) // num_clients))
    pulls = max(1, horizon // (phases * num_clients))
    return tuple(Round(min(num_clients, horizon), pulls) for _ in range(phases))


class OptunaTPEFed(ProposalPolicy):
    name = "optuna-tpe-fed"
    label = "Optuna-TPE-Fed"
    description = ("baseline (optuna extra): federated personalised TPE, every site pulls every site's proposal; "
                   "study m is told alpha*y_m + (1-alpha)*mean_j y_j")
    requires = ("optuna",)
    extra = "optuna"

    def resolve(self, spec: SpecT, dimensions: int | None) -> SpecT:
        """Refused in one line where the run is specified when optuna is missing."""
        optuna_module()
        return spec

    def plan(self, settings: Settings) -> tuple[Round, ...]:
        return cached_plan(tpe_plan, (settings.horizon, settings.num_clients, proposal_depth(settings)))

    def budget(self, settings: Settings) -> int:
        plan = self.plan(settings)
        return sum(r.points * r.precision for r in plan)

    def round_pulls(self, settings: Settings, phase: int, f: float, union_size: int, own_size: int) -> tuple[int, int]:
        """Every proposal ``T // (R M)`` times by every client; no own extra."""
        plan = self.plan(settings)
        return (plan[phase - 1].precision, 0) if 1 <= phase <= len(plan) and union_size else (0, 0)

    def suggest(self, settings: Settings, client: int, phase: int, history: History, count: int, spares: int,
                dimensions: int, memory: Mapping[str, np.ndarray]) -> tuple[int, np.ndarray, dict[str, np.ndarray]]:
        """The study's best trial is the choice; its next asks, the proposals (the share's, then the spares')."""
        window = history.latest(history.points.size)
        choice = int(window.points[np.lexsort((window.points, -window.estimates))[0]])
        if count + spares == 0:
            return choice, np.zeros(0, dtype=np.int64), {}
        optuna = optuna_module()
        names = [f"x{i + 1}" for i in range(dimensions)]
        space = {name: optuna.distributions.FloatDistribution(0.0, 1.0) for name in names}
        seed = int(np.random.SeedSequence([settings.seed, client, phase]).generate_state(1)[0])
        study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
        centres = unit_centres(window.points, dimensions)
        study.add_trials([optuna.trial.create_trial(params=dict(zip(names, map(float, point), strict=True)),
                                                    distributions=space, value=float(value))
                          for point, value in zip(centres, window.estimates, strict=True)])
        held = set(window.points.tolist())
        depth = proposal_depth(settings)
        rng = self.rng(settings, client, phase)
        picks: list[int] = []
        for wanted in (count, count + spares):  # the share's asks first: spares never change them
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for _ in range(ASKS * (wanted - len(picks))):
                    trial = study.ask(space)
                    point = np.array([[trial.params[name] for name in names]])
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    node = int(nodes_of(point, depth)[0])
                    if node not in held:
                        picks.append(node)
                        held.add(node)
                    if len(picks) == wanted:
                        break
            while len(picks) < wanted:  # every ask fell in a held cell: a uniform point
                node = int(nodes_of(rng.random((1, dimensions)), depth)[0])
                if node not in held:
                    picks.append(node)
                    held.add(node)
        return choice, np.array(picks, dtype=np.int64), {}

