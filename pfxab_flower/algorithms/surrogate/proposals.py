"""The proposal family: clients that keep a history and propose new points each phase (``pf-smbo``, ``optuna-tpe-fed``).

A phase's union is the clients' proposals (phase 1: an initial design every client holds); each client adds the
union's personalised estimates to its history (``ClientState.memory``) and proposes its share of the next phase's
points, then spares, which the server deals among the replies that arrived (:func:`deal`). Trust, catch-up,
failures and the split: docs/algorithms/pf-smbo.md ("The proposal skeleton").
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np

from pfxab_flower.algorithms.bounds import ClientView
from pfxab_flower.algorithms.phased import Policy, Proposal, RoundEstimates, Settings
from pfxab_flower.algorithms.phased.state import ROOT
from pfxab_flower.arms.partition import POINT_DEPTH, depth_of
from pfxab_flower.faults import DEFAULT_MIN_FRACTION, required_replies

#: Keeps the initial design's and the proposals' randomness apart from every other stream of the run's seed.
DESIGN_STREAM, PROPOSAL_STREAM = 0x1D51, 0x5E5D
#: The history's arrays in a client's memory (a policy adds its own beside them).
HISTORY = ("points", "estimates", "weights", "rounds")


@dataclass(frozen=True)
class Round:
    """One planned phase: the new points of its union (phase 1: the shared initial design) and the precision, in
    effective pulls, that each client's estimate at its own points is bought to (the split's target)."""

    points: int
    precision: int


def proposal_depth(settings: Settings) -> int:
    """The depth of the cells whose centres are the points: :data:`POINT_DEPTH`, or ``max_depth`` if shallower."""
    limit = settings.spec.max_depth
    return POINT_DEPTH if limit is None else min(limit, POINT_DEPTH)


def initial_design(seed: int, count: int, depth: int) -> np.ndarray:
    """``count`` cells of ``depth``, one uniformly in each of ``count`` equal runs of node ids (sorted).

    A run of consecutive ids at one depth is a run of the partition's cells, which halve the axes in turn,
    so the design is stratified over the domain without knowing its dimension.
    """
    total = 1 << depth
    count = max(1, min(count, total))
    edges = [total * i // count for i in range(count + 1)]
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(DESIGN_STREAM,)))
    picks = [lo + int(rng.integers(hi - lo)) for lo, hi in itertools.pairwise(edges)]
    return np.array([total + pick for pick in picks], dtype=np.int64)


def quota(plan: tuple[Round, ...], phase: int, num_clients: int, client: int) -> int:
    """How many points client ``client`` proposes for phase ``phase`` (``>= 2``): the phase's points dealt in turn,
    continuing where the last phase's ended, so every client proposes its share over the run."""
    if not 2 <= phase <= len(plan):
        return 0
    dealt = sum(r.points for r in plan[1:phase - 1])
    points = plan[phase - 1].points
    first = dealt % num_clients
    return points // num_clients + (1 if (client - first) % num_clients < points % num_clients else 0)


def offered(plan: tuple[Round, ...], phase: int, num_clients: int) -> int:
    """How many points every client proposes for phase ``phase`` (``>= 2``): its :func:`quota` first, then spares, up
    to the most it is dealt when only half the clients answer (the default quorum): ``ceil(n_p / ceil(M / 2))``.

    Why spares: the quota deals a phase's few points to few clients (phase 2 of pf-smbo has one point, so one
    proposer); when they all fail, the phase would have no point and the search would end for everyone. With
    spares the server deals the points among the replies that arrived (:func:`deal`): a phase keeps all its points
    while half the clients answer, and has at least one while one that explored answers. Why not the quorum the
    server runs with: it is the server's own setting (``min-fraction``), which the clients are not sent, and the
    spares cost a proposer only draws and node ids. Why not deal among the clients that answered the last phase:
    the clients do not know who did (a global update is the same for all and names no client).
    """
    if not 2 <= phase <= len(plan):
        return 0
    return math.ceil(plan[phase - 1].points / max(required_replies(DEFAULT_MIN_FRACTION, num_clients), 1))


