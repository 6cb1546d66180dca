"""Run every configuration of an experiment grid, resumably, and consolidate tidy tables.

Each run is written whole with a checksummed manifest; a run that does not verify is redone, one sweep
at a time holds a directory (``flock``), and the tables are built from verified runs only. The
directory's layout and guarantees: docs/results.md ("What a sweep writes") and docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow

from pfxab_flower.errors import ConfigError, IncompleteRunError
from pfxab_flower.printable import first_line
from pfxab_flower.processes.remote import JobRunner
from pfxab_flower.running.parallel import federation_key, local_runner
from pfxab_flower.schema.catalogue import ENGINES
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.simulations.experiment import RUN_ID_PATTERN, Experiment, load_experiment, run_id
from pfxab_flower.simulations.sweep_runs import (
    CONFIG_COLUMNS,
    LATER_COLUMNS,
    REFERENCE_COLUMNS,
    SUMMARY_COLUMNS,
    later_values,
    load_run,
    references,
    run_files,
    write_run,
)
from pfxab_flower.storage.manifest import MANIFEST_NAME, entry_kind, read_bounded
from pfxab_flower.storage.outputs import (
    LOCK_FILE,
    OutputError,
    atomic_file,
    claim,
    clear_result,
    leftover_owner,
    replaced_kind,
    write_file_atomically,
    written_pid,
)

#: Largest ``sweep.json`` read back (an invocation is about 300 bytes: tens of thousands fit).
MAX_RECORD_BYTES = 16 << 20
#: The names a sweep writes in its directory (claimed in its manifest first; anything else there is the user's).
SWEEP_NAMES = ("config.toml", "sweep.json", "runs", "runs.parquet", "curves.parquet", LOCK_FILE)


@dataclass
class SweepOutcome:
    """What one invocation did."""

    total: int
    skipped: int
    executed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    interrupted: bool = False
    #: The exit status of the interrupt (128 + the signal's number: 130 for Ctrl-C, 143 for SIGTERM).
    interrupt_status: int = 130
    seconds: float = 0.0


def damaged_runs(experiment: Experiment, runs_dir: Path) -> tuple[list[RunConfig], list[tuple[str, str]]]:
    """The runs still to do, and those among them whose directory exists but is unusable (id, why)."""
    pending, damaged = [], []
    for config in experiment.configs:
        run_dir = runs_dir / run_id(config)
        if not run_dir.exists():
            pending.append(config)
            continue
        try:
            load_run(run_dir, config)
        except IncompleteRunError as exc:
            pending.append(config)
            damaged.append((run_dir.name, str(exc)))
    return pending, damaged


@contextlib.contextmanager
def sweep_lock(out: Path, replace: bool = False) -> Iterator[str | None]:
    """Hold ``out``'s sweep lock, or refuse at once (:class:`ConfigError` naming the holder's pid).

    The lock is ``flock`` on the directory itself (no lock file to delete or to replace
    by a link); then the sweep's names are claimed in its manifest (one line if one of
    them is not pfxab's) and the holder's pid is written, atomically, to :data:`LOCK_FILE`. With
    ``replace``, another kind's result there (a run's) is removed first; what it was is yielded.
    """
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"out={str(out)!r} is invalid (another pfxab sweep, pid {written_pid(out)}, is writing "
                              "there); allowed: a directory no other sweep is using (wait for it, or choose another "
                              "--out)") from None
        replaced = replaced_kind(out, "sweep") if replace else None
        if replaced is not None:  # asked for in so many words (--replace): the other kind's result goes
            clear_result(out)
        claim(out, SWEEP_NAMES)
        write_file_atomically(out / LOCK_FILE, f"{os.getpid()}\n")
        yield replaced
    finally:
        os.close(fd)  # releases the lock (forked workers that inherited it have exited by now)


def _remove_leftovers(out: Path) -> None:
    """The temporary siblings of our own names that a crash left (we hold the lock); nothing else.

    Only a temporary or swapped-out sibling (:func:`leftover_owner`) of a name the sweep owns (one of
    :data:`SWEEP_NAMES`, its manifest, a run id in ``runs/``) is removed: a user's hidden
    ``.bashrc.old`` or ``.draft.tmp`` is never touched.
    """
    top = {*SWEEP_NAMES, MANIFEST_NAME}
    for folder, owned in ((out, top.__contains__), (out / "runs", RUN_ID_PATTERN.fullmatch)):
        if entry_kind(folder) != "dir":
            continue
        for entry in folder.iterdir():
            name = leftover_owner(entry.name)
            if name is None or not owned(name):
                continue
            kind = entry_kind(entry)
            if kind == "dir":
                shutil.rmtree(entry, ignore_errors=True)
            elif kind == "file":
                entry.unlink(missing_ok=True)


def run_sweep(
    experiment: Experiment,
    out: Path,
    workers: int = 1,
    engine: str = "inprocess",
    progress: bool = True,
    on_start: Callable[[int, int], None] | None = None,
    on_damaged: Callable[[list[tuple[str, str]]], None] | None = None,
    ray_address: str | None = None,
    replace: bool = False,
    on_replaced: Callable[[str], None] | None = None,
) -> SweepOutcome:
    """Run the runs of ``experiment`` not yet complete in ``out``; consolidate when all are.

    With ``ray_address`` (checked by :func:`pfxab_flower.simulations.cluster.executor_address`) every
    run is a task on that Ray cluster, and landmine fits of the references go there too;
    either way this process writes every run's files, so the directory is the same and
    resumes from either kind of executor.

    Holds ``out``'s sweep lock throughout (:func:`sweep_lock`) and first copies the
    experiment's TOML to ``out/config.toml``. ``on_damaged(runs)`` is called with
    the (id, reason) of run directories that exist but are unusable and will be
    redone, ``on_start(pending, total)`` before any work (both for messages).
    Ctrl-C drops the queued runs, stops the running ones (nothing of theirs is
    left but hidden temporary directories, removed next time) and returns with
    ``interrupted`` set. ``replace`` lets the sweep take a directory holding another kind's
    result (a run's, a comparison's), which is removed; ``on_replaced(what)`` is told what it was.
    """
    if engine not in ENGINES:
        raise ConfigError(f"engine={engine!r} is invalid; allowed: {', '.join(ENGINES)}")
    if ray_address is not None and engine != "inprocess":
        raise ConfigError(f"engine={engine!r} is invalid with executor='ray'; allowed: inprocess (a Flower "
                          "simulation runs on a cluster with `pfxab simulate --ray-address`)")
    out.mkdir(parents=True, exist_ok=True)
    with sweep_lock(out, replace) as replaced:
        if replaced is not None and on_replaced is not None:
            on_replaced(replaced)
        if experiment.source:
            write_file_atomically(out / "config.toml", experiment.source)  # plot and report read it
        _remove_leftovers(out)
        from pfxab_flower.simulations.cluster import fits_on, ray_runner

        runner = ray_runner(ray_address) if ray_address is not None else local_runner(workers)
        with fits_on(ray_address):
            return _run_locked(experiment, out, workers, engine, progress, on_start, on_damaged, runner)


def _run_locked(
    experiment: Experiment,
    out: Path,
    workers: int,
    engine: str,
    progress: bool,
    on_start: Callable[[int, int], None] | None,
    on_damaged: Callable[[list[tuple[str, str]]], None] | None,
    runner: JobRunner,
) -> SweepOutcome:
    runs_dir = out / "runs"
    pending, damaged = damaged_runs(experiment, runs_dir)
    outcome = SweepOutcome(total=len(experiment.configs), skipped=len(experiment.configs) - len(pending))
    started = time.perf_counter()
    bar = None
    try:  # an interrupt from here on is the sweep's: it says how many runs are complete
        if damaged and on_damaged:
            on_damaged(damaged)
        if on_start:
            on_start(len(pending), outcome.total)
        if pending:
            from tqdm import tqdm

            prepare(pending)
            bar = tqdm(total=len(pending), desc=experiment.name, unit="run", file=sys.stderr, disable=not progress)
            jobs = [(c, engine, experiment.curve_points) for c in pending]
            run_dirs = [str(runs_dir / run_id(c)) for c in pending]

            def done(index: int, files: dict[str, str | bytes] | None, error: BaseException | None) -> None:
                if error is None and files is not None:
                    try:
                        write_run(run_dirs[index], files)
                        outcome.executed += 1
                    except OutputError as exc:  # what an OSError while writing becomes (disk full, ...)
                        error = exc
                if error is not None:  # one failing run must not lose the others
                    outcome.failures.append((Path(run_dirs[index]).name, f"{type(error).__name__}: {error}"))
                if bar is not None:
                    bar.update()

            runner(run_files, jobs, done)
    except KeyboardInterrupt as exc:
        outcome.interrupted = True
        outcome.interrupt_status = getattr(exc, "status", 130)
    finally:
        if bar is not None:
            bar.close()
    outcome.seconds = time.perf_counter() - started
    _record_invocation(out, experiment, engine, workers, outcome)
    if not outcome.interrupted and not outcome.failures and (outcome.executed or not _tables_match(experiment, out)):
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


def _table_ids(path: Path) -> set[str]:
    return set(pd.read_parquet(path, columns=["run_id"])["run_id"])


def _tables_match(experiment: Experiment, out: Path) -> bool:
    """Both tables exist, parse, and hold exactly the grid's runs (else they are rewritten)."""
    expected = {run_id(c) for c in experiment.configs}
    try:
        return _table_ids(out / "runs.parquet") == expected == _table_ids(out / "curves.parquet")
    except (OSError, ValueError, KeyError, pyarrow.ArrowException):
        return False


