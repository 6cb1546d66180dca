"""Run every configuration of an experiment grid, resumably, and consolidate tidy tables.

Layout of a sweep directory ``DIR``::

    DIR/config.toml            copy of the experiment config
    DIR/sweep.json             engine, machine and timing of every invocation
    DIR/runs/<run-id>/...      one finished run each (``summary.json`` written last)
    DIR/runs.parquet           one row per run (config, regret, rewards, communication, references)
    DIR/curves.parquet         cumulative regret of every run on a shared time grid (long format)

A run is complete when its ``summary.json`` exists; every file is written to a
temporary name and renamed, so an interrupted sweep (Ctrl-C, crash, power cut)
leaves at worst an incomplete run directory, which the next invocation removes
and redoes. Runs are independent and deterministic in their seed, so running
them in any order or in parallel gives the same tables.

The flower engine is imported only when asked for (the core never imports flwr),
and runs serially: one Ray instance at a time.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pfxab_flower.config import ENGINES, RunConfig
from pfxab_flower.errors import ConfigError
from pfxab_flower.parallel import federation_key, run_in_processes, shared_federation
from pfxab_flower.results import RunResult, write_files_atomically
from pfxab_flower.simulations.experiment import Experiment, load_experiment, run_id

#: Columns of runs.parquet taken from each run's summary.json (besides the config fields).
SUMMARY_COLUMNS = (
    "engine", "regret", "mean_reward_personalised", "mean_reward_global", "mean_reward_local",
    "phases", "communication_rounds", "values_down", "values_up", "bytes_down", "bytes_up",
    "rejected_replies", "optimum_estimated", "wall_seconds",
)
#: Reference values of the federation, stored per run (see :func:`references`).
REFERENCE_COLUMNS = ("best_local", "best_global", "best_personalised", "oracle_local", "oracle_global")
CONFIG_COLUMNS = tuple(RunConfig.__dataclass_fields__)


def time_grid(horizon: int, points: int = 200) -> np.ndarray:
    """The shared time grid of curves.parquet: ``points`` log-spaced times from 1 to T, plus 0.

    Log spacing keeps the early phases visible on a log axis; the grid is made
    denser with ``points // 2`` evenly spaced times so that a linear axis (the
    paper's) is drawn faithfully too. Times are integers, where the exact curve is known.
    """
    log = np.geomspace(1, horizon, points)
    linear = np.linspace(0, horizon, points // 2 + 1)
    return np.unique(np.rint(np.concatenate([[0], log, linear])).astype(np.int64))


def references(config: RunConfig) -> dict[str, float]:
    """Reference values of the run's federation (noise-free, per step and client).

    ``best_local`` = mean over clients of ``max mu_m``; ``best_global`` = ``max mu``;
    ``best_personalised`` = mean over clients of ``max (alpha mu_m + (1 - alpha) mu)``;
    ``oracle_local`` / ``oracle_global`` = the mean local / global reward of a client
    that plays its personalised optimum for this alpha (what a perfect learner earns).
    """
    federation = shared_federation(config)
    personalised = federation.optimum(config.alpha)
    local = federation.local_values(personalised.points)  # (M, M): mu_k at client m's optimum
    return {
        "best_local": float(federation.optimum(1.0).values.mean()),
        "best_global": float(federation.optimum(0.0).values.max()),
        "best_personalised": float(personalised.values.mean()),
        "oracle_local": float(np.diag(local).mean()),
        "oracle_global": float(local.mean()),
    }


def run_one(config: RunConfig, engine: str) -> RunResult:
    """One run with the chosen engine (Flower imported only here, only when asked for)."""
    if engine == "flower":
        from pfxab_flower.simulations.run_flower import run_flower_simulation

        return run_flower_simulation(config)
    from pfxab_flower.engine import run_config

    return run_config(config, federation=shared_federation(config))  # optima computed once per process


def execute(config: RunConfig, run_dir: str, engine: str, curve_points: int) -> float:
    """Run one config and write it to ``run_dir`` (``summary.json`` last); returns its wall time.

    A leftover incomplete directory (temp files of an interrupted write) is removed first.
    """
    shutil.rmtree(run_dir, ignore_errors=True)
    result = run_one(config, engine)
    grid = time_grid(config.horizon, curve_points)
    write_files_atomically(run_dir, {
        "grid_curve.csv": result.curve_at(grid).to_csv(index=False),
        "references.json": json.dumps(references(config), indent=2) + "\n",
        "config.json": json.dumps(config.to_dict(), indent=2) + "\n",
    })
    result.write(run_dir)
    return float(result.summary["wall_seconds"])


@dataclass
class SweepOutcome:
    """What one invocation did."""

    total: int
    skipped: int
    executed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    interrupted: bool = False
    seconds: float = 0.0


def is_complete(run_dir: Path) -> bool:
    return (run_dir / "summary.json").is_file()


def run_sweep(
    experiment: Experiment,
    out: Path,
    workers: int = 1,
    engine: str = "inprocess",
    progress: bool = True,
    on_start: Callable[[int, int], None] | None = None,
) -> SweepOutcome:
    """Run the runs of ``experiment`` not yet complete in ``out``; consolidate when all are.

    ``on_start(pending, total)`` is called before any work (for a message).
    Ctrl-C drops the queued runs, stops the running ones (their directories stay
    incomplete and are redone next time) and returns with ``interrupted`` set.
    """
    if engine not in ENGINES:
        raise ConfigError(f"engine={engine!r} is invalid; allowed: {', '.join(ENGINES)}")
    runs_dir = out / "runs"
    pending = [c for c in experiment.configs if not is_complete(runs_dir / run_id(c))]
    outcome = SweepOutcome(total=len(experiment.configs), skipped=len(experiment.configs) - len(pending))
    if on_start:
        on_start(len(pending), outcome.total)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if pending:
        from tqdm import tqdm

        bar = None
        try:
            prepare(pending)
            bar = tqdm(total=len(pending), desc=experiment.name, unit="run", file=sys.stderr, disable=not progress)
            jobs = [(c, str(runs_dir / run_id(c)), engine, experiment.curve_points) for c in pending]

            def done(index: int, _: object, error: BaseException | None) -> None:
                if error is None:
                    outcome.executed += 1
                else:  # one failing run must not lose the others
                    outcome.failures.append((Path(jobs[index][1]).name, f"{type(error).__name__}: {error}"))
                bar.update()

            run_in_processes(execute, jobs, workers, done)
        except KeyboardInterrupt:
            outcome.interrupted = True
        finally:
            if bar is not None:
                bar.close()
    outcome.seconds = time.perf_counter() - started
    _record_invocation(out, experiment, engine, workers, outcome)
    if not outcome.interrupted and not outcome.failures and (outcome.executed or not _tables_exist(out)):
        consolidate(experiment, out)
    return outcome


def prepare(configs: Iterable[RunConfig]) -> None:
    """Compute each federation's reference optima once, in this process, before any worker starts.

    Workers forked from this process (the default on Linux) inherit the cached
    federations, so an expensive optimum (landmine: thousands of SVM fits on a cold
    cache) is computed once rather than by every worker at the same time; the
    federation's own disk cache serves the runs' optima afterwards.
    """
    seen: set[tuple[RunConfig, float]] = set()
    for config in configs:
        key = (federation_key(config), config.alpha)
        if key not in seen:
            seen.add(key)
            references(config)


def _tables_exist(out: Path) -> bool:
    return (out / "runs.parquet").is_file() and (out / "curves.parquet").is_file()


def machine() -> dict[str, Any]:
    """Where the sweep ran (for the results page)."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu_model": model, "cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