def deal(plan: tuple[Round, ...], phase: int, num_clients: int, offers: list[np.ndarray | None]) -> list[int]:
    """How many of each client's proposals (as sent: its share, then its spares; ``None``: no usable reply) phase
    ``phase`` takes: its points dealt one at a time in turn, from where :func:`quota` starts, to the clients that
    still have one on offer.

    With every reply there, each client is dealt its :func:`quota` (its own draws, so a run without failures
    is the one the quotas give); a missing client's turns pass to the next ones, which give their spares. A
    client that answers is never dealt less than its quota (or its whole offer if shorter): its share is taken."""
    taken = [0] * num_clients
    if not 2 <= phase <= len(plan):
        return taken
    first = sum(r.points for r in plan[1:phase - 1]) % num_clients
    sizes = [0 if offer is None else int(offer.size) for offer in offers]
    left = plan[phase - 1].points
    while left > 0 and any(taken[m] < sizes[m] for m in range(num_clients)):
        for m in ((first + i) % num_clients for i in range(num_clients)):
            if left > 0 and taken[m] < sizes[m]:
                taken[m] += 1
                left -= 1
    return taken


def integer_split(alpha: float, num_clients: int, precision: float, union_size: int, own_size: int) -> tuple[int, int]:
    """``(g, l)``: the fewest pulls ``|U| g + |own| l`` whose personalised estimate at an own point is worth
    ``precision`` of the client's own pulls: ``a^2 / (g + l) + k / g <= 1 / precision`` (pf-xab-adaptive.md's
    variance, whole pulls). With ``k = 0`` (``alpha = 1`` or one client) the global mean adds nothing: own
    pulls only."""
    M = num_clients
    a = alpha + (1.0 - alpha) / M
    k = (M - 1) * ((1.0 - alpha) / M) ** 2
    target = 1.0 / precision
    if k == 0.0:
        return 0, max(1, math.ceil(round(precision * a * a, 9)))
    most = max(1, math.ceil(round(precision * (a * a + k), 9)))  # global pulls alone reach it there
    g = np.arange(1, most + 1, dtype=float)
    slack = target - k / g
    need = np.where(slack > 0, a * a / np.where(slack > 0, slack, 1.0), np.inf)
    local = np.maximum(np.ceil(np.round(need - g, 9)), 0.0)
    cost = union_size * g + own_size * local
    best = int(np.argmin(cost))  # the first: fewest global pulls among the cheapest
    return int(g[best]), int(local[best])


@dataclass(frozen=True)
class History:
    """A client's history: every point it has estimates at, their personalised estimates, their relative variances
    (in units of one reward's variance) and the phase each came from, in the order they arrived."""

    points: np.ndarray
    estimates: np.ndarray
    weights: np.ndarray
    rounds: np.ndarray

    @classmethod
    def of(cls, memory: Mapping[str, np.ndarray]) -> History:
        if "points" not in memory:
            return cls(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64))
        return cls(np.asarray(memory["points"], dtype=np.int64), np.asarray(memory["estimates"], dtype=float),
                   np.asarray(memory["weights"], dtype=float), np.asarray(memory["rounds"], dtype=np.int64))

    def memory(self) -> dict[str, np.ndarray]:
        return {"points": self.points, "estimates": self.estimates, "weights": self.weights, "rounds": self.rounds}

    def add(self, alpha: float, num_clients: int, estimates: RoundEstimates) -> History:
        """This history with the phase's personalised estimates ``alpha L + (1 - alpha) G`` at every point the
        client pulled (a point nobody else reported keeps its local mean)."""
        local, counts = np.asarray(estimates.local_means, dtype=float), np.asarray(estimates.local_counts)
        pulled = counts > 0
        global_means = np.asarray(estimates.global_means, dtype=float)
        others = int(counts[pulled].min()) if pulled.any() else 0  # every client's global pulls of the union
        holders = (np.full(local.shape, float(num_clients)) if estimates.holders is None
                   else np.asarray(estimates.holders, dtype=float))
        pooled = np.isfinite(global_means) & (holders > 1) & (others > 0)
        values = np.where(pooled, alpha * local + (1.0 - alpha) * np.where(pooled, global_means, 0.0), local)
        h = np.maximum(holders, 1.0)
        a, c = alpha + (1.0 - alpha) / h, (1.0 - alpha) / h
        with np.errstate(divide="ignore", invalid="ignore"):
            weights = np.where(pooled, a * a / counts + (h - 1.0) * c * c / max(others, 1), 1.0 / counts)
        return History(np.concatenate([self.points, estimates.node_ids[pulled]]),
                       np.concatenate([self.estimates, values[pulled]]),
                       np.concatenate([self.weights, weights[pulled]]),
                       np.concatenate([self.rounds, np.full(int(pulled.sum()), estimates.phase, dtype=np.int64)]))

    def latest(self, count: int) -> History:
        """The last ``count`` points (the most recent phases'), each point once: repeated estimates of a point
        are pooled by inverse variance."""
        nodes, index = np.unique(self.points, return_inverse=True)
        precision = np.bincount(index, weights=1.0 / self.weights, minlength=nodes.size)
        values = np.bincount(index, weights=self.estimates / self.weights, minlength=nodes.size) / precision
        last = np.zeros(nodes.size, dtype=np.int64)
        np.maximum.at(last, index, np.arange(self.points.size))
        keep = np.sort(np.argsort(-last, kind="stable")[:count])
        order = keep[np.argsort(last[keep], kind="stable")]
        return History(nodes[order], values[order], 1.0 / precision[order], self.rounds[last[order]])


