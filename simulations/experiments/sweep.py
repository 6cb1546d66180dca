"""Run every configuration of an experiment grid, resumably, and consolidate tidy tables.

Each run is written whole with a checksummed manifest; a run that does not verify is redone, one sweep
at a time holds a directory (``flock``), and the tables are built from verified runs only. The
directory's layout and guarantees: docs/results.md ("What a sweep writes") and docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pfxab_flower.errors import ConfigError, IncompleteRunError
from pfxab_flower.processes.remote import JobRunner
from pfxab_flower.running.parallel import federation_key, local_runner
from pfxab_flower.schema.catalogue import ENGINES
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.simulations.experiments.experiment import RUN_ID_PATTERN, Experiment, run_id
from pfxab_flower.simulations.experiments.sweep_runs import load_run, references, run_files, write_run
from pfxab_flower.simulations.experiments.sweep_tables import consolidate, tables_match
from pfxab_flower.storage.manifest import MANIFEST_NAME, entry_kind, read_bounded
from pfxab_flower.storage.outputs import (
    LOCK_FILE,
    HeldDirectory,
    PathIdentity,
    claim,
    clear_result,
    leftover_owner,
    refusal,
    replaced_kind,
    write_file_atomically,
)
from pfxab_flower.storage.result_ownership import holder_named, holding

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
    #: Where the directory was moved to while the sweep ran (its files followed it), or ``None``.
    moved_to: Path | None = None


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
def sweep_lock(out: Path | HeldDirectory, replace: bool = False) -> Iterator[str | None]:
    """Hold ``out``'s sweep lock, or refuse at once (:class:`ConfigError` naming the holder).

    The lock is ``flock`` on the directory itself (no lock file to delete or to replace
    by a link); then the sweep's names are claimed in its manifest (one line if one of
    them is not pfxab's) and the holder's pid is written, atomically, to :data:`LOCK_FILE`. With
    ``replace``, another kind's result there (a run's) is removed first; what it was is yielded.
    ``out`` held already (:class:`~pfxab_flower.storage.identity.HeldDirectory`): everything goes through
    its handle; a path is opened here.
    """
    held = out if isinstance(out, HeldDirectory) else HeldDirectory(out)
    try:
        try:
            fcntl.flock(held.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = holding(holder_named(held.path, os.fstat(held.fd)))
            raise ConfigError(f"out={str(held.path)!r} is invalid ({holder}); allowed: a directory no other sweep "
                              "is using (wait for it, or choose another --out)") from None
        root = held.via
        replaced = replaced_kind(root, "sweep") if replace else None
        if replaced is not None:  # asked for in so many words (--replace): the other kind's result goes
            clear_result(root)
        claim(root, SWEEP_NAMES)
        write_file_atomically(root / LOCK_FILE, f"{os.getpid()}\n")
        yield replaced
    finally:
        fcntl.flock(held.fd, fcntl.LOCK_UN)  # also for forked workers that inherited the handle
        if held is not out:
            held.close()


def held_sweep_directory(out: Path, checked: PathIdentity | None = None) -> HeldDirectory:
    """``out`` made if need be and opened, to be written through its handle; one line if it is not what was
    ``checked`` (moved, replaced, or made by another program since the check: then nothing is written)."""
    allowed = "a directory that stays what was checked until the sweep holds it"
    try:
        if checked is not None and checked.inode is None:  # nothing was there when checked: we make it, or refuse
            out.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(out)
        else:
            out.mkdir(parents=True, exist_ok=True)
        held = HeldDirectory(out)
    except FileExistsError:
        raise refusal("out", out, allowed, "something was made at that name by another program after it was "
                      "checked") from None
    except OSError as exc:
        raise refusal("out", out, allowed, exc.strerror or str(exc)) from None
    why = None if checked is None else checked.changed(created_by_us=checked.inode is None) or (
        None if checked.inode in (None, held.inode) else "another directory took its name after it was checked")
    if why is not None:
        held.close()
        raise refusal("out", out, allowed, why)
    return held


def _remove_leftovers(out: Path) -> None:
    """The temporary siblings of our own names that a crash left (we hold the lock); nothing else.

    Only a temporary or swapped-out sibling (:func:`leftover_owner`) of a name the sweep owns (one of
    :data:`SWEEP_NAMES`, its manifest, a run id in ``runs/``) is removed: a user's hidden
    ``.bashrc.old`` or ``.draft.tmp`` is never touched.
    """
    top = {*SWEEP_NAMES, MANIFEST_NAME}
    for folder, owned in ((out, top.__contains__), (out / "runs", RUN_ID_PATTERN.fullmatch)):
        if folder != out and entry_kind(folder) != "dir":  # out: held, maybe through its handle (a magic link)
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
    checked: PathIdentity | None = None,
) -> SweepOutcome:
    """Run the runs of ``experiment`` not yet complete in ``out``; consolidate when all are.

    With ``ray_address`` (checked by :func:`pfxab_flower.simulations.flower.ray_cluster.executor_address`) every
    run is a task on that Ray cluster, and landmine fits of the references go there too;
    either way this process writes every run's files, so the directory is the same and
    resumes from either kind of executor.

    Holds ``out`` open from here to the last write and writes through the handle
    (:func:`held_sweep_directory`: moved while the sweep runs, its files follow it, and the outcome
    says where it went; removed, the sweep stops with one line; never written into what took the
    name), holds its sweep lock throughout (:func:`sweep_lock`) and first copies the
    experiment's TOML to ``out/config.toml``. ``checked``: the identity of ``out`` when its path
    was checked, which it must still have. ``on_damaged(runs)`` is called with
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
    held = held_sweep_directory(out, checked)
    try:
        with sweep_lock(held, replace) as replaced:
            if replaced is not None and on_replaced is not None:
                on_replaced(replaced)
            root = held.via
            if experiment.source:
                write_file_atomically(root / "config.toml", experiment.source)  # plot and report read it
            _remove_leftovers(root)
            from pfxab_flower.simulations.flower.ray_cluster import fits_on, ray_runner

            runner = ray_runner(ray_address) if ray_address is not None else local_runner(workers)
            with fits_on(ray_address):
                outcome = _run_locked(experiment, held, workers, engine, progress, on_start, on_damaged, runner)
        outcome.moved_to = held.moved_to()
        return outcome
    except (ConfigError, OSError) as exc:
        if held.removed():
            raise refusal("out", out, "a directory that stays where it is while its sweep runs (run the same "
                          "command again to start over)", "it was removed while the sweep ran; nothing more was "
                          "written, nowhere else") from None
        if isinstance(exc, ConfigError):  # the handle's path (/proc/self/fd/N) named as the user named the directory
            raise type(exc)(held.shown(str(exc))) from None
        raise
    finally:
        held.close()


def _run_locked(
    experiment: Experiment,
    held: HeldDirectory,
    workers: int,
    engine: str,
    progress: bool,
    on_start: Callable[[int, int], None] | None,
    on_damaged: Callable[[list[tuple[str, str]]], None] | None,
    runner: JobRunner,
) -> SweepOutcome:
    out = held.via
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
                held.check()  # removed: stop here (the runs left would be written nowhere)
                if error is None and files is not None:
                    try:
                        write_run(run_dirs[index], files)
                        outcome.executed += 1
                    except ConfigError as exc:  # an OSError while writing (disk full, ...), a user's file in it
                        held.check()
                        error = exc
                if error is not None:  # one failing run must not lose the others
                    outcome.failures.append((Path(run_dirs[index]).name,
                                             held.shown(f"{type(error).__name__}: {error}")))
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
    if not outcome.interrupted and not outcome.failures and (outcome.executed or not tables_match(experiment, out)):
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
