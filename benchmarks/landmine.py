"""Section 5 of ``python -m benchmarks``: the paper's landmine run as a new user meets it, cold and warm.

The real ``pfxab run --problem landmine`` command in a fresh process, fetching the data from a local
HTTP server: on an empty cache (cold), again (warm) and, unless ``--quick``, without the shipped
table (live, equal regret to cold). Skipped with a reason when ``PFXAB_LANDMINE_DATA`` is not set.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.landmine_files import GIVEN_REAL_FILE, serve

CONFIG = {"problem": "landmine", "algorithm": "pf-xab", "num_clients": 10, "alpha": 0.4, "horizon": 2_000_000,
          "seed": 0}
QUICK = {**CONFIG, "num_clients": 3, "fields": "0,15,27", "horizon": 20_000}


def landmine_case(spec: dict) -> dict:
    """One ``pfxab run ... --json`` in a fresh interpreter, timed from outside."""
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in spec["config"].items()]
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pfxab_flower.simulations.cli.main", "run", *flags, "--json"],
                          capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    summary = json.loads(proc.stdout)
    return {
        "wall_seconds": wall,
        "summary_wall_seconds": summary["wall_seconds"],
        "setup_seconds": summary.get("setup_seconds"),
        "phases": summary["phases"],
        "regret": summary["regret"],
        "evaluations": summary["evaluations"],
        "optimum_method": summary["optimum_method"],
        "stderr": proc.stderr.strip().splitlines()[-3:],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0,
    }


def section(number: str, quick: bool, run_case: Callable, progress: Callable[[str], None]) -> list[dict]:
    """Cold, warm (and live) runs, each on a fresh cache directory removed afterwards."""
    real = Path(GIVEN_REAL_FILE).expanduser()
    if not GIVEN_REAL_FILE or not real.is_file():
        progress(f"5. skipped: the real landmine data is not given (PFXAB_LANDMINE_DATA={GIVEN_REAL_FILE!r})")
        return []
    config = QUICK if quick else CONFIG
    label = f"landmine M={config['num_clients']} T={config['horizon']:.0e}"
    cases = [("cold", "<= 15 s", {}), ("warm", "<= 10 s", {})]
    if not quick:
        cases.append(("live", "= cold regret", {"PFXAB_LANDMINE_TABLE": "none"}))
    rows = []
    with serve(real.parent) as base, tempfile.TemporaryDirectory(prefix="pfxab-bench-cache-") as root:
        env = {"PFXAB_LANDMINE_URL": f"{base}/{real.name}", "PFXAB_LANDMINE_DATA": ""}
        for kind, target, extra in cases:
            cache = f"{root}/{'live' if kind == 'live' else 'shared'}"
            progress(f"5. {label}, {kind}" + (" (minutes: every SVM is fit)" if kind == "live" else ""))
            figures = run_case({"kind": "landmine", "config": config}, module="benchmarks.landmine",
                               env={**env, "PFXAB_CACHE_DIR": cache, **extra}, timeout=3600)
            rows.append({"item": number, "case": f"{label} {kind}", **figures, "target": target})
    return rows


if __name__ == "__main__":
    print(json.dumps(landmine_case(json.loads(sys.argv[1]))))
