"""Phased elimination on a hierarchical partition: the skeleton of all three algorithms.

PF-XAB, Fed-PNE and PF-PNE share the same phases (depth ``h = p``), the same
schedule ``f(p)``, the same budget rule, the same messages and the same two
sub-phases of exploration followed by exploitation while waiting. They differ
only where the specification says so, which is what a :class:`Policy` holds:

* how often a node is pulled globally (every node of ``A(p)``) and locally
  (every node of the client's own ``A^m(p)``);
* whether the server eliminates nodes itself (Fed-PNE, PF-PNE);
* how a client ranks its nodes and which it keeps.

:class:`ClientMachine` and :class:`ServerMachine` are pure and deterministic
given their inputs and the run's seed: every transport calls the same methods
in the same order, so every engine gives the same numbers for the same seed.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace

import numpy as np

from pfxab_flower.algorithms import bernstein
from pfxab_flower.algorithms.messages import (
    ActiveSetReport,
    AlgorithmParameters,
    FinishInstruction,
    FinishReport,
    GlobalUpdate,
    LocalReport,
    PhaseInstruction,
)
from pfxab_flower.algorithms.schedule import Schedule
from pfxab_flower.config import REWARD_LIMIT
from pfxab_flower.errors import RunStoppedError
from pfxab_flower.faults import DEFAULT_MIN_FRACTION, required_replies
from pfxab_flower.partition import MAX_DEPTH, children, depth_of
from pfxab_flower.sampling import Environment

LOGGER = logging.getLogger("pfxab_flower")

ROOT = 1
FIRST_ACTIVE_SET = np.array([2, 3], dtype=np.int64)


class ProtocolError(RuntimeError):
    """A message does not fit the machine's state (a transport or peer bug)."""


@dataclass(frozen=True)
class Settings:
    """What every machine of one run shares."""

    schedule: Schedule
    alpha: float
    seed: int
    pf_pne_eps: float = 0.1
    min_fraction: float = DEFAULT_MIN_FRACTION  # share of the M clients an exchange needs (ServerMachine)
    #: Where a reward (and so a local mean) can lie: the server rejects a report outside it (ServerMachine).
    reward_range: tuple[float, float] = (-REWARD_LIMIT, REWARD_LIMIT)
    #: ``hoeffding``: the paper's widths ``B_p``; ``bernstein``: empirical-Bernstein widths (:mod:`.bernstein`).
    confidence: str = "hoeffding"

    @classmethod
    def from_parameters(cls, parameters: AlgorithmParameters, min_fraction: float = DEFAULT_MIN_FRACTION) -> Settings:
        """The settings of the parameters a server sends (``min_fraction`` is the server's own)."""
        schedule = Schedule(
            horizon=parameters.horizon, num_clients=parameters.num_clients, nu1=parameters.nu1, rho=parameters.rho,
            max_depth=parameters.max_depth or None,
        )
        return cls(schedule=schedule, alpha=parameters.alpha, seed=parameters.seed,
                   pf_pne_eps=parameters.pf_pne_eps, min_fraction=min_fraction,
                   reward_range=(parameters.reward_low, parameters.reward_high), confidence=parameters.confidence)

    def parameters(self, algorithm: str, report_pulls: bool = False) -> AlgorithmParameters:
        """What the server sends every client: these settings (but the quorum) and the algorithm."""
        schedule = self.schedule
        # the reward range travels only where a client needs it: for its Bernstein widths
        low, high = self.reward_range if self.bernstein else (-REWARD_LIMIT, REWARD_LIMIT)
        return AlgorithmParameters(
            algorithm=algorithm, num_clients=schedule.num_clients, horizon=schedule.horizon, alpha=self.alpha,
            seed=self.seed, nu1=schedule.nu1, rho=schedule.rho, max_depth=schedule.max_depth or 0,
            pf_pne_eps=self.pf_pne_eps, report_pulls=report_pulls, confidence=self.confidence,
            reward_low=float(low), reward_high=float(high),
        )

    @property
    def bernstein(self) -> bool:
        return self.confidence == "bernstein"

    @property
    def reward_span(self) -> float:
        """``b``: the span of the reward range (the range term of the Bernstein width)."""
        return self.reward_range[1] - self.reward_range[0]

    @property
    def log_3_delta(self) -> float:
        """``L = log(3 / delta)`` of the Bernstein widths, with the paper's ``delta`` schedule."""
        return bernstein.log_term(self.horizon)

    def bernstein_samples(self, phase: int, variance: float) -> float:
        """Bernstein's ``f(p)``: samples per client per node at which an ``M``-client pooled mean's width is
        ``nu1 rho^h`` for rewards of variance ``variance`` (Hoeffding's ``f(p)`` is the same with ``V = b^2/4``
        and no range term)."""
        target = self.schedule.smoothness(phase)
        return bernstein.samples_for(target, variance, self.reward_span, self.log_3_delta) / self.num_clients

    @property
    def num_clients(self) -> int:
        return self.schedule.num_clients

    @property
    def horizon(self) -> int:
        return self.schedule.horizon


