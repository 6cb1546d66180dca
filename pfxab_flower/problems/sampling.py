"""Where a client's pulls go: its own objective, as its federation's evaluation mode says.

:class:`SimulatedEnvironment` turns pulls into rewards (``simulated``, ``deterministic`` or
``stochastic``: docs/flower.md, "Evaluation modes"), keeps the client's pull log for exact regret
(never sent as part of the algorithm) and counts the objective's evaluations and wall time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, Self

import numpy as np

from pfxab_flower.problems.federation import Federation

#: Most rows one call of a stochastic objective is given (a phase's pulls beyond it come in several batches).
MAX_BATCH = 1 << 22


class Environment(Protocol):
    """What a client machine needs from the world."""

    def pull(self, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Pull node ``node_ids[i]`` ``counts[i]`` times in order; return each node's reward sum."""

    def pull_with_deviations(
        self, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """``pull``, and each node's sum of squared deviations of its rewards (``confidence = "bernstein"``)."""

    def play(self, node_id: int, count: int, rng: np.random.Generator | None = None) -> None:
        """Pull one node ``count`` times; the rewards are not needed (``rng``: the stream of this exploitation)."""

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
    """Client ``client`` of a :class:`Federation`: its objective at cell centres, its rewards, a pull log."""

    def __init__(
        self,
        federation: Federation,
        client: int,
        log: PullLog | None = None,
        evaluations: int = 0,
        memo: dict[int, float] | None = None,
        seconds: float = 0.0,
        observed: float = 0.0,
    ) -> None:
        self.federation = federation
        self.client = client
        self.partition = federation.partition
        self.log = log if log is not None else PullLog.empty()
        #: Rows passed to the objective so far (distinct points when a value never changes).
        self.evaluations = evaluations
        #: Node id -> value of the nodes already evaluated (kept only when a value never changes).
        self.memo = memo if memo is not None else {}
        #: Wall seconds spent in the objective.
        self.seconds = seconds
        #: Sum of every reward observed, exploitation included (real modes; exploration only when simulated).
        self.observed = observed

    def _evaluate(self, points: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """The objective at ``points``, counted and timed (an objective that asks for ``rng`` gets it)."""
        started = time.perf_counter()
        try:
            return self.federation.evaluate(self.client, points, rng)
        finally:
            self.seconds += time.perf_counter() - started
            self.evaluations += len(points)

    def means(self, node_ids: np.ndarray) -> np.ndarray:
        """The objective at the nodes' centres: evaluated, or remembered if a value never changes."""
        if not self.federation.cached:
            return self._evaluate(self.partition.midpoints(node_ids))
        new = np.array(sorted(set(node_ids.tolist()) - self.memo.keys()), dtype=np.int64)
        if new.size:
            values = self._evaluate(self.partition.midpoints(new))
            self.memo.update(zip(new.tolist(), values.tolist(), strict=True))
        return np.array([self.memo[k] for k in node_ids.tolist()], dtype=np.float64)

    def trials(
        self, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Stochastic: one real call per pull, rows grouped by node; each node's reward sum and sum of squares.

        The rows are made one batch at a time (a phase of 2e8 pulls made all 2e8 row indices first: 1.6 GB).
        Each call gets its own child of ``rng`` (``rng.spawn``: the stream of the client and phase, left
        undrawn), so an objective's own randomness is the same on every engine.
        """
        centres = self.partition.midpoints(node_ids)
        sums, squares = np.zeros(len(node_ids)), np.zeros(len(node_ids))
        for block in _batches(np.asarray(counts, dtype=np.int64), MAX_BATCH):
            values = self._evaluate(centres[block], rng.spawn(1)[0] if rng is not None else None)
            sums += np.bincount(block, weights=values, minlength=len(node_ids))
            squares += np.bincount(block, weights=values * values, minlength=len(node_ids))
        return sums, squares

    def rewards(
        self, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator, deviations: bool
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Each node's reward sum (and sum of squared deviations from its own mean if asked), logged."""
        node_ids = np.asarray(node_ids, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        spread = None
        if self.federation.evaluation == "stochastic":
            sums, squares = self.trials(node_ids, counts, rng)
            if deviations:
                with np.errstate(divide="ignore", invalid="ignore"):
                    spread = np.maximum(np.where(counts > 0, squares - sums * sums / np.maximum(counts, 1), 0.0), 0.0)
        elif deviations:
            sums, spread = self.federation.noise.sample_sums_and_deviations(self.means(node_ids), counts, rng)
        else:
            sums = self.federation.noise.sample_sums(self.means(node_ids), counts, rng)
        self.log.extend(node_ids, counts)
        self.observed += float(sums.sum())
        return sums, spread

    def pull(self, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.rewards(node_ids, counts, rng, deviations=False)[0]

    def pull_with_deviations(
        self, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        sums, spread = self.rewards(node_ids, counts, rng, deviations=True)
        return sums, spread  # type: ignore[return-value]

    def play(self, node_id: int, count: int, rng: np.random.Generator | None = None) -> None:
        """Exploit: simulated draws nothing; a real mode's rewards are observed (stochastic: ``count`` calls)."""
        nodes, counts = np.array([node_id], dtype=np.int64), np.array([count], dtype=np.int64)
        if self.federation.evaluation == "stochastic":
            self.observed += float(self.trials(nodes, counts, rng)[0].sum())
        elif self.federation.evaluation == "deterministic":
            self.observed += count * float(self.means(nodes)[0])
        self.log.extend(nodes, counts)

    def point(self, node_id: int) -> np.ndarray:
        midpoint: np.ndarray = self.partition.midpoints(np.array([node_id], dtype=np.int64))[0]
        return midpoint

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
            "objective-seconds": _bits(self.seconds),
            "observed-sum": _bits(self.observed),
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
        return cls(federation, client, log, evaluations, memo, _float(saved, "objective-seconds"),
                   _float(saved, "observed-sum"))


def _batches(counts: np.ndarray, size: int) -> Iterator[np.ndarray]:
    """``np.repeat(np.arange(len(counts)), counts)`` in consecutive pieces of ``size`` rows, never all of it at once."""
    ends = np.cumsum(counts)
    starts = ends - counts
    total = int(ends[-1]) if len(ends) else 0
    for start in range(0, total, size):
        stop = min(start + size, total)
        first, last = np.searchsorted(ends, start, side="right"), np.searchsorted(ends, stop - 1, side="right")
        rows = np.arange(first, last + 1)
        yield np.repeat(rows, np.minimum(ends[rows], stop) - np.maximum(starts[rows], start))


def _bits(value: float) -> np.ndarray:
    """One float as its int64 bit pattern (see :meth:`SimulatedEnvironment.export`)."""
    return np.array([value], dtype=np.float64).view(np.int64)


def _float(saved: Mapping[str, np.ndarray], key: str) -> float:
    """A float :func:`_bits` stored under ``key`` (0 if missing: saved by an earlier version; NaN if malformed)."""
    if key not in saved:
        return 0.0
    bits = np.ascontiguousarray(saved[key], dtype=np.int64).reshape(-1)
    return float(bits.view(np.float64)[0]) if bits.size == 1 else math.nan


def evaluation_counts(saved: Sequence[Mapping[str, np.ndarray] | None]) -> list[int] | None:
    """Each client's objective evaluations from what its environment exported (``None`` if any did not say)."""
    counts = []
    for data in saved:
        if data is None or "evaluations" not in data:
            return None
        counts.append(int(np.asarray(data["evaluations"]).reshape(-1)[0]))
    return counts


@dataclass(frozen=True)
class SiteCosts:
    """Each client's objective wall seconds and sum of observed rewards, from what its environment exported."""

    seconds: list[float]
    observed: list[float]


def site_costs(saved: Sequence[Mapping[str, np.ndarray] | None]) -> SiteCosts | None:
    """:class:`SiteCosts` of every client (``None`` if any exported nothing, or something that is no finite number:
    a client that never replied, or a harness reply that was tampered with; harness data is never judged)."""
    if any(data is None for data in saved):
        return None
    costs = SiteCosts([_float(data, "objective-seconds") for data in saved],  # type: ignore[arg-type]
                      [_float(data, "observed-sum") for data in saved])  # type: ignore[arg-type]
    return costs if np.isfinite(costs.seconds + costs.observed).all() else None