def _record_invocation(out: Path, experiment: Experiment, engine: str, workers: int, outcome: SweepOutcome) -> None:
    path = out / "sweep.json"
    try:
        history = json.loads(path.read_text())["invocations"]
    except (OSError, ValueError, KeyError):
        history = []
    history.append({
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "engine": engine,
        "workers": workers,
        "runs_total": outcome.total,
        "runs_skipped": outcome.skipped,
        "runs_executed": outcome.executed,
        "runs_failed": len(outcome.failures),
        "interrupted": outcome.interrupted,
        "wall_seconds": round(outcome.seconds, 3),
    })
    record = {"experiment": experiment.name, "kind": experiment.kind, "machine": machine(), "invocations": history}
    write_files_atomically(out, {"sweep.json": json.dumps(record, indent=2) + "\n"})


def consolidate(experiment: Experiment, out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Build runs.parquet and curves.parquet from the (complete) run directories of the grid."""
    rows, curves = [], []
    for config in experiment.configs:
        rid = run_id(config)
        run_dir = out / "runs" / rid
        summary = json.loads((run_dir / "summary.json").read_text())
        refs = json.loads((run_dir / "references.json").read_text())
        row = {"run_id": rid, **config.to_dict()}
        row.update({k: summary[k] for k in SUMMARY_COLUMNS})
        row.update({k: refs[k] for k in REFERENCE_COLUMNS})
        rows.append(row)
        curve = pd.read_csv(run_dir / "grid_curve.csv")
        curves.append(curve.assign(**{"run_id": rid, **config.to_dict()}))
    runs = pd.DataFrame(rows)
    curve_frame = pd.concat(curves, ignore_index=True)
    curve_frame = curve_frame[["run_id", *CONFIG_COLUMNS, "t", "regret"]]
    write_parquet_atomically(runs, out / "runs.parquet")
    write_parquet_atomically(curve_frame, out / "curves.parquet")
    return runs, curve_frame


def write_parquet_atomically(frame: pd.DataFrame, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def copy_config(config_path: Path, out: Path) -> None:
    """Keep the exact config next to its results (plot and report read it)."""
    out.mkdir(parents=True, exist_ok=True)
    write_files_atomically(out, {"config.toml": config_path.read_text(encoding="utf-8")})


def load_sweep(out: str | Path) -> tuple[Experiment, pd.DataFrame, pd.DataFrame]:
    """The experiment and both tables of a finished sweep directory (for plot and report)."""
    out = Path(out)
    if not (out / "config.toml").is_file() or not _tables_exist(out):
        raise ConfigError(f"dir={str(out)!r} is invalid; allowed: a finished sweep directory "
                          "(config.toml, runs.parquet, curves.parquet; run `pfxab sweep` first)")
    experiment = load_experiment(out / "config.toml")
    return experiment, pd.read_parquet(out / "runs.parquet"), pd.read_parquet(out / "curves.parquet")