@dataclass(frozen=True)
class ClientView:
    """What a client knows at elimination time about the nodes of its own ``A^m(p)``."""

    phase: int
    node_ids: np.ndarray
    local_means: np.ndarray
    local_counts: np.ndarray
    global_means: np.ndarray
    server_eliminated: np.ndarray
    # bernstein only: each local mean's width (the client's own variance), each global mean's width, and
    # what a personalised estimate's width needs (pooled variances, holders, the phase's fewest pulls per node)
    local_widths: np.ndarray | None = None
    global_widths: np.ndarray | None = None
    pooled_variances: np.ndarray | None = None
    holders: np.ndarray | None = None
    min_count: int = 0


class Policy:
    """Where an algorithm departs from the shared skeleton. Subclasses override what differs."""

    name = "phased-elimination"

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        """``(global pulls per node of A(p), local pulls per node of A^m(p))`` for the phase's ``f(p)``."""
        raise NotImplementedError

    def server_eliminated(
        self, settings: Settings, phase: int, pooled_means: np.ndarray, pooled_widths: np.ndarray | None
    ) -> np.ndarray:
        """Nodes of ``A(p)`` the server drops for everyone (default: none); widths only under bernstein."""
        return np.zeros(pooled_means.shape, dtype=bool)

    def score(self, settings: Settings, view: ClientView) -> np.ndarray:
        """The client's estimate of each node's value: it exploits the best one at the end."""
        raise NotImplementedError

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        """Which nodes of ``A^m(p)`` survive the client's elimination."""
        raise NotImplementedError


def eliminate_below(estimates: np.ndarray, slack: float, margin: float) -> np.ndarray:
    """Keep mask of the rule ``drop k if estimate_k + slack <= max_j estimate_j - margin``.

    A NaN estimate (a node no valid report sampled) is no evidence: it is kept and
    is not the reference; with no finite estimate at all, every node is kept.
    """
    estimates = np.asarray(estimates, dtype=float)
    known = np.isfinite(estimates)
    if not known.any():
        return np.ones(estimates.shape, dtype=bool)
    return ~(estimates + slack <= estimates[known].max() - margin)


def _rng(settings: Settings, client: int, phase: int) -> np.random.Generator:
    """The noise stream of one client in one phase: the same whichever engine runs it."""
    return np.random.default_rng([settings.seed, client, phase])


@dataclass
class ClientState:
    """Everything a client carries between messages (persisted in Flower's ``context.state``)."""

    completed: int = 0  # completed phases
    pulls: int = 0  # pulls made so far (the time t at the end of the last phase)
    active: np.ndarray = field(default_factory=lambda: FIRST_ACTIVE_SET.copy())
    choice: int = ROOT  # node to exploit after the last phase
    union: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    means: np.ndarray = field(default_factory=lambda: np.zeros(0))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    variances: np.ndarray = field(default_factory=lambda: np.zeros(0))  # bernstein: sample variances over A(p)
    explored: int = 0  # own exploration pulls in the current phase
    finished: bool = False
    explored_phase: int = 0  # the last phase this client explored (it may have missed later messages)

    _SCALARS = ("completed", "pulls", "choice", "explored", "finished", "explored_phase")

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = {k: np.array([int(getattr(self, k))], dtype=np.int64) for k in self._SCALARS}
        arrays.update(active=self.active, union=self.union, means=self.means, counts=self.counts,
                      variances=self.variances)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> ClientState:
        scalars = {k: int(arrays[k][0]) for k in cls._SCALARS if k in arrays}
        scalars["finished"] = bool(scalars["finished"])
        return cls(
            **scalars,
            active=np.asarray(arrays["active"], dtype=np.int64),
            union=np.asarray(arrays["union"], dtype=np.int64),
            means=np.asarray(arrays["means"], dtype=float),
            counts=np.asarray(arrays["counts"], dtype=np.int64),
            variances=np.asarray(arrays.get("variances", np.zeros(0)), dtype=float),
        )


