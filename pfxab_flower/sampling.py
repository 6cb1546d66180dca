"""Where a client's pulls go: its own objective plus noise.

A client machine asks its environment for the *sum* of ``n`` rewards of a node
(exploration) or just plays a node ``n`` times (exploitation, whose rewards the
algorithm never uses). :class:`SimulatedEnvironment` is the simulation harness:
it evaluates the client's objective at cell centres, draws the noise exactly,
and keeps the client's *pull log* (segments of ``(node, count)``), from which
:mod:`pfxab_flower.accounting` computes regret exactly. The log never enters
a message of the algorithm.

It also counts the client's *evaluations*: the points it passed to its
objective. A practitioner pays per training run, not per pull, so that is the
cost of a tuning run. With a deterministic reward (noise ``none``) a value
never changes, so the environment keeps each evaluated node's value and calls
the objective once per distinct point.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, Self

import numpy as np

from pfxab_flower.problems.federation import Federation


class Environment(Protocol):
    """What a client machine needs from the world."""

    def pull(self, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Pull node ``node_ids[i]`` ``counts[i]`` times in order; return each node's reward sum."""

    def pull_with_deviations(
        self, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """``pull``, and each node's sum of squared deviations of its rewards (``confidence = "bernstein"``)."""

    def play(self, node_id: int, count: int) -> None:
        """Pull one node ``count`` times; the rewards are not needed."""

    def point(self, node_id: int) -> np.ndarray:
        """The centre of node ``node_id``'s cell, in the domain's units (a client's recommendation)."""

    def export(self) -> dict[str, np.ndarray]:
        """What the client keeps between messages (its pull log, ...), as named arrays."""


@dataclass
class PullLog:
    """A client's pulls in order, as segments: ``counts[i]`` pulls of ``node_ids[i]``."""

    node_ids: np.ndarray
    counts: np.ndarray

    @classmethod
    def empty(cls) -> PullLog:
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))

    def extend(self, node_ids: np.ndarray, counts: np.ndarray) -> None:
        keep = np.asarray(counts) > 0
        self.node_ids = np.concatenate([self.node_ids, np.asarray(node_ids, dtype=np.int64)[keep]])
        self.counts = np.concatenate([self.counts, np.asarray(counts, dtype=np.int64)[keep]])

    @property
    def total(self) -> int:
        return int(self.counts.sum())


class SimulatedEnvironment:
    """Client ``client`` of a :class:`Federation`: objective at cell centres + exact noise + a pull log."""

    def __init__(
        self,
        federation: Federation,
        client: int,
        log: PullLog | None = None,
        evaluations: int = 0,
        memo: dict[int, float] | None = None,
    ) -> None:
        self.federation = federation
        self.client = client
        self.partition = federation.partition
        self.log = log if log is not None else PullLog.empty()
        #: Points passed to the objective so far (distinct points when the reward is deterministic).
        self.evaluations = evaluations
        #: Node id -> value of the nodes already evaluated (kept only for a deterministic reward).
        self.memo = memo if memo is not None else {}

    def means(self, node_ids: np.ndarray) -> np.ndarray:
        """The objective at the nodes' centres: evaluated (and counted), or remembered if deterministic."""
        if not self.federation.noise.deterministic:
            self.evaluations += len(node_ids)
            return self.federation.evaluate(self.client, self.partition.midpoints(node_ids))
        new = np.array(sorted(set(node_ids.tolist()) - self.memo.keys()), dtype=np.int64)
        if new.size:
            values = self.federation.evaluate(self.client, self.partition.midpoints(new))
            self.memo.update(zip(new.tolist(), values.tolist(), strict=True))
            self.evaluations += int(new.size)
        return np.array([self.memo[k] for k in node_ids.tolist()], dtype=np.float64)

    def pull(self, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        node_ids = np.asarray(node_ids, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        means = self.means(node_ids)
        sums = self.federation.noise.sample_sums(means, counts, rng)
        self.log.extend(node_ids, counts)
        return sums

    def pull_with_deviations(
        self, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        node_ids = np.asarray(node_ids, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        means = self.means(node_ids)
        sums, deviations = self.federation.noise.sample_sums_and_deviations(means, counts, rng)
        self.log.extend(node_ids, counts)
        return sums, deviations

    def play(self, node_id: int, count: int) -> None:
        self.log.extend(np.array([node_id]), np.array([count]))

    def point(self, node_id: int) -> np.ndarray:
        return self.partition.midpoints(np.array([node_id], dtype=np.int64))[0]

    def export(self) -> dict[str, np.ndarray]:
        nodes = np.fromiter(self.memo.keys(), dtype=np.int64, count=len(self.memo))
        # float64 bit patterns as int64: every store and the harness wire keep int64 arrays exactly
        values = np.fromiter(self.memo.values(), dtype=np.float64, count=len(self.memo)).view(np.int64)
        return {
            "pull-nodes": self.log.node_ids,
            "pull-counts": self.log.counts,
            "evaluations": np.array([self.evaluations], dtype=np.int64),
            "memo-nodes": nodes,
            "memo-values": values,
        }

    @classmethod
    def restored(cls, federation: Federation, client: int, saved: Mapping[str, np.ndarray] | None) -> Self:
        """The environment a client kept (:meth:`export`), or a fresh one if it kept nothing."""
        if not saved:
            return cls(federation, client)
        log = PullLog(np.asarray(saved["pull-nodes"], dtype=np.int64), np.asarray(saved["pull-counts"], dtype=np.int64))
        evaluations = int(np.asarray(saved.get("evaluations", [0])).reshape(-1)[0])
        nodes, values = saved.get("memo-nodes", ()), saved.get("memo-values", ())
        values = np.ascontiguousarray(values, dtype=np.int64).view(np.float64)  # see export
        memo = dict(zip(np.asarray(nodes, dtype=np.int64).tolist(), values.tolist(), strict=True))
        return cls(federation, client, log, evaluations, memo)


def evaluation_counts(saved: Sequence[Mapping[str, np.ndarray] | None]) -> list[int] | None:
    """Each client's objective evaluations from what its environment exported (``None`` if any did not say)."""
    counts = []
    for data in saved:
        if data is None or "evaluations" not in data:
            return None
        counts.append(int(np.asarray(data["evaluations"]).reshape(-1)[0]))
    return counts
