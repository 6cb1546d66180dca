"""What a client observed in its search: its own rewards per point, and the best of them (its best observed point).

Every reward a client draws for its search (a phase's pulls, a baseline's own search) is kept per node
as a sum and a count in its :class:`~pfxab_flower.algorithms.phased.state.ClientState`; exploitation draws
none. The best observed point is the node of highest mean (docs/algorithms/index.md, "What a run recommends").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pfxab_flower.algorithms.phased.state import ClientState
    from pfxab_flower.problems.sampling import Environment


@dataclass(frozen=True)
class BestObserved:
    """The node of highest mean of a client's own rewards, that mean, and the pulls it rests on."""

    node_id: int
    mean: float
    pulls: int


def best_of(nodes: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> BestObserved | None:
    """The highest mean; a tie goes to the node with more pulls, then the smaller id (``None``: nothing observed)."""
    if nodes.size == 0:
        return None
    means = sums / counts
    best = np.lexsort((nodes, -counts, -means))[0]
    return BestObserved(int(nodes[best]), float(means[best]), int(counts[best]))


def merged(nodes: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-node sums and counts with each node once (sorted): a node listed again adds its rewards to its own."""
    unique, index = np.unique(np.asarray(nodes, dtype=np.int64), return_inverse=True)
    return (unique, np.bincount(index, weights=sums, minlength=len(unique)),
            np.bincount(index, weights=counts, minlength=len(unique)).astype(np.int64))


class Observing:
    """An :class:`~pfxab_flower.problems.sampling.Environment` that passes every call on and notes the rewards of
    each pull (sums and counts per node; ``play``, exploitation, draws none)."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def _note(self, node_ids: np.ndarray, counts: np.ndarray, sums: np.ndarray) -> None:
        counts = np.asarray(counts, dtype=np.int64)
        pulled = counts > 0
        self._parts.append((np.asarray(node_ids, dtype=np.int64)[pulled], np.asarray(sums, dtype=float)[pulled],
                            counts[pulled]))

    def pull(self, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        sums = self.env.pull(node_ids, counts, rng)
        self._note(node_ids, counts, sums)
        return sums

    def pull_with_deviations(
        self, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        counts = np.asarray(counts, dtype=np.int64).copy()  # the environment may be given them to change
        sums, deviations = self.env.pull_with_deviations(node_ids, counts.copy(), rng)
        self._note(node_ids, counts, sums)
        return sums, deviations

    def play(self, node_id: int, count: int, rng: np.random.Generator | None = None) -> None:
        self.env.play(node_id, count, rng)

    def point(self, node_id: int) -> np.ndarray:
        return self.env.point(node_id)

    def export(self) -> dict[str, np.ndarray]:
        return self.env.export()

    def record(self, state: ClientState) -> None:
        """Add what was noted to ``state``'s per-node sums and counts (a node pulled again adds to its own)."""
        if not self._parts:
            return
        state.observed_nodes, state.observed_sums, state.observed_counts = merged(
            np.concatenate([state.observed_nodes, *(part[0] for part in self._parts)]),
            np.concatenate([state.observed_sums, *(part[1] for part in self._parts)]),
            np.concatenate([state.observed_counts, *(part[2] for part in self._parts)]))
        self._parts = []