class ClientMachine:
    """One client of a phased-elimination algorithm."""

    def __init__(self, policy: Policy, settings: Settings, client: int, state: ClientState | None = None):
        self.policy = policy
        self.settings = settings
        self.client = client
        self.state = state if state is not None else ClientState()

    def _own_index(self, union: np.ndarray) -> np.ndarray:
        index = np.searchsorted(union, self.state.active)
        if np.any(index >= len(union)) or np.any(union[np.minimum(index, len(union) - 1)] != self.state.active):
            raise ProtocolError(f"client {self.client}: its active set is not inside the broadcast union")
        return index

    def catch_up(self, phase: int) -> None:
        """Close the phases before ``phase`` that this client missed (it was down or too late).

        For each missed phase its next active set is every child of its current
        one, exactly the superset the server assumes for a client whose active
        set did not arrive, so both sides keep the same sets. Its choice is kept.
        Pulls it made before dropping out count toward its ``T``; the pulls of the
        time it was away are made up at the end (``finish`` plays until ``T``).
        """
        s = self.state
        if phase <= s.completed:
            raise ProtocolError(f"client {self.client}: got phase {phase}, but it completed phase {s.completed}")
        while s.completed + 1 < phase:
            missed = s.completed + 1
            if s.explored_phase == missed:
                s.pulls += s.explored
            s.active = children(s.active)
            s.completed = missed

    def explore(self, instruction: PhaseInstruction, env: Environment) -> LocalReport:
        """Global then local exploration; report local means over ``A(p)``."""
        s = self.state
        self.catch_up(instruction.phase)
        union = np.asarray(instruction.node_ids, dtype=np.int64)
        own = self._own_index(union)
        rng = _rng(self.settings, self.client, instruction.phase)
        if self.settings.bernstein:
            return self._explore_with_variances(instruction, env, union, own, rng)
        sums = np.zeros(len(union))
        counts = np.zeros(len(union), dtype=np.int64)
        if instruction.global_pulls > 0:
            pulls = np.full(len(union), instruction.global_pulls, dtype=np.int64)
            sums += env.pull(union, pulls, rng)
            counts += pulls
        if instruction.local_pulls > 0:
            pulls = np.full(len(own), instruction.local_pulls, dtype=np.int64)
            sums[own] += env.pull(s.active, pulls, rng)
            counts[own] += pulls
        means = np.divide(sums, counts, out=np.zeros(len(union)), where=counts > 0)
        s.union, s.means, s.counts, s.explored = union, means, counts, int(counts.sum())
        s.explored_phase = instruction.phase
        return LocalReport(self.client, union, means, counts)

    def _explore_with_variances(
        self, instruction: PhaseInstruction, env: Environment, union: np.ndarray, own: np.ndarray,
        rng: np.random.Generator,
    ) -> LocalReport:
        """``explore`` under bernstein: the same pulls, and each node's sample variance as well."""
        s = self.state
        sums, deviations = np.zeros(len(union)), np.zeros(len(union))
        counts = np.zeros(len(union), dtype=np.int64)
        if instruction.global_pulls > 0:
            counts += instruction.global_pulls
            sums, deviations = env.pull_with_deviations(union, counts.copy(), rng)
        if instruction.local_pulls > 0:
            pulls = np.full(len(own), instruction.local_pulls, dtype=np.int64)
            local_sums, local_deviations = env.pull_with_deviations(s.active, pulls, rng)
            sums[own], deviations[own] = bernstein.combine_samples(
                (sums[own], local_sums), (deviations[own], local_deviations), (counts[own], pulls))
            counts[own] += pulls
        means = np.divide(sums, counts, out=np.zeros(len(union)), where=counts > 0)
        variances = bernstein.sample_variances(deviations, counts, self.settings.reward_span)
        s.union, s.means, s.counts, s.explored = union, means, counts, int(counts.sum())
        s.variances = variances
        s.explored_phase = instruction.phase
        return LocalReport(self.client, union, means, counts, variances)

    def eliminate(self, update: GlobalUpdate, env: Environment) -> ActiveSetReport:
        """Exploit while waiting, eliminate with the global means, split the survivors.

        A client that missed this phase's exploration has no local means: it
        exploits its chosen node for the whole phase and keeps every child (the
        server's superset rule), so it rejoins in step.
        """
        s = self.state
        self.catch_up(update.phase)
        if s.explored_phase != update.phase:
            if update.phase_length > 0:
                env.play(s.choice, update.phase_length)
            s.active = children(s.active)
            s.pulls += update.phase_length
            s.completed = update.phase
            return ActiveSetReport(self.client, s.active)
        if not np.array_equal(update.node_ids, s.union):
            raise ProtocolError(f"client {self.client}: global update does not match phase {s.completed + 1}")
        own = self._own_index(s.union)
        local = s.means[own]
        global_means = np.asarray(update.global_means, dtype=float)[own]
        # a node nobody could report on has no global estimate: fall back on the local one
        reported = np.isfinite(global_means)
        global_means = np.where(reported, global_means, local)
        local_widths = global_widths = variances = node_holders = None
        min_count = 0
        if self.settings.bernstein:
            shape = np.shape(update.node_ids)
            if np.shape(update.variances) != shape or np.shape(update.holders) != shape:
                raise ProtocolError(f"client {self.client}: a bernstein global update without variances and holders")
            settings = self.settings
            local_widths = bernstein.width(s.variances[own], s.counts[own], settings.reward_span,
                                           settings.log_3_delta)
            variances = np.asarray(update.variances, dtype=float)[own]
            node_holders = np.where(reported, np.asarray(update.holders, dtype=float)[own], 0.0)
            min_count = min_pulls(s.counts)
            global_widths = np.where(reported, bernstein.global_widths(
                variances, node_holders, min_count, settings.reward_span, settings.log_3_delta), local_widths)
        view = ClientView(
            phase=update.phase,
            node_ids=s.active,
            local_means=local,
            local_counts=s.counts[own],
            global_means=global_means,
            server_eliminated=np.asarray(update.eliminated, dtype=bool)[own],
            local_widths=local_widths,
            global_widths=global_widths,
            pooled_variances=variances,
            holders=node_holders,
            min_count=min_count,
        )
        waiting = update.phase_length - s.explored
        if waiting > 0:
            env.play(int(s.active[np.argmax(local)]), waiting)
        keep = self.policy.keep(self.settings, view)
        survivors = s.active[keep]
        s.choice = int(survivors[np.argmax(self.policy.score(self.settings, view)[keep])])
        s.active = children(survivors)
        s.pulls += update.phase_length
        s.completed = update.phase
        return ActiveSetReport(self.client, s.active)

    def finish(self, instruction: FinishInstruction, env: Environment) -> FinishReport:
        """Exploit the chosen node until the horizon (making up any pulls missed while away)."""
        s = self.state
        self.catch_up(instruction.phases + 1)
        remaining = self.settings.horizon - s.pulls
        if remaining > 0:
            env.play(s.choice, remaining)
        s.pulls = self.settings.horizon
        s.finished = True
        return FinishReport(self.client, s.choice, np.asarray(env.point(s.choice), dtype=float))


