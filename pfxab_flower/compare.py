"""Side-by-side comparison: every algorithm on the same federation with the same seeds.

Why a module of its own: the paper's figures compare PF-XAB, Fed-PNE and PF-PNE
on one federation, and the comparison is only fair if every algorithm sees the
same objectives, the same noise seeds and the same regret (the personalised
regret at the experiment's ``alpha``). This module runs the grid
``algorithms x seeds`` with the in-process engine, keeps one row per run, and
summarises each algorithm by the mean and the sample standard deviation
(``ddof = 1``; undefined, NaN, for a single seed) over the seeds.

The federation (and its cached optimum, the one expensive step) is built once,
in this process, before any worker starts (workers are forked and inherit it).
Wall times are those of the runs only, after the federation and its optimum
are ready. Results are ordered by algorithm then seed whatever the number of
workers, and every number except the wall time is the same for the same seeds.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from pfxab_flower.config import RunConfig
from pfxab_flower.engine import run_config
from pfxab_flower.outputs import write_files_atomically
from pfxab_flower.parallel import local_runner, shared_federation
from pfxab_flower.problems.federation import Federation
from pfxab_flower.remote import JobRunner

#: The columns of one run's row, in order.
RUN_COLUMNS = (
    "algorithm", "seed", "problem", "alpha", "confidence", "clients", "horizon",
    "regret", "evaluations", "phases", "pulls_per_phase", "communication_rounds",
    "bytes_up", "bytes_down", "bytes_sent", "values_up", "values_down", "rejected_replies",
    "mean_reward_personalised", "mean_reward_global", "mean_reward_local", "wall_seconds",
)
#: What the summary table reports (mean and standard deviation over seeds).
METRICS = ("regret", "evaluations", "phases", "pulls_per_phase", "communication_rounds", "bytes_sent", "wall_seconds")
_LABELS = {
    "regret": "regret",
    "evaluations": "evaluations",
    "phases": "phases",
    "pulls_per_phase": "pulls per phase",
    "communication_rounds": "comm. rounds",
    "bytes_sent": "bytes sent (up+down)",
    "wall_seconds": "wall time (s)",
}
#: Files ``Comparison.write`` produces (written as one unit: all of them or none).
COMPARE_FILES = ("runs.csv", "runs.parquet", "summary.csv", "summary.parquet")


@dataclass(frozen=True)
class Comparison:
    """One row per run (``runs``) and one row per algorithm (``summary``)."""

    runs: pd.DataFrame
    summary: pd.DataFrame
    base: RunConfig
    seeds: tuple[int, ...]

    def write(self, out_dir: str | os.PathLike) -> Path:
        """Write the runs and the summary as CSV and Parquet, as the content of ``out_dir``, as one unit.

        An older comparison there is kept whole if writing fails and replaced whole otherwise.
        """
        files: dict[str, str | bytes] = {}
        for name, frame in (("runs", self.runs), ("summary", self.summary)):
            files[f"{name}.csv"] = frame.to_csv(index=False)
            files[f"{name}.parquet"] = frame.to_parquet(None, index=False)
        return write_files_atomically(out_dir, files)

    def table(self) -> str:
        """The summary as an aligned text table, headed by the federation and the seeds."""
        b = self.base
        runs = int(self.summary["runs"].max()) if len(self.summary) else 0
        header = (
            f"{b.problem}: M={b.clients} alpha={b.alpha} T={b.horizon} noise={b.noise}(sigma={b.noise_sigma}) "
            f"confidence={b.confidence} "
            f"seeds={format_seeds(self.seeds)} ({runs} runs per algorithm; mean ± sd over seeds)"
        )
        rows = [["algorithm", *(_LABELS[m] for m in METRICS)]]
        for record in self.summary.to_dict("records"):
            rows.append([record["algorithm"], *(_mean_sd(record, m) for m in METRICS)])
        widths = [max(len(row[j]) for row in rows) for j in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
        return "\n".join([header, *lines])


def _mean_sd(record: dict[str, Any], metric: str) -> str:
    mean, sd = record[f"{metric}_mean"], record[f"{metric}_std"]
    digits = "{:.3f}" if metric == "wall_seconds" else "{:.6g}"
    spread = digits.format(sd) if np.isfinite(sd) else "n/a"
    return f"{digits.format(mean)} ± {spread}"


def format_seeds(seeds: tuple[int, ...] | list[int]) -> str:
    """``0-9`` for a contiguous run of seeds, else the comma-separated list."""
    seeds = list(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(str(s) for s in seeds)


def run_row(federation: Federation, config: RunConfig) -> dict[str, Any]:
    """Run ``config`` on ``federation`` in process and keep the run's row."""
    result = run_config(config, federation)
    s = result.summary
    row = {name: s[name] for name in RUN_COLUMNS if name in s}
    row["bytes_sent"] = int(s["bytes_up"]) + int(s["bytes_down"])
    # each client's pulls per phase (the phase length), averaged over the phases the run reached
    row["pulls_per_phase"] = float(result.phases["phase_length"].mean()) if len(result.phases) else 0.0
    return {name: row[name] for name in RUN_COLUMNS}


def summarise(runs: pd.DataFrame, algorithms: list[str]) -> pd.DataFrame:
    """Per algorithm (in the given order): number of runs, mean and sample sd of each metric."""
    records = []
    for algorithm in algorithms:
        rows = runs[runs["algorithm"] == algorithm]
        record: dict[str, Any] = {"algorithm": algorithm, "runs": len(rows)}
        for metric in METRICS:
            values = rows[metric].astype(float)
            record[f"{metric}_mean"] = float(values.mean())
            record[f"{metric}_std"] = float(values.std(ddof=1)) if len(values) > 1 else float("nan")
        records.append(record)
    columns = ["algorithm", "runs", *(f"{m}_{k}" for m in METRICS for k in ("mean", "std"))]
    return pd.DataFrame(records, columns=columns)


def _run_row(config: RunConfig) -> dict[str, Any]:
    """One run on this process's federation (see :func:`pfxab_flower.parallel.shared_federation`)."""
    return run_row(shared_federation(config), config)


def compare(
    base: RunConfig,
    algorithms: list[str],
    seeds: list[int],
    workers: int = 1,
    progress: bool = True,
    runner: JobRunner | None = None,
) -> Comparison:
    """Run every algorithm with every seed on the federation ``base`` names.

    ``base.algorithm`` and ``base.seed`` are ignored; every other field is shared
    by all runs. ``progress`` shows a progress bar on stderr. ``runner`` runs the jobs
    (default: ``workers`` local processes; ``pfxab compare --executor ray`` passes a Ray cluster's).
    """
    configs = [base.replace(algorithm=a, seed=s) for a in algorithms for s in seeds]
    rows: list[dict[str, Any] | None] = [None] * len(configs)
    shared_federation(base).optimum(base.alpha)  # once, before workers fork: they inherit it
    errors: list[BaseException] = []
    with tqdm(total=len(configs), desc="pfxab compare", unit="run", file=sys.stderr, disable=not progress) as bar:

        def done(index: int, row: dict[str, Any] | None, error: BaseException | None) -> None:
            rows[index] = row
            if error is not None:
                errors.append(error)
            bar.update()

        (runner or local_runner(workers))(_run_row, [(config,) for config in configs], done)
    if errors:
        raise errors[0]
    runs = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    return Comparison(runs=runs, summary=summarise(runs, algorithms), base=base, seeds=tuple(seeds))
