"""PF-SMBO: personalised federated model-based optimisation, for expensive black boxes (50 to 1,000 pulls a site).

Every client models its personalised objective with a Gaussian process fitted on the personalised estimates at
the points every client has pulled, proposes new points by Thompson sampling, and exploits the posterior mean's
best point once the rule's exploration share of the horizon is spent. Derivations: docs/algorithms/pf-smbo.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import ClassVar

import numpy as np

from pfxab_flower.algorithms.phased import ProtocolError, Settings
from pfxab_flower.algorithms.run_spec import SpecT
from pfxab_flower.algorithms.surrogate import gp
from pfxab_flower.algorithms.surrogate.pool import LOCAL_CENTRES, candidates, nodes_of, unit_centres
from pfxab_flower.algorithms.surrogate.proposals import (
    History,
    ProposalPolicy,
    Round,
    cached_plan,
    initial_design,
    integer_split,
    proposal_depth,
)
from pfxab_flower.arms.domain import DIMENSIONS
from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.parameter import Parameter, check_against

#: The Hölder exponent the rule assumes of a peak (pf-sh's assumption: Garland's square-root cusp).
PEAK_HOLDER = 0.5
#: How many times a Thompson draw's expected gap is the recommendation's at a Hölder-``beta`` peak: ``2**(beta/2)``.
DRAW_GAP: float = 2.0 ** (PEAK_HOLDER / 2.0)
#: Each phase adds a quarter of the points the model holds (so the phases are ``O(log T)``).
GROWTH = 4
#: Random Fourier features of a Thompson draw's prior.
FEATURES = 256
#: A bound on the phases whatever the horizon (the plan's own stop comes far sooner: 36 phases at T = 1e7).
MAX_ROUNDS = 60


def rate(dimensions: int) -> float:
    """``gamma = beta / (2 beta + d)``: simple regret falls as ``N**-gamma`` with ``N`` noisy evaluations of a
    Hölder-``beta`` peak (the minimax rate of noisy optimisation)."""
    return PEAK_HOLDER / (2.0 * PEAK_HOLDER + dimensions)


def exploration_rule(dimensions: int) -> float:
    """The share of the horizon the phases may use: ``gamma / (gamma + kappa - 1)`` (``kappa``: :data:`DRAW_GAP`)."""
    gamma = rate(dimensions)
    return gamma / (gamma + DRAW_GAP - 1.0)


def initial_rule(dimensions: int) -> int:
    """The initial design: ``2 (d + 1)`` points (the process has ``d + 2`` hyperparameters)."""
    return 2 * (dimensions + 1)


def model_rule(dimensions: int) -> int:
    """Most points a client's model is fitted on: ``64 (d + 1)`` (a fit costs ``O(n^3)``: docs)."""
    return 64 * (dimensions + 1)


def smbo_plan(horizon: int, num_clients: int, alpha: float, share: float, initial: int, model: int, depth: int
              ) -> tuple[Round, ...]:
    """The phases: the initial design, then phases each adding a quarter of the points known (at least one), at
    precision 1 until the model would hold more than ``model`` points, then doubling the precision each phase;
    as many as fit in the budget (:func:`budget_of`)."""
    cells = 1 << depth
    first = max(1, min(initial, horizon, cells))
    used, known, precision = first * sum(integer_split(alpha, num_clients, 1, first, first)), first, 1
    budget = budget_of(horizon, share, used)
    rounds = [Round(first, 1)]
    while len(rounds) < MAX_ROUNDS and known < cells:
        points = min(max(1, math.ceil(min(known, model) / GROWTH)), cells - known)
        if known + points > model:
            precision *= 2
        own = math.ceil(points / num_clients)
        global_pulls, local_pulls = integer_split(alpha, num_clients, precision, points, own)
        cost = points * global_pulls + own * local_pulls
        if used + cost > budget:
            break
        rounds.append(Round(points, precision))
        used, known = used + cost, known + points
    return tuple(rounds)


def budget_of(horizon: int, share: float, first: int) -> int:
    """The exploration budget: the share of the horizon, but at least the initial design's pulls."""
    return min(horizon, max(math.floor(share * horizon), first))