@dataclass(frozen=True)
class PhasePlan:
    """The server's view of the phase under way."""

    phase: int
    union: np.ndarray
    global_pulls: int
    local_pulls: int
    length: int
    eliminated: np.ndarray | None = None
    failed_local_means: int = 0  # clients whose local report was missing or rejected
    mean_reward: float = math.nan  # mean of every reward the valid reports observed (NaN: not seen, e.g. SecAgg+)


class ServerMachine:
    """The server of a phased-elimination algorithm: unions, averages, budget."""

    def __init__(self, policy: Policy, settings: Settings, report_pulls: bool = False):
        self.policy = policy
        self.settings = settings
        self.parameters = settings.parameters(policy.name, report_pulls)
        self.client_sets: list[np.ndarray] = [FIRST_ACTIVE_SET.copy() for _ in range(settings.num_clients)]
        self.completed = 0
        self.pulls = 0
        self.plan: PhasePlan | None = None
        self.done = False
        self.history: list[dict] = []
        self.rejected: list[dict] = []
        self.final_nodes: dict[int, int] = {}
        self.reported_phase = [0] * settings.num_clients  # last phase whose active set each client sent
        #: bernstein: the variance the next phase's length is designed for (the largest pooled one seen last)
        self.design_variance = bernstein.max_variance(settings.reward_span) if settings.bernstein else math.nan

    def base_samples(self, phase: int) -> float:
        """``f(p)``: the paper's (hoeffding), or Bernstein's for the variance observed so far."""
        if self.settings.bernstein:
            return self.settings.bernstein_samples(phase, self.design_variance)
        return self.settings.schedule.f(phase)

    def max_phases(self) -> int:
        """An upper bound on the phases of the run (Flower's number of rounds is one more)."""
        settings = self.settings
        if settings.bernstein:  # no phase can be shorter than for noiseless rewards
            return settings.schedule.max_phases(lambda phase: settings.bernstein_samples(phase, 0.0))
        return settings.schedule.max_phases()

    # -- phase start ----------------------------------------------------------------
    def union(self) -> np.ndarray:
        return np.unique(np.concatenate(self.client_sets))

    def next_instruction(self) -> PhaseInstruction | FinishInstruction:
        """The next phase if its whole length fits in the budget, else the end of the run."""
        phase = self.completed + 1
        union = self.union()
        n_global, n_local = self.policy.pulls(self.settings, self.base_samples(phase))
        length = len(union) * n_global + max(len(a) for a in self.client_sets) * n_local
        schedule = self.settings.schedule
        if schedule.depth_allowed(phase) and length >= 1 and self.pulls + length <= schedule.horizon:
            self.plan = PhasePlan(phase, union, n_global, n_local, length)
            return PhaseInstruction(phase, union, n_global, n_local, self.parameters)
        self.done = True
        self.plan = None
        return FinishInstruction(self.completed, self.parameters)

    # -- first exchange: local means -> global means ----------------------------------
    def check_client_id(self, client: object) -> str | None:
        """Why ``client`` is not one of the run's client indices, or ``None``."""
        M = self.settings.num_clients
        if isinstance(client, bool) or not isinstance(client, int | np.integer) or not 0 <= client < M:
            return f"client id {client!r} is not in [0, {M})"
        return None

    def check_report(self, report: LocalReport, seen: set[int]) -> str | None:
        """Why a local report cannot be averaged, or ``None`` if it can."""
        plan = self.plan
        if plan is None:
            return "no phase is under way"
        if (reason := self.check_client_id(report.client)) is not None:
            return reason
        if report.client in seen:
            return f"client {report.client} replied twice"
        arrays = (np.asarray(report.node_ids), np.asarray(report.means), np.asarray(report.counts))
        if any(a.shape != plan.union.shape for a in arrays):
            return f"reply has {[a.size for a in arrays]} values, expected {plan.union.size} per array"
        node_ids, means, counts = arrays
        if not np.array_equal(node_ids, plan.union):
            return "node ids differ from the broadcast union A(p)"
        if not np.issubdtype(counts.dtype, np.integer) or np.any(counts < 0):
            return "counts are not non-negative integers"
        reason = self._check_counts(int(report.client), counts)
        if reason is not None:
            return reason
        if not np.issubdtype(means.dtype, np.floating) or not np.all(np.isfinite(means[counts > 0])):
            return "means are not finite numbers"
        low, high = self.settings.reward_range
        sampled = means[counts > 0]
        if sampled.size and (sampled.min() < low or sampled.max() > high):
            return f"means are outside the reward range [{low:g}, {high:g}]"
        return self._check_variances(report.variances, counts)

    def _check_variances(self, variances: np.ndarray | None, counts: np.ndarray) -> str | None:
        """Under bernstein, one sample variance per sampled node, as large as the reward range allows at most."""
        if not self.settings.bernstein:
            return None if variances is None else "variances sent, but the run's confidence is hoeffding"
        if variances is None:
            return "no variances sent, but the run's confidence is bernstein"
        variances = np.asarray(variances)
        if variances.shape != counts.shape or not np.issubdtype(variances.dtype, np.floating):
            return f"variances are not {counts.size} numbers"
        sampled = counts > 0
        limit = bernstein.variance_limit(counts, self.settings.reward_span) * (1.0 + 1e-9)
        if not np.all(np.isfinite(variances[sampled])) or np.any(((variances < 0) | (variances > limit))[sampled]):
            return "variances are not in [0, b^2 n / (4 (n - 1))] for the reward range's span b"
        return None

    def _check_counts(self, client: int, counts: np.ndarray) -> str | None:
        """Counts must follow the phase's pull plan: ``global_pulls`` per node of ``A(p)``, plus
        ``local_pulls`` on nodes of the client's own set (a subset of what the server assumes for it)."""
        plan = self.plan
        assert plan is not None
        base, extra = plan.global_pulls, plan.local_pulls
        own = np.isin(plan.union, self.client_sets[client])
        if np.any((counts != base) & (counts != base + extra)) or np.any((counts == base + extra) & ~own & (extra > 0)):
            return "counts do not follow the phase's pull plan"
        return None

    def require_quorum(self, phase: int, stage: str, usable: int) -> None:
        """Stop the run if fewer than ``min_fraction`` of the clients sent a usable reply."""
        M = self.settings.num_clients
        needed = required_replies(self.settings.min_fraction, M)
        if usable < needed:
            self.done = True
            self.plan = None
            raise RunStoppedError(
                f"phase {phase}: only {usable} of {M} clients sent a usable {stage} reply, fewer than "
                f"min-fraction={self.settings.min_fraction:g} requires ({needed}); run stopped"
            )

    def reject(self, client: object, phase: int, stage: str, reason: str) -> None:
        """Log and record a reply that is not used (also called by transports for unreadable replies)."""
        LOGGER.warning("phase %d: rejected %s reply from client %s: %s", phase, stage, client, reason)
        self.rejected.append({"phase": phase, "stage": stage, "client": client, "reason": reason})

    def aggregate(self, reports: list[LocalReport]) -> GlobalUpdate:
        """Average each node's local means over the valid reports that sampled it."""
        plan = self.plan
        if plan is None:
            raise ProtocolError("aggregate called with no phase under way")
        seen: set[int] = set()
        valid = []
        for report in sorted(reports, key=lambda r: (str(type(r.client)), r.client)):
            reason = self.check_report(report, seen)
            if reason is None:
                seen.add(int(report.client))
                valid.append(report)
            else:
                self.reject(report.client, plan.phase, "local-means", reason)
        self.require_quorum(plan.phase, "local-means", len(valid))
        variances = pooled_variances(plan.union, valid) if self.settings.bernstein else None
        return self._close_exploration(pooled_means(plan.union, valid), len(valid), observed_mean(valid),
                                       variances, holders(plan.union, valid))

    def aggregate_sums(
        self, sums: np.ndarray, holders: np.ndarray, reporters: int, variance_sums: np.ndarray | None = None
    ) -> GlobalUpdate:
        """``aggregate`` from sums only (secure aggregation): the server never sees a client's means.

        ``sums[k]`` is the sum of the local means of node ``k`` over the ``reporters``
        clients that sampled it, ``holders[k]`` how many did (and under bernstein
        ``variance_sums[k]`` the sum of their sample variances). An aggregate that does
        not fit the broadcast union is rejected as a whole (every reply lost).
        """
        plan = self.plan
        if plan is None:
            raise ProtocolError("aggregate called with no phase under way")
        sums, holders = np.asarray(sums, dtype=float), np.asarray(holders, dtype=float)
        parts = [sums, holders]
        if self.settings.bernstein:
            variance_sums = np.asarray(variance_sums if variance_sums is not None else np.zeros(0), dtype=float)
            parts.append(variance_sums)
        reason = None
        if any(part.shape != plan.union.shape for part in parts):
            reason = f"aggregate has {[part.size for part in parts]} values, expected {plan.union.size} each"
        elif not all(np.all(np.isfinite(part)) for part in parts):
            reason = "aggregate is not finite"
        elif np.any(holders < 0) or np.any(holders > reporters):
            reason = f"holder counts are not in [0, {reporters}]"
        if reason is not None:
            self.reject("aggregate", plan.phase, "local-means", reason)
            reporters = 0
        self.require_quorum(plan.phase, "local-means", reporters)
        if reporters == 0:
            return self._close_exploration(np.full(plan.union.shape, np.nan), 0)
        pooled = np.divide(sums, holders, out=np.full(plan.union.shape, np.nan), where=holders > 0)
        variances = None
        if self.settings.bernstein:
            variances = np.divide(variance_sums, holders, out=np.full(plan.union.shape, np.nan), where=holders > 0)
        return self._close_exploration(pooled, reporters, math.nan, variances, holders)

    def _close_exploration(
        self, pooled: np.ndarray, usable: int, mean_reward: float = math.nan,
        variances: np.ndarray | None = None, node_holders: np.ndarray | None = None,
    ) -> GlobalUpdate:
        plan = self.plan
        assert plan is not None
        widths = self._global_widths(variances, node_holders) if self.settings.bernstein else None
        eliminated = self.policy.server_eliminated(self.settings, plan.phase, pooled, widths)
        failed = self.settings.num_clients - usable
        self.plan = replace(plan, eliminated=eliminated, failed_local_means=failed, mean_reward=mean_reward)
        if not self.settings.bernstein:
            return GlobalUpdate(plan.phase, plan.union, pooled, plan.length, eliminated, self.parameters)
        variances, node_holders = self._pooled_spread(variances, node_holders)
        return GlobalUpdate(plan.phase, plan.union, pooled, plan.length, eliminated, self.parameters, variances,
                            node_holders)

    def _pooled_spread(
        self, variances: np.ndarray | None, node_holders: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Pooled variances and holders as sent (NaN and 0 where nothing usable arrived)."""
        plan = self.plan
        assert plan is not None
        if variances is None or node_holders is None:
            return np.full(plan.union.shape, np.nan), np.zeros(plan.union.shape)
        return variances, node_holders

    def _global_widths(self, variances: np.ndarray | None, node_holders: np.ndarray | None) -> np.ndarray:
        """Each global mean's Bernstein width; the largest pooled variance sets the next phase's length."""
        plan = self.plan
        assert plan is not None
        settings = self.settings
        variances, node_holders = self._pooled_spread(variances, node_holders)
        known = np.isfinite(variances)
        if known.any():
            largest = bernstein.round_up(float(variances[known].max()))
            self.design_variance = min(largest, bernstein.max_variance(settings.reward_span))
        min_count = plan.global_pulls if plan.global_pulls > 0 else plan.local_pulls
        return bernstein.global_widths(variances, node_holders, min_count, settings.reward_span,
                                       settings.log_3_delta)

    # -- second exchange: next active sets -------------------------------------------
    def check_active_set(self, report: ActiveSetReport, seen: set[int]) -> str | None:
        if (reason := self.check_client_id(report.client)) is not None:
            return reason
        if report.client in seen:
            return f"client {report.client} replied twice"
        ids = np.asarray(report.node_ids)
        if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
            return "active set is not a non-empty vector of node ids"
        allowed = children(self.client_sets[report.client])
        if not np.all(np.isin(ids, allowed)) or np.unique(ids).size != ids.size:
            return "active set holds node ids that are not distinct children of the client's previous set"
        return None

    def collect(self, reports: list[ActiveSetReport]) -> None:
        """Form the next union from the clients' new active sets; close the phase."""
        plan = self.plan
        if plan is None or plan.eliminated is None:
            raise ProtocolError("collect called before aggregate")
        seen: set[int] = set()
        new_sets = [None] * self.settings.num_clients
        for report in sorted(reports, key=lambda r: (str(type(r.client)), r.client)):
            reason = self.check_active_set(report, seen)
            if reason is None:
                seen.add(int(report.client))
                new_sets[int(report.client)] = np.sort(np.asarray(report.node_ids, dtype=np.int64))
                self.reported_phase[int(report.client)] = plan.phase
            else:
                self.reject(report.client, plan.phase, "active-set", reason)
        self.require_quorum(plan.phase, "active-set", len(seen))
        for m, new in enumerate(new_sets):
            if new is None:  # no valid reply: every child of its previous set, a superset of what it kept
                new_sets[m] = children(self.client_sets[m])
        self.client_sets = new_sets
        next_union = self.union()
        self.completed = plan.phase
        self.pulls += plan.length
        self.history.append(
            {
                "phase": plan.phase,
                "depth": plan.phase,
                "active_nodes": int(plan.union.size),
                "eliminated": int(plan.union.size - np.unique(next_union // 2).size),
                "global_pulls": plan.global_pulls,
                "local_pulls": plan.local_pulls,
                "phase_length": plan.length,
                "time": self.pulls,
                "next_active_nodes": int(next_union.size),
                "communication_rounds": 2 * plan.phase,  # exchanges so far: two per phase
                "failed_local_means": plan.failed_local_means,
                "failed_active_sets": self.settings.num_clients - len(seen),
                "mean_observed_reward": plan.mean_reward,
            }
        )
        row = self.history[-1]
        LOGGER.info(
            "phase %d (depth %d): %d active nodes, %d eliminated, %d pulls per client, %d exchanges so far",
            row["phase"], row["depth"], row["active_nodes"], row["eliminated"], row["phase_length"],
            row["communication_rounds"],
        )
        self.plan = None

    def check_final(self, report: FinishReport) -> str | None:
        """Why a final report cannot be used, or ``None``: the node must be one the client can hold.

        A client exploits the best survivor of the last phase it completed, so its final
        node is an ancestor of its current active set, no shallower than the last phase
        whose active set it sent (the root only if it never sent one).
        """
        client = report.client
        if (reason := self.check_client_id(client)) is not None:
            return reason
        node = report.node_id
        if isinstance(node, bool) or not isinstance(node, int | np.integer) or not 1 <= node < 2**MAX_DEPTH:
            return f"final node {node!r} is not a node id of the partition"
        own = self.client_sets[int(client)]
        depth, own_depth = int(depth_of(np.array([node]))[0]), depth_of(own)
        held = np.any((own_depth > depth) & (np.right_shift(own, np.maximum(own_depth - depth, 0)) == node))
        if not held or depth < self.reported_phase[int(client)]:
            return f"final node {node} is not one client {client} can hold (its active set descends elsewhere)"
        point = np.asarray(report.point)
        if point.ndim != 1 or point.size == 0 or not np.issubdtype(point.dtype, np.floating) or \
                not np.all(np.isfinite(point)):
            return "final point is not a non-empty vector of finite numbers"
        return None

    def finish(self, reports: list[FinishReport]) -> None:
        for report in reports:
            self.final_nodes[int(report.client)] = int(report.node_id)

    @property
    def failures(self) -> int:
        """Replies the server could not use (missing, late or rejected), over all phases."""
        return sum(row["failed_local_means"] + row["failed_active_sets"] for row in self.history)

    @property
    def communication_rounds(self) -> int:
        """Two exchanges per completed phase, plus the final one."""
        return 2 * self.completed + (1 if self.done else 0)


def observed_mean(reports: list[LocalReport]) -> float:
    """The mean of every reward the reports observed (each local mean weighted by its count)."""
    total = sum(float(np.sum(np.where(r.counts > 0, r.means, 0.0) * r.counts)) for r in reports)
    pulls = sum(int(np.sum(r.counts)) for r in reports)
    return total / pulls if pulls else math.nan


def min_pulls(counts: np.ndarray) -> int:
    """The fewest pulls any sampled node of ``A(p)`` had in a phase (every client's global pulls, if any)."""
    sampled = np.asarray(counts)[np.asarray(counts) > 0]
    return int(sampled.min()) if sampled.size else 0


def holders(union: np.ndarray, reports: list[LocalReport]) -> np.ndarray:
    """How many of the reports sampled each node of ``union``."""
    if not reports:
        return np.zeros(union.shape)
    return np.stack([np.asarray(r.counts) > 0 for r in reports]).sum(axis=0).astype(float)


def pooled_variances(union: np.ndarray, reports: list[LocalReport]) -> np.ndarray:
    """Mean of the clients' sample variances of each node over the reports that sampled it (NaN if none did).

    Each client's variance is about its own rewards (around its own mean), so pooling
    them estimates the within-client variance the global mean's width needs, not the
    spread between clients' objectives.
    """
    if not reports:
        return np.full(union.shape, np.nan)
    variances = np.stack([np.asarray(r.variances, dtype=float) for r in reports])
    sampled = np.stack([np.asarray(r.counts) > 0 for r in reports])
    total = np.where(sampled, variances, 0.0).sum(axis=0)
    count = sampled.sum(axis=0)
    return np.divide(total, count, out=np.full(union.shape, np.nan), where=count > 0)


def pooled_means(union: np.ndarray, reports: list[LocalReport]) -> np.ndarray:
    """Mean of the local means of each node over the reports that sampled it (NaN if none did)."""
    if not reports:
        return np.full(union.shape, np.nan)
    means = np.stack([np.asarray(r.means, dtype=float) for r in reports])
    sampled = np.stack([np.asarray(r.counts) > 0 for r in reports])
    holders = sampled.sum(axis=0)
    total = np.where(sampled, means, 0.0).sum(axis=0)
    return np.divide(total, holders, out=np.full(union.shape, np.nan), where=holders > 0)
