"""``python -m benchmarks.ablations``: what each optimisation of the in-process engine buys.

Times item 1's run with one optimisation undone at a time (a temporary patch in this process),
checking that every variant gives the same final nodes. Variants and figures: docs/performance.md
("What each optimisation bought").
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext

import numpy as np

from pfxab_flower.arms import noise, sampling
from pfxab_flower.arms.partition import Partition
from pfxab_flower.problems import build_federation
from pfxab_flower.running.engine import run
from pfxab_flower.schema.run_config import RunConfig


def _noise_per_pull(
    counts: np.ndarray, rng: np.random.Generator, squares: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    totals = np.zeros(counts.shape)
    for i, n in enumerate(counts.tolist()):
        total = 0.0
        for _ in range(n):
            total += rng.random()
        totals[i] = total
    return totals, np.zeros(counts.shape)  # the ablations run hoeffding: no squares asked for


def _noise_per_node(
    counts: np.ndarray, rng: np.random.Generator, squares: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    totals = np.zeros(counts.shape)
    for i, n in enumerate(counts.tolist()):
        while n > 0:
            block = min(n, noise._CHUNK)
            totals[i] += rng.random(block).sum()
            n -= block
    return totals, np.zeros(counts.shape)


@contextmanager
def _patched(owner: object, name: str, value: object) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _partition_per_node(original: Callable) -> Callable:
    def midpoints(self: Partition, node_ids: np.ndarray) -> np.ndarray:
        return np.stack([original(self, np.array([node]))[0] for node in np.asarray(node_ids).reshape(-1)])

    return midpoints


def _evaluated_play(self: sampling.SimulatedEnvironment, node_id: int, count: int) -> None:
    rng = np.random.default_rng([node_id, count])
    self.pull(np.array([node_id]), np.array([count]), rng)


def variants() -> dict[str, Callable[[], object]]:
    return {
        "current code": nullcontext,
        "noise per pull": lambda: _patched(noise, "_uniform_sums", _noise_per_pull),
        "noise per node": lambda: _patched(noise, "_uniform_sums", _noise_per_node),
        "partition per node": lambda: _patched(Partition, "midpoints", _partition_per_node(Partition.midpoints)),
        "exploitation evaluated": lambda: _patched(sampling.SimulatedEnvironment, "play", _evaluated_play),
    }


CASES = ((10, 200_000), (10, 2_000_000), (1000, 2_000_000))  # (clients, horizon)


def measure(cases: tuple[tuple[int, int], ...] = CASES, repeats: int = 3) -> list[dict]:
    rows, reference = [], {}
    for clients, horizon in cases:
        federation = build_federation(RunConfig(problem="garland", num_clients=clients))
        federation.optimum(0.5)  # computed once, outside the timing
        for name, patch in variants().items():
            if name == "noise per pull" and clients > 10:
                continue  # ~1.7e9 Python steps
            times, nodes = [], None
            for _ in range(1 if name == "noise per pull" else repeats):
                with patch():
                    started = time.perf_counter()
                    result = run(federation, algorithm="pf-xab", alpha=0.5, horizon=horizon, seed=0)
                    times.append(time.perf_counter() - started)
                nodes = result.summary["final_nodes"]
            same = nodes == reference.setdefault((clients, horizon), nodes)
            rows.append({"variant": name, "num_clients": clients, "horizon": horizon,
                         "wall_seconds": statistics.median(times), "same_result": same})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


if __name__ == "__main__":
    print(json.dumps(measure()))