class PFSMBO(ProposalPolicy):
    name = "pf-smbo"
    label = "PF-SMBO"
    description = ("personalised federated model-based optimisation: a Gaussian process per client on the "
                   "personalised estimates, Thompson-sampled proposals, then the posterior's best point")
    parameters = (
        Parameter("exploration_share", float, 0.0, "a number in [0, 1] (0: the rule, from the dimensions)",
                  "pf-smbo: share of the horizon spent proposing (0: the documented rule)",
                  lambda value: 0.0 <= value <= 1.0, after="max_evaluations", late=True),
        Parameter("initial_points", int, 0, "an integer in [0, 10,000] (0: the rule, 2 (d + 1))",
                  "pf-smbo: points of the initial design every client pulls (0: the documented rule)",
                  lambda value: 0 <= value <= 10_000, after="max_evaluations", late=True),
        Parameter("model_points", int, 0, "an integer in [0, 10,000] (0: the rule, 64 (d + 1))",
                  "pf-smbo: most points a client's model is fitted on (0: the documented rule)",
                  lambda value: 0 <= value <= 10_000, after="max_evaluations", late=True),
    )
    #: The options the rules derive from the dimensions (``0``: derive), with their rules.
    rules: ClassVar[dict[str, Callable[[int], float]]] = {
        "exploration_share": exploration_rule, "initial_points": initial_rule, "model_points": model_rule}

    def resolve(self, spec: SpecT, dimensions: int | None) -> SpecT:
        """Each option left at 0 becomes its rule's value for the search space's dimensions."""
        missing = [name for name in self.rules if spec.options[name] == 0]
        if not missing:
            return spec
        if dimensions is None:
            raise ConfigError(f"{spelled(missing[0])}=0 is invalid without the search space's dimensions; allowed: "
                              "dimensions=d (the domain's) to derive it, or a value")
        d = check_against(DIMENSIONS, dimensions, label="dimensions")
        return spec.replace(options={**spec.options, **{name: self.rules[name](d) for name in missing}})

    def _options(self, settings: Settings) -> tuple[float, int, int]:
        values = tuple(settings.options[name] for name in self.rules)
        if 0 in values:
            raise ProtocolError(f"{', '.join(self.rules)} = {values} reached a machine: the server resolves a 0 "
                                "before it sends it")
        return float(values[0]), int(values[1]), int(values[2])

    def plan(self, settings: Settings) -> tuple[Round, ...]:
        share, initial, model = self._options(settings)
        return cached_plan(smbo_plan, (settings.horizon, settings.num_clients, settings.alpha, share, initial, model,
                                       proposal_depth(settings)))

    def budget(self, settings: Settings) -> int:
        share = self._options(settings)[0]
        first = self.plan(settings)[0].points
        return budget_of(settings.horizon, share,
                         first * sum(integer_split(settings.alpha, settings.num_clients, 1, first, first)))

    def first_active_set(self, settings: Settings) -> np.ndarray:
        return initial_design(settings.seed, self.plan(settings)[0].points, proposal_depth(settings))

    def suggest(self, settings: Settings, client: int, phase: int, history: History, count: int, spares: int,
                dimensions: int, memory: Mapping[str, np.ndarray]) -> tuple[int, np.ndarray, dict[str, np.ndarray]]:
        """Fit the process on the latest ``model_points`` points; the choice is the best posterior mean among them;
        each proposal is the best candidate of one Thompson draw, never a point already held. Once the history
        holds more points than the model, the candidates are local ones only (the model no longer sees the
        whole domain). The spares are further draws, taken after the share's from the same stream."""
        model = self._options(settings)[2]
        window = history.latest(model)
        x = unit_centres(window.points, dimensions)
        saved = np.asarray(memory.get("hyper", np.zeros(0)), dtype=float)
        start = gp.Hyper.of(saved) if saved.size == dimensions + 2 else None
        rng = self.rng(settings, client, phase)
        from threadpoolctl import threadpool_limits  # here: every `pfxab` start imports this module to register it

        with threadpool_limits(limits=1):  # one BLAS thread: the same bits in every process and Ray worker
            posterior = gp.fit(x, window.estimates, window.weights, start)
            means = posterior.mean(x)
            choice = int(window.points[np.lexsort((window.points, -means))[0]])
            proposals = np.zeros(0, dtype=np.int64)
            if count + spares > 0:
                best = x[np.argsort(-means, kind="stable")[:LOCAL_CENTRES]]
                pool = candidates(rng, dimensions, best, posterior.lengths, uniform=history.points.size <= model)
                nodes = nodes_of(pool, proposal_depth(settings))
                for draws in (count, spares):  # the share's draws first: spares never change them
                    if draws > 0:
                        picks = self._picks(posterior.samples(pool, draws, rng, FEATURES), nodes,
                                            np.concatenate([history.points, proposals]))
                        proposals = np.concatenate([proposals, picks])
        return choice, proposals, {"hyper": posterior.hyper.vector()}

    @staticmethod
    def _picks(draws: np.ndarray, nodes: np.ndarray, held: np.ndarray) -> np.ndarray:
        """Each draw's best candidate among the nodes not held yet nor picked by an earlier draw."""
        taken = np.isin(nodes, held)
        picks: list[int] = []
        for draw in draws:
            values = np.where(taken, -np.inf, draw)
            if not np.isfinite(values).any():
                break
            node = int(nodes[int(np.argmax(values))])
            picks.append(node)
            taken |= nodes == node
        return np.array(picks, dtype=np.int64)
