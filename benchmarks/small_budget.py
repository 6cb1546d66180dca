"""Section 8 of ``python -m benchmarks``: the small-budget comparison a user with an expensive black box runs.

The real ``pfxab compare --problem garland-shifted --num-clients 10 --horizon 200 --seeds 0-2`` of the model-based
algorithms, per-site Optuna and random search, in a fresh process, timed from outside; each algorithm's share
is the sum of its runs' wall time (``runs.csv``). An algorithm of the list that is not registered or whose
extra is not installed is left out and named.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from pfxab_flower.algorithms.registry import available_names

#: The comparison of issue 45's benchmark, in its order.
ALGORITHMS = ("pf-smbo", "pf-sh", "optuna-tpe", "optuna-tpe-fed", "random-search")
FLAGS = ["--problem", "garland-shifted", "--num-clients", "10", "--horizon", "200"]


def section(number: str, quick: bool, run_case: Callable, progress: Callable[[str], None]) -> list[dict]:
    """One timed ``pfxab compare`` (seeds 0-2; ``--quick``: seed 0), and each algorithm's seconds in it."""
    chosen = [a for a in ALGORITHMS if a in available_names()]
    missing = [a for a in ALGORITHMS if a not in chosen]
    seeds = "0" if quick else "0-2"
    progress(f"{number}. small-budget compare: garland-shifted M=10 T=200 seeds {seeds}, {','.join(chosen)}"
             + (f" (not here: {','.join(missing)})" if missing else ""))
    with tempfile.TemporaryDirectory(prefix="pfxab-bench-compare-") as root:
        out = Path(root) / "cmp"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pfxab_flower.simulations.cli.main", "compare", *FLAGS, "--seeds", seeds,
                        "--algorithms", ",".join(chosen), "--no-progress", "--out", str(out)],
                       capture_output=True, text=True, check=True)
        wall = time.perf_counter() - started
        runs = pd.read_csv(out / "runs.csv")
    shares = runs.groupby("algorithm")["wall_seconds"].sum()
    return [{"item": number, "case": f"compare garland-shifted M=10 T=200 seeds {seeds}", "wall_seconds": wall,
             **{f"seconds_{a}": float(shares[a]) for a in chosen}, "not_run": ",".join(missing),
             "target": "< 120 s (2 cores)"}]
