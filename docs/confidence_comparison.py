"""The measured comparison of docs/comparison.md, "Hoeffding vs empirical-Bernstein confidence".

Runs the phased algorithms (the paper's three and ``pf-xab-adaptive``) x 2 confidence
options on Garland and DoubleSine at alpha 0.1, 0.5, 0.9 and on Landmine at alpha 0.4 with
the paper's noise and with ``--noise none``
(10 seeds, M = 10, T = 2e6, in-process engine, the project's defaults: nothing is set
per setting), writes every run to ``OUT/runs.parquet`` and prints the Markdown tables.

    python docs/confidence_comparison.py OUT [--workers 2]

Landmine needs its data file (``PFXAB_LANDMINE_DATA`` or the cache, see docs/landmine.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the clone's code: the numbers of its docs
if not Path(sys.path[0], "pfxab_flower", "__init__.py").is_file():
    print(f"{Path(__file__).name}: error: {sys.path[0]} is not a clone of pfxab-flower; allowed: run this script from "
          "the docs/ folder of a clone (it is not installed with the package)", file=sys.stderr)
    raise SystemExit(2)

import pandas as pd

from pfxab_flower.algorithms.registry import federated_names
from pfxab_flower.schema.catalogue import CONFIDENCES
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.storage.outputs import write_files_atomically
from pfxab_flower.studies.comparison import compare

SEEDS = list(range(10))
SETTINGS = [
    *({"problem": problem, "alpha": alpha} for problem in ("garland", "doublesine") for alpha in (0.1, 0.5, 0.9)),
    {"problem": "landmine", "alpha": 0.4},
    {"problem": "landmine", "alpha": 0.4, "noise": "none"},
]


def measure(workers: int) -> pd.DataFrame:
    """Every run of the comparison, one row each."""
    frames = []
    for setting in SETTINGS:
        for confidence in CONFIDENCES:
            base = RunConfig(num_clients=10, horizon=2_000_000, confidence=confidence, **setting)
            runs = compare(base, list(federated_names()), SEEDS, workers=workers, progress=False).runs
            frames.append(runs.assign(noise=base.noise))
            print(f"done: {setting} {confidence}", flush=True)
    return pd.concat(frames, ignore_index=True)


def tables(runs: pd.DataFrame) -> str:
    """The Markdown table (mean ± sd over seeds) and each setting's winner under each option."""
    keys = ["problem", "alpha", "noise"]
    lines = ["| problem | alpha | noise | algorithm | confidence | regret (mean ± sd) | phases | pulls per phase "
             "| evaluations |", "|---|---|---|---|---|---|---|---|---|"]
    winners = ["| problem | alpha | noise | winner (hoeffding) | winner (bernstein) "
               "| PF-XAB regret bernstein / hoeffding |", "|---|---|---|---|---|---|"]
    for (problem, alpha, noise), group in runs.groupby(keys, sort=False):
        mean = group.groupby(["confidence", "algorithm"])["regret"].mean()
        for algorithm in federated_names():
            for confidence in CONFIDENCES:
                rows = group[(group.algorithm == algorithm) & (group.confidence == confidence)]
                lines.append(
                    f"| {problem} | {alpha:g} | {noise} | {algorithm} | {confidence} "
                    f"| {rows.regret.mean():,.0f} ± {rows.regret.std(ddof=1):,.0f} | {rows.phases.mean():.1f} "
                    f"| {rows.pulls_per_phase.mean():,.0f} | {rows.evaluations.mean():,.0f} |")
        ratio = mean[("bernstein", "pf-xab")] / mean[("hoeffding", "pf-xab")]
        winners.append(f"| {problem} | {alpha:g} | {noise} | {mean['hoeffding'].idxmin()} "
                       f"| {mean['bernstein'].idxmin()} | {ratio:.3f} |")
    return "\n".join([*lines, "", *winners])


def parse_arguments(doc: str) -> argparse.Namespace:
    """``OUT [--workers N]``: the command line of this script and of ``confidence_horizons.py``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("out", type=Path, help="a new or empty directory for the runs and tables")
    parser.add_argument("--workers", type=int, default=2, help="local worker processes (default 2)")
    return parser.parse_args()


def main() -> None:
    args = parse_arguments(__doc__)
    runs = measure(args.workers)
    text = tables(runs)
    write_files_atomically(args.out, {"runs.parquet": runs.to_parquet(None, index=False), "tables.md": text})
    print(text)


if __name__ == "__main__":
    main()