def machine() -> dict[str, Any]:
    """Where the sweep ran (for the results page): the processor as the platform names it (on Linux only the
    architecture, ``x86_64``), cores, Python and OS."""
    return {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "platform": platform.platform()}


def _record_invocation(out: Path, experiment: Experiment, engine: str, workers: int, outcome: SweepOutcome) -> None:
    path = out / "sweep.json"
    try:  # a damaged record (even one of gigabytes) starts a new history, never a MemoryError
        history = json.loads(read_bounded(path, MAX_RECORD_BYTES).decode("utf-8"))["invocations"]
    except (OSError, ValueError, KeyError, TypeError):
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
    write_file_atomically(out / "sweep.json", json.dumps(record, indent=2) + "\n")


def consolidate(experiment: Experiment, out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Build runs.parquet and curves.parquet from the (complete) run directories of the grid."""
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
    for name, frame in (("curves.parquet", curve_frame), ("runs.parquet", runs)):  # runs.parquet last
        with atomic_file(out / name) as tmp:
            frame.to_parquet(tmp, index=False)
    return runs, curve_frame


def load_sweep(out: str | Path) -> tuple[Experiment, pd.DataFrame, pd.DataFrame]:
    """The experiment and both tables of a finished sweep directory (for plot and report).

    Missing, unreadable or mismatched tables (a damaged file, a crash between the
    two renames, a config.toml from a later, unfinished sweep) are one line.
    """
    out = Path(out)

    def refuse(why: str) -> ConfigError:
        return ConfigError(f"dir={str(out)!r} is invalid ({why}); allowed: a finished sweep directory "
                           "(config.toml, runs.parquet, curves.parquet; run `pfxab sweep` first)")

    for name in ("config.toml", "runs.parquet", "curves.parquet"):
        if not (out / name).is_file():
            raise refuse(f"no {name}")
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

