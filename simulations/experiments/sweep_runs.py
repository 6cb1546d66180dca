"""One run of a sweep: computed (:func:`run_files`), written as a unit (:func:`write_run`), verified (:func:`load_run`).

A worker or a Ray task computes the files and the sweep's driver writes them with a manifest, so a
remote run needs no shared disk; :mod:`.sweep` schedules the runs and consolidates the tables.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pfxab_flower import namespace
from pfxab_flower.errors import IncompleteRunError
from pfxab_flower.printable import first_line
from pfxab_flower.running.parallel import shared_federation
from pfxab_flower.running.results import RESULT_FILES, RunResult, time_grid
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.simulations.experiments.experiment import same_run
from pfxab_flower.storage.manifest import verify
from pfxab_flower.storage.outputs import write_files_atomically

#: Columns of runs.parquet taken from each run's summary.json (besides the config fields).
SUMMARY_COLUMNS = (
    "engine", "regret", "evaluations", "mean_reward_personalised", "mean_reward_global", "mean_reward_local",
    "phases", "communication_rounds", "values_down", "values_up", "bytes_down", "bytes_up",
    "rejected_replies", "optimum_estimated", "wall_seconds",
)
#: Summary columns of runs.parquet that a run written before they existed lacks (NaN there, as in an unscored
#: run): the mean simple regret of the clients' final points and of their best observed points.
LATER_COLUMNS = ("simple_regret", "best_simple_regret")
#: Reference values of the federation, stored per run (see :func:`references`).
REFERENCE_COLUMNS = ("best_local", "best_global", "best_personalised", "oracle_local", "oracle_global")
CONFIG_COLUMNS = tuple(RunConfig.names())
#: Summary columns that are not numbers (every other one must be an int or a float).
_TEXT_COLUMNS, _FLAG_COLUMNS = ("engine",), ("optimum_estimated",)
#: Summary columns that may be null (``evaluations``: an engine that does not count objective calls).
_OPTIONAL_COLUMNS = ("evaluations",)
#: A sweep's tables put these beside each run's parameters: no parameter may be named like them.
namespace.reserve(("run_id", "t", *SUMMARY_COLUMNS, *REFERENCE_COLUMNS), "a column of a sweep's tables")
#: The files of one run's directory (besides its manifest): what :func:`run_files` returns.
RUN_FILES = ("grid_curve.csv", "references.json", "config.json", *RESULT_FILES)


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
        from pfxab_flower.simulations.flower.in_process_simulation import run_flower_simulation

        return run_flower_simulation(config)
    from pfxab_flower.running.engine import run_config

    return run_config(config, federation=shared_federation(config))  # optima computed once per process


def run_files(config: RunConfig, engine: str, curve_points: int) -> dict[str, str | bytes]:
    """Run one config; the files of its run directory (a worker process or a Ray task computes them,
    the driver writes them, so a run on a remote node needs no shared disk)."""
    result = run_one(config, engine)
    grid = time_grid(config.horizon, curve_points)
    return {
        "grid_curve.csv": result.curve_at(grid).to_csv(index=False),
        "references.json": json.dumps(references(config), indent=2) + "\n",
        "config.json": json.dumps(config.to_dict(), indent=2) + "\n",
        **result.files(),
    }


def later_values(summary: dict[str, Any]) -> dict[str, float]:
    """The :data:`LATER_COLUMNS` of a run's summary, NaN where it has none."""
    return {key: math.nan if summary.get(key) is None else float(summary[key]) for key in LATER_COLUMNS}


def write_run(run_dir: str, files: dict[str, str | bytes]) -> None:
    """The driver's write of one run's files, as a unit (replacing whatever was there)."""
    write_files_atomically(run_dir, files, kind="sweep-run", replace_all=True)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def load_run(run_dir: Path, config: RunConfig) -> tuple[dict[str, Any], dict[str, float], pd.DataFrame]:
    """The summary, references and grid curve of a complete run; :class:`IncompleteRunError` otherwise.

    Complete means more than ``summary.json`` existing: every file is exactly as it was
    written (size and sha256 as its manifest says: a truncated, edited, deleted or
    replaced file is caught even when it still parses), every file parses, holds the
    fields :func:`consolidate` takes, and ``config.json`` is this run's config, so a
    damaged directory is redone instead of poisoning or crashing the consolidation.
    """
    damage = verify(run_dir, RUN_FILES)
    if damage is not None:
        raise IncompleteRunError(damage)
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        refs = json.loads((run_dir / "references.json").read_text(encoding="utf-8"))
        saved = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        curve = pd.read_csv(run_dir / "grid_curve.csv")
    except FileNotFoundError as exc:
        raise IncompleteRunError(f"{Path(exc.filename).name} is missing") from None
    except (OSError, ValueError) as exc:  # JSON, CSV and UTF-8 errors are ValueErrors
        raise IncompleteRunError(f"unreadable ({type(exc).__name__}: {first_line(exc, 500)})") from None
    if not isinstance(summary, dict) or not isinstance(refs, dict):
        raise IncompleteRunError("summary.json or references.json is not a JSON object")
    for key in SUMMARY_COLUMNS:
        value = summary.get(key)
        ok = (isinstance(value, str) if key in _TEXT_COLUMNS
              else isinstance(value, bool) if key in _FLAG_COLUMNS
              else _number(value) or (value is None and key in _OPTIONAL_COLUMNS and key in summary))
        if not ok:
            raise IncompleteRunError(f"summary.json {key}={value!r} is missing or of the wrong type")
    for key in LATER_COLUMNS:
        if not (summary.get(key) is None or _number(summary[key])):
            raise IncompleteRunError(f"summary.json {key}={summary[key]!r} is of the wrong type")
    bad = [key for key in REFERENCE_COLUMNS if not _number(refs.get(key))]
    if bad:
        raise IncompleteRunError(f"references.json {bad[0]} is missing or not a number")
    if not isinstance(saved, dict) or not same_run(saved, config):
        raise IncompleteRunError("config.json is not this run's config")
    if (list(curve.columns) != ["t", "regret"] or curve.empty
            or not all(pd.api.types.is_numeric_dtype(curve[c]) for c in curve.columns)):
        raise IncompleteRunError("grid_curve.csv is not a numeric t,regret table")
    return summary, refs, curve
