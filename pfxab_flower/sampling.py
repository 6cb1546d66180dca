"""Where a client's pulls go: its own objective plus noise.

A client machine asks its environment for the *sum* of ``n`` rewards of a node
(exploration) or just plays a node ``n`` times (exploitation, whose rewards the
algorithm never uses). :class:`SimulatedEnvironment` is the simulation harness:
it evaluates the client's objective at cell centres, draws the noise exactly,
and keeps the client's *pull log* (segments of ``(node, count)``), from which
:mod:`pfxab_flower.accounting` computes regret exactly. The log never enters
a message of the algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from pfxab_flower.problems.federation import Federation


class Environment(Protocol):
    """What a client machine needs from the world."""

    def pull(self, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Pull node ``node_ids[i]`` ``counts[i]`` times in order; return each node's reward sum."""

    def play(self, node_id: int, count: int) -> None:
        """Pull one node ``count`` times; the rewards are not needed."""


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

    def __init__(self, federation: Federation, client: int, log: PullLog | None = None) -> None:
        self.federation = federation
        self.client = client
        self.partition = federation.partition
        self.log = log if log is not None else PullLog.empty()

    def pull(self, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        node_ids = np.asarray(node_ids, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        means = self.federation.evaluate(self.client, self.partition.midpoints(node_ids))
        sums = self.federation.noise.sample_sums(means, counts, rng)
        self.log.extend(node_ids, counts)
        return sums

    def play(self, node_id: int, count: int) -> None:
        self.log.extend(np.array([node_id]), np.array([count]))
