"""A sweep's consolidated tables: built from verified runs only, checksummed in its manifest, verified when read.

``runs.parquet`` and ``curves.parquet`` are written one by one into the sweep's directory (the sweep holds
its lock), then their sizes and sha256 go into its ``pfxab-manifest.json``: an edited or truncated table
is refused by ``pfxab report``/``plot`` with one line, and a resume rebuilds it from the runs.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pyarrow
import pyarrow.parquet

from pfxab_flower.errors import ConfigError, IncompleteRunError
from pfxab_flower.printable import first_line
from pfxab_flower.simulations.experiments.experiment import Experiment, load_experiment, run_id
from pfxab_flower.simulations.experiments.sweep_runs import (
    CONFIG_COLUMNS,
    LATER_COLUMNS,
    REFERENCE_COLUMNS,
    SUMMARY_COLUMNS,
    later_values,
    load_run,
)
from pfxab_flower.storage.manifest import (
    MANIFEST_NAME,
    Manifest,
    file_checksum,
    read_manifest,
    verify_recorded,
)
from pfxab_flower.storage.outputs import atomic_file, write_file_atomically

#: The consolidated tables, in the order they are written (``runs.parquet`` last: what ``report`` reads first).
TABLES = ("curves.parquet", "runs.parquet")


def _table_ids(path: Path) -> set[str]:
    """The run ids of a table; none if it lacks a config column (written before a parameter was renamed)."""
    if not set(CONFIG_COLUMNS) <= set(pyarrow.parquet.read_schema(path).names):
        return set()
    return set(pd.read_parquet(path, columns=["run_id"])["run_id"])


def tables_match(experiment: Experiment, out: Path) -> bool:
    """Both tables are as the sweep wrote them (checksums), parse, hold exactly the grid's runs and name its
    parameters as they are named now (else they are rebuilt)."""
    if verify_recorded(out, TABLES) is not None:
        return False
    expected = {run_id(c) for c in experiment.configs}
    try:
        return _table_ids(out / "runs.parquet") == expected == _table_ids(out / "curves.parquet")
    except (OSError, ValueError, KeyError, pyarrow.ArrowException):
        return False


def consolidate(experiment: Experiment, out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Build runs.parquet and curves.parquet from the (complete) run directories of the grid; record their checksums.

    The checksums go into the manifest after both tables are in place: a crash in between
    leaves tables that do not verify, which the next resume rebuilds.
    """
    rows, curves = [], []
    for config in experiment.configs:
        rid = run_id(config)
        try:
            summary, refs, curve = load_run(out / "runs" / rid, config)
        except IncompleteRunError as exc:
            raise ConfigError(f"run {rid} in {out / 'runs'} is invalid ({exc}); allowed: a complete run "
                              "(run `pfxab sweep` again to redo it)") from None
        row = {"run_id": rid, **config.to_dict()}
        row.update({k: summary[k] for k in SUMMARY_COLUMNS})
        row.update(later_values(summary))
        row.update({k: refs[k] for k in REFERENCE_COLUMNS})
        rows.append(row)
        curves.append(curve.assign(**{"run_id": rid, **config.to_dict()}))
    runs = pd.DataFrame(rows)
    curve_frame = pd.concat(curves, ignore_index=True)
    curve_frame = curve_frame[["run_id", *CONFIG_COLUMNS, "t", "regret"]]
    checksums = {}
    for name, frame in zip(TABLES, (curve_frame, runs), strict=True):
        with atomic_file(out / name) as tmp:
            frame.to_parquet(tmp, index=False)
            checksums[name] = file_checksum(tmp)
    manifest = read_manifest(out) or Manifest()  # the sweep's own (its lock holder claimed it)
    write_file_atomically(out / MANIFEST_NAME, manifest.recording(checksums).to_bytes())
    return runs, curve_frame


def load_sweep(out: str | Path) -> tuple[Experiment, pd.DataFrame, pd.DataFrame]:
    """The experiment and both tables of a finished sweep directory (for plot and report).

    Missing, unreadable, edited or mismatched tables (a damaged file, a table changed after the
    sweep wrote it, a crash between the two renames, a config.toml from a later, unfinished
    sweep) are one line.
    """
    out = Path(out)

    def refuse(why: str) -> ConfigError:
        return ConfigError(f"dir={str(out)!r} is invalid ({why}); allowed: a finished sweep directory "
                           "(config.toml, runs.parquet, curves.parquet; run `pfxab sweep` first)")

    for name in ("config.toml", "runs.parquet", "curves.parquet"):
        if not (out / name).is_file():
            raise refuse(f"no {name}")
    damage = verify_recorded(out, TABLES)
    if damage is not None:
        raise refuse(f"{damage}; run the same `pfxab sweep` again to rebuild the tables from its runs")
    experiment = load_experiment(out / "config.toml")
    tables = {}
    for name in ("runs.parquet", "curves.parquet"):
        try:
            tables[name] = pd.read_parquet(out / name)
        except MemoryError:  # the machine's shortage, not the table's damage: said as such
            raise
        except (OSError, ValueError, pyarrow.ArrowException) as exc:
            raise refuse(f"{name} is unreadable: {type(exc).__name__}: {first_line(exc)}") from None
    runs, curves = tables["runs.parquet"], tables["curves.parquet"]
    for column in LATER_COLUMNS:
        if column not in runs.columns:  # consolidated before simple regret was kept: not known
            runs[column] = math.nan
    needed = {"runs.parquet": ("run_id", *CONFIG_COLUMNS, *SUMMARY_COLUMNS, *REFERENCE_COLUMNS),
              "curves.parquet": ("run_id", *CONFIG_COLUMNS, "t", "regret")}
    for name, columns in needed.items():
        missing = [c for c in columns if c not in tables[name].columns]
        if missing:
            raise refuse(f"{name} lacks column {missing[0]!r}")
    expected = {run_id(c) for c in experiment.configs}
    if not set(runs["run_id"]) == expected == set(curves["run_id"]):
        raise refuse("its tables do not hold the runs of its config.toml; run `pfxab sweep` again")
    return experiment, runs, curves
