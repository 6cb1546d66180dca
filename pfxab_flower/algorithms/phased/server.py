"""The server of a phased-elimination algorithm: unions, pooled means, budget, history."""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from pfxab_flower.algorithms.messages import (
    ActiveSetReport,
    FinishInstruction,
    FinishReport,
    GlobalUpdate,
    LocalReport,
    PhaseInstruction,
)
from pfxab_flower.algorithms.phased.bounded import max_phases
from pfxab_flower.algorithms.phased.checks import ReplyChecks
from pfxab_flower.algorithms.phased.policy import Policy
from pfxab_flower.algorithms.phased.pooling import holders, observed_mean, pooled_means, pooled_statistics
from pfxab_flower.algorithms.phased.settings import Settings
from pfxab_flower.algorithms.phased.state import PhasePlan, ProtocolError
from pfxab_flower.errors import RunStoppedError
from pfxab_flower.faults import required_replies

LOGGER = logging.getLogger("pfxab_flower")


class ServerMachine(ReplyChecks):
    """The server of a phased-elimination algorithm: unions, averages, budget."""

    def __init__(self, policy: Policy, settings: Settings, report_pulls: bool = False):
        if policy.name != settings.spec.algorithm:  # the clients run the spec's algorithm: both must be one
            raise ValueError(f"policy {policy.name!r} does not match the spec's algorithm {settings.spec.algorithm!r}")
        self.policy = policy
        self.settings = settings
        self.parameters = settings.spec.for_clients(report_pulls)  # what every message carries
        first = policy.first_active_set(settings)
        self.client_sets: list[np.ndarray] = [first.copy() for _ in range(settings.num_clients)]
        self.completed = 0
        self.pulls = 0
        self.points = 0  # the most distinct points a client has been asked to evaluate (max_evaluations)
        self.plan: PhasePlan | None = None
        self.done = False
        self.history: list[dict[str, Any]] = []
        self.rejected: list[dict[str, Any]] = []
        self.used: list[object] = []  # the reports the last exchange used (the driver keeps only their pull logs)
        self.final_nodes: dict[int, int] = {}
        #: each client's best observed point as it reported it: (node, mean of its rewards there, pulls)
        self.best_observed: dict[int, tuple[int, float, int]] = {}
        self.reported_phase = [0] * settings.num_clients  # last phase whose active set each client sent
        #: which clients the next union is formed from (all but those that missed the last round, if the policy
        #: counts only completed rounds: :attr:`Policy.counts_only_completed_rounds`)
        self.counted = [True] * settings.num_clients
        self.explored: set[int] = set()  # the clients whose local means the phase under way used
        #: what the bound designs the next phase's length from (e.g. the largest pooled variance seen last)
        self.design = settings.bound.first_design(settings)

    def base_samples(self, phase: int) -> float:
        """``f(p)`` as the run's bound designs it (Hoeffding: the paper's; Bernstein: for the variance seen)."""
        return self.settings.bound.samples(self.settings, phase, self.design)

    def max_phases(self) -> int:
        """An upper bound on the phases of the run (Flower's number of rounds is one more)."""
        return max_phases(self.settings, self.policy)

    # -- phase start ----------------------------------------------------------------
    def union(self) -> np.ndarray:
        """The next phase's nodes: every counted client's set (every client's if none is counted)."""
        sets = [a for a, counted in zip(self.client_sets, self.counted, strict=True) if counted] or self.client_sets
        return np.unique(np.concatenate(sets))

    def next_instruction(self) -> PhaseInstruction | FinishInstruction:
        """The next phase if its whole length fits in the budget, else the end of the run (at once if solo)."""
        phase = self.completed + 1
        if self.policy.solo:
            self.done = True
            return FinishInstruction(self.completed, self.parameters)
        union = self.union()
        sizes = [len(self.policy.in_play(a, union)) for a in self.client_sets]
        # the split is the counted clients' (a silent client's stale set must not set everyone's pulls); the
        # length lets any client pull its own set in play, so one that comes back fits in the phase
        own = max([n for n, counted in zip(sizes, self.counted, strict=True) if counted] or sizes)
        widest = max(sizes)
        n_global, n_local = self.policy.round_pulls(self.settings, phase, self.base_samples(phase), len(union), own)
        length = len(union) * n_global + widest * n_local
        # every node of a phase is new (a new depth): a client pulls the union's (global pulls) or its own
        points = len(union) if n_global > 0 else widest
        budget = self.settings.spec.max_evaluations
        schedule = self.settings.schedule
        limit = self.policy.max_phases(self.settings)  # a policy's own count of phases is a hard limit
        if (self.policy.phase_allowed(self.settings, phase) and length >= 1 and (limit is None or phase <= limit)
                and self.policy.phase_fits(self.settings, length, schedule.horizon - self.pulls)
                and (budget is None or self.points + points <= budget)):
            self.points += points
            self.plan = PhasePlan(phase, union, n_global, n_local, length)
            return PhaseInstruction(phase, union, n_global, n_local, self.parameters)
        self.done = True
        self.plan = None
        return FinishInstruction(self.completed, self.parameters)

    # -- first exchange: local means -> global means ----------------------------------
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
        """Average each node's local means (and the bound's statistics) over the valid reports that sampled it."""
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
        self.used = list(valid)
        self.explored = {int(report.client) for report in valid}
        self.require_quorum(plan.phase, "local-means", len(valid))
        statistics = pooled_statistics(plan.union, valid, self.settings.bound.statistics)
        return self._close_exploration(pooled_means(plan.union, valid), len(valid), observed_mean(valid),
                                       statistics, holders(plan.union, valid))

    def aggregate_sums(
        self, sums: np.ndarray, holders: np.ndarray, reporters: int,
        statistic_sums: Mapping[str, np.ndarray] | None = None, clients: Collection[int] = (),
    ) -> GlobalUpdate:
        """``aggregate`` from sums only (secure aggregation): the server never sees a client's means.

        ``sums[k]`` is the sum of the local means of node ``k`` over the ``reporters``
        clients that sampled it, ``holders[k]`` how many did, and ``statistic_sums[name][k]``
        the sum of their values of each statistic the run's bound declares; ``clients`` are the
        reporters' ids (the phase's explorers). An aggregate that does not fit the broadcast union is
        rejected as a whole (every reply lost).
        """
        plan = self.plan
        if plan is None:
            raise ProtocolError("aggregate called with no phase under way")
        statistic_sums = statistic_sums or {}
        names = self.settings.bound.statistics
        sums, holders = np.asarray(sums, dtype=float), np.asarray(holders, dtype=float)
        totals = {name: np.asarray(statistic_sums.get(name, np.zeros(0)), dtype=float) for name in names}
        parts = [sums, holders, *totals.values()]
        reason = None
        if any(part.shape != plan.union.shape for part in parts):
            reason = f"aggregate has {[part.size for part in parts]} values, expected {plan.union.size} each"
        elif not all(np.all(np.isfinite(part)) for part in parts):
            reason = "aggregate is not finite"
        elif np.any(holders < 0) or np.any(holders > reporters):
            reason = f"holder counts are not in [0, {reporters}]"
        self.explored = {int(client) for client in clients}
        if reason is not None:
            self.reject("aggregate", plan.phase, "local-means", reason)
            reporters = 0
            self.explored = set()
        self.require_quorum(plan.phase, "local-means", reporters)
        if reporters == 0:
            return self._close_exploration(np.full(plan.union.shape, np.nan), 0)

        def per_holder(total: np.ndarray) -> np.ndarray:
            mean: np.ndarray = np.divide(total, holders, out=np.full(plan.union.shape, np.nan), where=holders > 0)
            return mean

        statistics = {name: per_holder(total) for name, total in totals.items()}
        return self._close_exploration(per_holder(sums), reporters, math.nan, statistics, holders)

    def lose_sums(self, participants: int) -> GlobalUpdate:
        """The phase's local means were all lost (secure aggregation could not unmask their sum), while
        ``participants`` clients took part: the quorum counts them, and the phase goes on without global means."""
        plan = self.plan
        if plan is None:
            raise ProtocolError("lose_sums called with no phase under way")
        self.explored = set()
        self.require_quorum(plan.phase, "local-means", participants)
        return self._close_exploration(np.full(plan.union.shape, np.nan), 0)

    def _close_exploration(
        self, pooled: np.ndarray, usable: int, mean_reward: float = math.nan,
        statistics: Mapping[str, np.ndarray] | None = None, node_holders: np.ndarray | None = None,
    ) -> GlobalUpdate:
        """Design the next phase, let the policy eliminate with the global means' widths, and send the update.

        Statistics and holders are NaN and 0 where nothing usable arrived; they go out
        with the global means only if the bound declares statistics (its clients' widths need them).
        """
        plan = self.plan
        assert plan is not None
        settings, bound = self.settings, self.settings.bound
        nothing = np.full(plan.union.shape, np.nan)
        statistics = {name: (statistics or {}).get(name, nothing) for name in bound.statistics}
        node_holders = node_holders if node_holders is not None else np.zeros(plan.union.shape)
        self.design = bound.next_design(settings, self.design, statistics)
        min_count = plan.global_pulls if plan.global_pulls > 0 else plan.local_pulls
        widths = bound.global_widths(settings, plan.phase, statistics, node_holders, min_count)
        eliminated = self.policy.server_eliminated(settings, plan.phase, pooled, widths)
        failed = settings.num_clients - usable
        self.plan = replace(plan, eliminated=eliminated, failed_local_means=failed, mean_reward=mean_reward)
        sent_holders = node_holders if bound.statistics else None
        return GlobalUpdate(plan.phase, plan.union, pooled, plan.length, eliminated, self.parameters, statistics,
                            sent_holders)

    # -- second exchange: next active sets -------------------------------------------
    def collect(self, reports: list[ActiveSetReport]) -> None:
        """Form the next union from the clients' new active sets; close the phase."""
        plan = self.plan
        if plan is None or plan.eliminated is None:
            raise ProtocolError("collect called before aggregate")
        seen: set[int] = set()
        new_sets: list[np.ndarray | None] = [None] * self.settings.num_clients
        self.used = []
        for report in sorted(reports, key=lambda r: (str(type(r.client)), r.client)):
            reason = self.check_active_set(report, seen)
            if reason is None:
                seen.add(int(report.client))
                self.used.append(report)
                new_sets[int(report.client)] = np.asarray(report.node_ids, dtype=np.int64)  # as sent
                self.reported_phase[int(report.client)] = plan.phase
            else:
                self.reject(report.client, plan.phase, "active-set", reason)
        self.require_quorum(plan.phase, "active-set", len(seen))
        # no valid reply: every child of its previous set, a superset of what it kept (Policy.next_sets)
        self.client_sets = self.policy.next_sets(self.settings, plan.phase, new_sets, self.client_sets)
        if self.policy.counts_only_completed_rounds:  # a client that missed the round does not hold the union open
            self.counted = [m in seen and m in self.explored for m in range(self.settings.num_clients)]
        self.explored = set()
        next_union = self.union()
        self.completed = plan.phase
        self.pulls += plan.length
        self.history.append(
            {
                "phase": plan.phase,
                "depth": self.policy.depth(self.settings, plan.phase),
                "active_nodes": int(plan.union.size),
                "eliminated": int(plan.union.size - np.unique(self.policy.predecessors(next_union)).size),
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
        LOGGER.info("%s", self.policy.phase_line(self.history[-1]))
        self.plan = None

    # -- final exchange ----------------------------------------------------------------
    def finish(self, reports: list[FinishReport]) -> None:
        self.used = list(reports)
        for report in reports:
            self.final_nodes[int(report.client)] = int(report.node_id)
            if report.best_node_id is not None and report.best_mean is not None and report.best_pulls is not None:
                self.best_observed[int(report.client)] = (int(report.best_node_id), float(report.best_mean),
                                                          int(report.best_pulls))

    @property
    def failures(self) -> int:
        """Replies the server could not use (missing, late or rejected), over all phases."""
        return sum(row["failed_local_means"] + row["failed_active_sets"] for row in self.history)

    @property
    def communication_rounds(self) -> int:
        """Two exchanges per completed phase, plus the final one."""
        return 2 * self.completed + (1 if self.done else 0)