class ProposalPolicy(Policy):
    """The base of the proposal family: the skeleton's hooks for proposals; a policy gives its plan and its proposer.

    Subclasses define :meth:`plan` (the phases: points and precision), :meth:`budget` (the pulls exploration may
    use) and :meth:`suggest` (a client's choice and proposals from its history).
    """

    proposes: ClassVar[bool] = True
    refines_partition: ClassVar[bool] = False
    successor_kind: ClassVar[str] = "proposals"

    # -- what a policy of the family defines -------------------------------------------------------
    def plan(self, settings: Settings) -> tuple[Round, ...]:
        """The phases the run may have, in order (the server starts none beyond them)."""
        raise NotImplementedError

    def budget(self, settings: Settings) -> int:
        """The pulls per client the phases may use together; the rest of the horizon exploits."""
        raise NotImplementedError

    def suggest(self, settings: Settings, client: int, phase: int, history: History, count: int, spares: int,
                dimensions: int, memory: Mapping[str, np.ndarray]) -> tuple[int, np.ndarray, dict[str, np.ndarray]]:
        """``(choice, proposals, own memory)`` after phase ``phase``: the node to exploit (one of the history), new
        distinct nodes of :func:`proposal_depth` for the next phase (first the client's share: ``count`` of them,
        fewer only if no new node is left, and then no spare; then at most ``spares`` more, drawn after the share's,
        so that the share is the same whether or not spares are asked), and the policy's arrays to keep."""
        raise NotImplementedError

    def rng(self, settings: Settings, client: int, phase: int) -> np.random.Generator:
        """The proposals' stream of one client after one phase: the same on every engine."""
        return np.random.default_rng([settings.seed, client, phase, PROPOSAL_STREAM])

    # -- the skeleton's hooks ------------------------------------------------------------------------
    def depth(self, settings: Settings, phase: int) -> int:
        return proposal_depth(settings)

    def most_nodes(self, settings: Settings, phase: int) -> int:
        plan = self.plan(settings)
        return plan[phase - 1].points if 1 <= phase <= len(plan) else 0

    def first_active_set(self, settings: Settings) -> np.ndarray:
        """Every client holds the initial design: the first phase is everyone's."""
        plan = self.plan(settings)
        return initial_design(settings.seed, plan[0].points if plan else 1, proposal_depth(settings))

    def successors(self, kept: np.ndarray) -> np.ndarray:
        return np.sort(np.asarray(kept, dtype=np.int64))

    def predecessors(self, nodes: np.ndarray) -> np.ndarray:
        """No point of a phase is carried to the next: every one is done with."""
        return np.zeros(0, dtype=np.int64)

    def lost(self, active: np.ndarray) -> np.ndarray:
        """A client whose proposals did not arrive (or that missed the phase) proposes nothing: both sides know."""
        return np.zeros(0, dtype=np.int64)

    def next_sets(self, settings: Settings, phase: int, replies: list[np.ndarray | None],
                  previous: list[np.ndarray]) -> list[np.ndarray]:
        """What the next phase takes of each offer that arrived (:func:`deal`), sorted; none for a client without a
        reply. The next union is these sets' union.

        A client's own nodes (its ``l`` pulls) are its share only (:meth:`own_nodes`), a subset of this set, as the
        server's count check allows: a spare the server takes is pulled ``g`` times by every client and is nobody's
        own, since its proposer cannot tell it from a spare another client happened to propose too (a point clipped
        to the domain's edge is one cell for everyone), and owning it would need a message naming the taken spares.
        The split of such a phase is the cheapest for these larger sets: each precision is still met, the cost at
        most overestimated (the rest of the phase a client exploits)."""
        taken = deal(self.plan(settings), phase + 1, settings.num_clients, replies)
        return [self.lost(old) if offer is None else np.sort(offer[:count])
                for offer, old, count in zip(replies, previous, taken, strict=True)]

    def caught_up_size(self, active_size: int, missed: int) -> int:
        return 0 if missed > 0 else active_size

    def own_nodes(self, active: np.ndarray, union: np.ndarray) -> np.ndarray:
        """Its proposals if the union holds them all; else they were lost on the way (the server assumed none)."""
        held = np.isin(active, union)
        return active if held.all() else np.zeros(0, dtype=np.int64)

    def check_next_set(self, settings: Settings, phase: int, client: int, previous: np.ndarray,
                       node_ids: np.ndarray) -> str | None:
        """Proposals for phase ``phase + 1``: at most what a client offers (:func:`offered`), distinct nodes of the
        proposal depth."""
        if node_ids.ndim != 1 or not np.issubdtype(node_ids.dtype, np.integer):
            return "proposals are not a vector of node ids"
        allowed = offered(self.plan(settings), phase + 1, settings.num_clients)
        if node_ids.size > allowed:
            return f"{node_ids.size} proposals for phase {phase + 1}, more than the {allowed} a client offers"
        depth = proposal_depth(settings)
        if node_ids.size and (node_ids.min() < 1 or np.any(depth_of(node_ids) != depth)
                              or np.unique(node_ids).size != node_ids.size):
            return f"proposals are not distinct nodes of depth {depth}"
        return None

    def can_finish_on(self, own: np.ndarray, node: int, reported_phase: int) -> bool:
        """A client exploits one of its history's points (at the points' depth), or the centre if it has none."""
        return node == ROOT or 1 <= int(depth_of(np.array([node]))[0]) <= POINT_DEPTH

    def max_phases(self, settings: Settings) -> int:
        return len(self.plan(settings))

    def phase_allowed(self, settings: Settings, phase: int) -> bool:
        """A phase is not a depth here (every point is at :func:`proposal_depth`): the plan says which may run."""
        return 1 <= phase <= len(self.plan(settings))

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        raise NotImplementedError(f"{self.name} plans each phase's pulls from its plan (round_pulls)")

    def round_pulls(self, settings: Settings, phase: int, f: float, union_size: int, own_size: int) -> tuple[int, int]:
        """The cheapest whole split (:func:`integer_split`) for the phase's precision over the union as it is."""
        plan = self.plan(settings)
        if not 1 <= phase <= len(plan) or union_size == 0:
            return 0, 0
        own = union_size if phase == 1 else max(own_size, 1)  # phase 1: everyone holds the whole design
        return integer_split(settings.alpha, settings.num_clients, plan[phase - 1].precision, union_size, own)

    def phase_fits(self, settings: Settings, length: int, remaining: int) -> bool:
        """A phase starts only if the exploration it adds stays within :meth:`budget`."""
        return settings.horizon - remaining + length <= min(self.budget(settings), settings.horizon)

    def score(self, settings: Settings, view: ClientView) -> np.ndarray:
        raise NotImplementedError(f"{self.name} proposes instead of eliminating")

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        raise NotImplementedError(f"{self.name} proposes instead of eliminating")

    def propose(self, settings: Settings, client: int, memory: Mapping[str, np.ndarray],
                estimates: RoundEstimates) -> Proposal:
        """Add the phase's estimates to the history, then ask :meth:`suggest` for the choice and the proposals: the
        client's quota (its own nodes, sorted), then spares up to what it offers (:func:`offered`)."""
        history = History.of(memory).add(settings.alpha, settings.num_clients, estimates)
        phase, plan = estimates.phase, self.plan(settings)
        count = quota(plan, phase + 1, settings.num_clients, client)
        spares = max(offered(plan, phase + 1, settings.num_clients) - count, 0)
        choice, nodes, own = self.suggest(settings, client, phase, history, count, spares, estimates.dimensions,
                                          memory)
        nodes = np.asarray(nodes, dtype=np.int64)
        return Proposal(choice, np.sort(nodes[:count]), {**own, **history.memory()}, spares=nodes[count:])


@lru_cache(maxsize=256)
def cached_plan(maker: object, key: tuple[object, ...]) -> tuple[Round, ...]:
    """A plan computed once per run's parameters (the server asks for it at every phase)."""
    assert callable(maker)
    plan: tuple[Round, ...] = maker(*key)
    return plan
