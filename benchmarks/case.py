"""One benchmark case, run in a fresh process so that its peak memory is its own.

Usage: ``python -m benchmarks.case '<json>'``; prints one JSON object.
The JSON names a ``kind`` (``inprocess``, ``plain``) and the run's parameters.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time

from pfxab_flower.problems import build_federation
from pfxab_flower.running.engine import run
from pfxab_flower.schema.run_config import RunConfig


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def inprocess(spec: dict) -> dict:
    """Median wall time of ``repeats`` in-process runs (the optimum computed once, outside the timing)."""
    config = RunConfig.from_mapping(spec["config"])
    federation = build_federation(config)
    started = time.perf_counter()
    federation.optimum(config.alpha)
    optimum_seconds = time.perf_counter() - started
    times, result = [], None
    for i in range(spec.get("repeats", 1)):
        started = time.perf_counter()
        result = run(
            federation, algorithm=config.algorithm, alpha=config.alpha, horizon=config.horizon,
            seed=config.seed + i, nu1=config.nu1, rho=config.rho,
        )
        times.append(time.perf_counter() - started)
    pulls = config.num_clients * config.horizon
    wall = statistics.median(times)
    return {
        "wall_seconds": wall,
        "optimum_seconds": optimum_seconds,
        "ns_per_pull": wall / pulls * 1e9,
        "phases": result.summary["phases"],
        "rounds": result.summary["communication_rounds"],
        "peak_rss_mib": _peak_rss_mib(),
    }


def plain(spec: dict) -> dict:
    """The per-pull reference (:mod:`benchmarks.reference`) on a smaller horizon."""
    from benchmarks.reference import plain_pfxab

    config = RunConfig.from_mapping(spec["config"])
    federation = build_federation(config)
    started = time.perf_counter()
    plain_pfxab(federation, config.alpha, config.horizon, seed=config.seed)
    wall = time.perf_counter() - started
    return {
        "wall_seconds": wall,
        "ns_per_pull": wall / (config.num_clients * config.horizon) * 1e9,
        "peak_rss_mib": _peak_rss_mib(),
    }


KINDS = {"inprocess": inprocess, "plain": plain}

if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    print(json.dumps(KINDS[spec["kind"]](spec)))
