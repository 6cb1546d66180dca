"""Section 5 of ``python -m benchmarks``: the landmine federation (M = 10, T = 2e6), cold and warm cache.

Each run is ``pfxab run --problem landmine`` in a fresh process (federation, SVM fits,
optimum, algorithm, exact regret: all of it timed). *Cold* uses a new, empty
``PFXAB_CACHE_DIR`` (every SVM fit is made, the optimum grid included); *warm* runs
again on the cache the cold run filled, as every later run on this machine does.
``--quick`` uses 3 fields and T = 2e4. Skipped, with the reason printed, when the data
file is absent.

``python -m benchmarks.landmine '<json>'`` runs one case and prints its figures.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable

CONFIG = {"problem": "landmine", "algorithm": "pf-xab", "clients": 10, "alpha": 0.4, "horizon": 2_000_000, "seed": 0}
QUICK = {**CONFIG, "clients": 3, "fields": "0,15,27", "horizon": 20_000}


def landmine_case(spec: dict) -> dict:
    """One full landmine run in this (fresh) process, timed from the federation build to the scored result."""
    started = time.perf_counter()
    from pfxab_flower.config import RunConfig
    from pfxab_flower.engine import run_config

    config = RunConfig.from_mapping(spec["config"])
    result = run_config(config)
    return {
        "wall_seconds": time.perf_counter() - started,
        "phases": result.summary["phases"],
        "rounds": result.summary["communication_rounds"],
        "regret": result.summary["regret"],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def data_problem() -> str | None:
    """Why the landmine data cannot be used here (``None`` if it can)."""
    from pfxab_flower.errors import ConfigError
    from pfxab_flower.problems.landmine_data import resolve_path

    try:
        resolve_path()
    except ConfigError as exc:
        return str(exc)
    return None


def section(number: str, quick: bool, run_case: Callable, progress: Callable[[str], None]) -> list[dict]:
    """A cold and a warm run on one fresh cache directory (removed afterwards)."""
    problem = data_problem()
    if problem is not None:
        progress(f"5. skipped: the landmine data is absent ({problem})")
        return []
    config = QUICK if quick else CONFIG
    label = f"landmine M={config['clients']} T={config['horizon']:.0e}"
    rows = []
    with tempfile.TemporaryDirectory(prefix="pfxab-bench-cache-") as cache:
        for kind, target in (("cold", "(fills the cache)"), ("warm", "<= 10 s")):
            note = " (minutes: every SVM fit is made)" if kind == "cold" else ""
            progress(f"5. {label}, {kind} cache{note}")
            figures = run_case({"kind": "landmine", "config": config}, module="benchmarks.landmine",
                               env={"PFXAB_CACHE_DIR": cache}, timeout=3600)
            rows.append({"item": number, "case": f"{label} {kind} cache", **figures, "target": target})
    return rows


if __name__ == "__main__":
    print(json.dumps(landmine_case(json.loads(sys.argv[1]))))
