"""The server's checks of every reply: why a reply cannot be used, as one line, or ``None``.

A reply that fails is logged, counted and left out, never averaged, so a bad client cannot move
the pooled means or the active sets of the others.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pfxab_flower.algorithms.messages import ActiveSetReport, FinishReport, LocalReport
from pfxab_flower.algorithms.phased.policy import Policy
from pfxab_flower.algorithms.phased.settings import Settings
from pfxab_flower.algorithms.phased.state import PhasePlan
from pfxab_flower.arms.partition import MAX_DEPTH


class ReplyChecks:
    """The reply checks of :class:`~pfxab_flower.algorithms.phased.server.ServerMachine`, over its state."""

    # the server state the checks read (set by ServerMachine)
    settings: Settings
    policy: Policy
    plan: PhasePlan | None  # the phase under way
    client_sets: list[np.ndarray]  # each client's active set as the server knows it
    reported_phase: list[int]  # the last phase whose active set each client sent
    explored: set[int]  # the clients whose local means the phase under way used

    def check_client_id(self, client: object) -> str | None:
        """Why ``client`` is not one of the run's client indices, or ``None``."""
        M = self.settings.num_clients
        if isinstance(client, bool) or not isinstance(client, int | np.integer) or not 0 <= client < M:
            return f"client id {client!r} is not in [0, {M})"
        return None

    # -- first exchange: local means -------------------------------------------------------
    def check_report(self, report: LocalReport, seen: set[int]) -> str | None:
        """Why a local report cannot be averaged, or ``None`` if it can."""
        plan = self.plan
        if plan is None:
            return "no phase is under way"
        if (reason := self.check_client_id(report.client)) is not None:
            return reason
        if report.client in seen:
            return f"client {report.client} replied twice"
        union = plan.union
        arrays = (np.asarray(report.node_ids), np.asarray(report.means), np.asarray(report.counts))
        if any(a.shape != union.shape for a in arrays):
            return f"reply has {[a.size for a in arrays]} values, expected {union.size} per array"
        node_ids, means, counts = arrays
        if not np.array_equal(node_ids, union):
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
        return self._check_statistics(report.statistics, counts)

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

    def _check_statistics(self, statistics: Mapping[str, np.ndarray], counts: np.ndarray) -> str | None:
        """Exactly the statistics the run's bound declares, one number per node, each as its bound allows."""
        bound = self.settings.bound
        unexpected = sorted(set(statistics) - set(bound.statistics))
        if unexpected:
            return f"statistics {unexpected} sent, but the run's confidence is {bound.name}"
        for name in bound.statistics:
            if name not in statistics:
                return f"no {name} sent, but the run's confidence is {bound.name}"
            values = np.asarray(statistics[name])
            if values.shape != counts.shape or not np.issubdtype(values.dtype, np.floating):
                return f"{name} values are not {counts.size} numbers"
            if (reason := bound.check_statistic(self.settings, name, values, counts)) is not None:
                return reason
        return None

    # -- second exchange: next active sets -------------------------------------------------
    def check_active_set(self, report: ActiveSetReport, seen: set[int]) -> str | None:
        if (reason := self.check_client_id(report.client)) is not None:
            return reason
        if report.client in seen:
            return f"client {report.client} replied twice"
        plan, held, ids = self.plan, self.client_sets[report.client], np.asarray(report.node_ids)
        reason = self.policy.check_next_set(self.settings, plan.phase if plan is not None else 0, int(report.client),
                                            held, ids)
        if reason is not None:
            return reason
        union = plan.union if plan is not None else held
        return self.policy.kept_problem(held, union, ids, int(report.client) in self.explored)

    # -- final exchange ----------------------------------------------------------------------
    def check_final(self, report: FinishReport) -> str | None:
        """Why a final report cannot be used, or ``None``: the node must be one the client can hold.

        A client exploits the best survivor of the last phase it completed, so its final
        node is an ancestor of its current active set, no shallower than the last phase
        whose active set it sent (the root only if it never sent one). A solo policy's client
        searched alone: the server has seen none of its sets, so any node of the partition may be its choice.
        """
        client = report.client
        if (reason := self.check_client_id(client)) is not None:
            return reason
        node = report.node_id
        if isinstance(node, bool) or not isinstance(node, int | np.integer) or not 1 <= node < 2**MAX_DEPTH:
            return f"final node {node!r} is not a node id of the partition"
        own = self.client_sets[int(client)]
        if not self.policy.solo and not self.policy.can_finish_on(own, int(node), self.reported_phase[int(client)]):
            return f"final node {node} is not one client {client} can hold (its active set descends elsewhere)"
        point = np.asarray(report.point)
        if point.ndim != 1 or point.size == 0 or not np.issubdtype(point.dtype, np.floating) or \
                not np.all(np.isfinite(point)):
            return "final point is not a non-empty vector of finite numbers"
        return self.check_best(report, point.size)

    def check_best(self, report: FinishReport, dimensions: int) -> str | None:
        """Why a final report's best observed point cannot be used, or ``None`` (all four parts, or none).

        Its node must be a node id, its point as long as the final point, its mean within the
        reward range and its pulls a whole number in ``[1, T]``.
        """
        parts = (report.best_node_id, report.best_point, report.best_mean, report.best_pulls)
        if all(part is None for part in parts):
            return None
        if any(part is None for part in parts):
            return "best observed point is incomplete (its node, point, mean and pulls come together)"
        node, pulls, mean = report.best_node_id, report.best_pulls, report.best_mean
        if isinstance(node, bool) or not isinstance(node, int | np.integer) or not 1 <= node < 2**MAX_DEPTH:
            return f"best observed node {node!r} is not a node id of the partition"
        point = np.asarray(report.best_point)
        if point.shape != (dimensions,) or not np.issubdtype(point.dtype, np.floating) or \
                not np.all(np.isfinite(point)):
            return f"best observed point is not a vector of {dimensions} finite numbers (the final point's length)"
        low, high = self.settings.reward_range
        if isinstance(mean, bool) or not isinstance(mean, float | np.floating) or not low <= mean <= high:
            return f"best observed mean {mean!r} is not a number in the reward range [{low:g}, {high:g}]"
        if isinstance(pulls, bool) or not isinstance(pulls, int | np.integer) or \
                not 1 <= pulls <= self.settings.horizon:
            return f"best observed pulls {pulls!r} are not a whole number in [1, {self.settings.horizon}]"
        return None
