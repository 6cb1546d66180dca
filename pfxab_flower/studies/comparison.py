"""Side-by-side comparison: every algorithm on the same federation, with the same seeds and the same regret.

Runs the grid ``algorithms x seeds`` in process (a Federation with :func:`pfxab_flower.running.engine.run`'s keywords,
or a RunConfig whose fields the keywords replace), every run checked before the first starts, and
summarises each algorithm over the seeds; :meth:`Comparison.write` and :func:`load_comparison` store it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow
from tqdm import tqdm

from pfxab_flower.algorithms.registry import available_names, options_of
from pfxab_flower.errors import ConfigError, WorkerLostError
from pfxab_flower.faults import DEFAULT_MIN_FRACTION, NO_FAULTS
from pfxab_flower.formatting import format_mean_sd
from pfxab_flower.printable import first_line
from pfxab_flower.problems.federation import Federation
from pfxab_flower.processes.remote import JobRunner
from pfxab_flower.running.engine import describe_problem, run_checked, run_spec
from pfxab_flower.running.parallel import local_runner, shared_federation
from pfxab_flower.running.results import time_grid
from pfxab_flower.schema.catalogue import COMMON, PARAMETERS, RENAMED, check, parse, parse_workers
from pfxab_flower.schema.own_options import away_from_default, refuse_unread
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.schema.spec import AlgorithmSpec
from pfxab_flower.storage.manifest import read_bounded
from pfxab_flower.storage.outputs import PathIdentity, write_files_atomically

#: The columns of one run's row, in order.
RUN_COLUMNS = (
    "algorithm", "seed", "problem", "alpha", "confidence", "num_clients", "horizon",
    "regret", "simple_regret", "best_simple_regret", "evaluations", "phases", "pulls_per_phase", "communication_rounds",
    "bytes_up", "bytes_down", "bytes_sent", "values_up", "values_down", "rejected_replies",
    "mean_reward_personalised", "mean_reward_global", "mean_reward_local", "wall_seconds",
)
#: The columns of the curves table (long format: one row per run and time).
CURVE_COLUMNS = ("algorithm", "seed", "t", "regret")
#: What the summary table reports (mean and standard deviation over seeds).
METRICS = ("regret", "simple_regret", "evaluations", "phases", "pulls_per_phase", "communication_rounds", "bytes_sent",
           "wall_seconds")
#: Columns a comparison written before they existed lacks: read back as NaN (not known), not refused.
LATER_COLUMNS = ("simple_regret", "best_simple_regret")
_LABELS = {
    "regret": "cumulative regret",
    "simple_regret": "simple regret",
    "evaluations": "evaluations",
    "phases": "phases",
    "pulls_per_phase": "pulls per phase",
    "communication_rounds": "comm. rounds",
    "bytes_sent": "bytes sent (up+down)",
    "wall_seconds": "wall time (s)",
}
#: The file that makes a directory a comparison (what was compared); written with the tables, as one unit.
MANIFEST = "comparison.json"
#: Largest ``comparison.json`` read back (one is a few kB; a damaged one of gigabytes is refused on its size).
MAX_DESCRIPTION_BYTES = 1 << 20
#: Files ``Comparison.write`` produces (written as one unit: all of them or none).
COMPARE_FILES = (MANIFEST, "runs.csv", "runs.parquet", "summary.csv", "summary.parquet", "curves.csv",
                 "curves.parquet")
#: What ``setting`` always holds (the header of a table or a figure names them).
SETTING_KEYS = ("problem", "num_clients", "alpha", "horizon", "noise", "noise_sigma", "confidence")
#: The seeds of a comparison when none are given (``pfxab compare``'s default too).
DEFAULT_SEEDS = tuple(range(10))
#: Points of each run's regret curve (the sweep's default; :func:`pfxab_flower.running.results.time_grid`).
CURVE_POINTS: int = PARAMETERS["curve_points"].default
#: Keywords of :func:`pfxab_flower.running.engine.run` that a comparison sets itself, per run.
_PER_RUN = ("algorithm", "seed")


@dataclass(frozen=True)
class Comparison:
    """One row per run (``runs``), one row per algorithm (``summary``), every run's regret curve (``curves``).

    ``setting`` is what every run shared (problem, num_clients, alpha, horizon, noise, ...).
    """

    runs: pd.DataFrame
    summary: pd.DataFrame
    curves: pd.DataFrame
    setting: dict[str, Any]
    algorithms: tuple[str, ...]
    seeds: tuple[int, ...]

    def write(self, out_dir: str | os.PathLike[str], replace: bool = False,
              checked: PathIdentity | None = None) -> Path:
        """Write the manifest, runs, summary and curves (CSV and Parquet) as the content of ``out_dir``, as one unit.

        An older comparison there is kept whole if writing fails and replaced whole otherwise;
        another kind's result (a run's, a sweep's) only with ``replace``; a directory that is no
        longer what was ``checked`` before the runs (moved, replaced) is refused.
        """
        manifest = {"kind": "comparison", "algorithms": list(self.algorithms), "seeds": list(self.seeds),
                    "setting": self.setting}
        files: dict[str, str | bytes] = {MANIFEST: json.dumps(manifest, indent=2) + "\n"}
        for name, frame in (("runs", self.runs), ("summary", self.summary), ("curves", self.curves)):
            files[f"{name}.csv"] = frame.to_csv(index=False)
            files[f"{name}.parquet"] = frame.to_parquet(None, index=False)
        return write_files_atomically(out_dir, files, kind="comparison", replace=replace, checked=checked)

    def header(self) -> str:
        """One line: what was compared, on which seeds."""
        s = self.setting
        runs = int(self.summary["runs"].max()) if len(self.summary) else 0
        return (f"{s['problem']}: M={s['num_clients']} alpha={s['alpha']:g} T={s['horizon']} "
                f"noise={s['noise']}(sigma={s['noise_sigma']:g}) confidence={s['confidence']} "
                f"seeds={format_seeds(self.seeds)} ({runs} runs per algorithm; mean ± sd over seeds)")

    def cells(self) -> list[list[str]]:
        """The summary as text cells: a header row, then one row per algorithm (shared by ``table`` and reports)."""
        rows = [["algorithm", *(_LABELS[m] for m in METRICS)]]
        for record in self.summary.to_dict("records"):
            rows.append([record["algorithm"],
                         *(format_mean_sd(record[f"{m}_mean"], record[f"{m}_std"]) for m in METRICS)])
        return rows

    def table(self) -> str:
        """The summary as an aligned text table, headed by :meth:`header`."""
        rows = self.cells()
        widths = [max(len(row[j]) for row in rows) for j in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
        return "\n".join([self.header(), *lines])

    def winner(self) -> str:
        """The algorithm with the lowest mean regret."""
        return str(self.summary.loc[self.summary["regret_mean"].idxmin(), "algorithm"])

    def seeds_won(self, algorithm: str) -> int:
        """On how many seeds ``algorithm``'s regret is below every other algorithm's (same seed, same noise)."""
        by_seed = self.runs.pivot(index="seed", columns="algorithm", values="regret")
        others = by_seed.drop(columns=[algorithm])
        return int((by_seed[algorithm].to_numpy()[:, None] < others.to_numpy()).all(axis=1).sum())


def format_seeds(seeds: tuple[int, ...] | list[int]) -> str:
    """``0-9`` for a contiguous run of seeds, else the comma-separated list."""
    seeds = list(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(str(s) for s in seeds)


def summarise(runs: pd.DataFrame, algorithms: Sequence[str]) -> pd.DataFrame:
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


#: Federations given as objects, by token, for this process's forked workers (a lambda cannot be pickled).
_FEDERATIONS: dict[int, Federation] = {}


def _federation_of(source: RunConfig | int) -> Federation:
    return shared_federation(source) if isinstance(source, RunConfig) else _FEDERATIONS[source]


def _run_job(source: RunConfig | int, keywords: dict[str, Any], grid: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
    """One run (:func:`run_checked`'s keywords: a checked spec, ...): its row and its cumulative regret on ``grid``.

    ``source`` is a RunConfig (the process builds or inherits its federation,
    :func:`pfxab_flower.running.parallel.shared_federation`: a Ray worker can too) or the
    token of a federation object this process was given (forked workers inherit it).
    """
    result = run_checked(_federation_of(source), **keywords)
    s = result.summary
    row = {name: s[name] for name in RUN_COLUMNS if name in s}
    for name in LATER_COLUMNS:  # null in an unscored run
        row[name] = math.nan if row[name] is None else row[name]
    row["bytes_sent"] = int(s["bytes_up"]) + int(s["bytes_down"])
    own = [p for p in s.get("client_phases") or [] if p is not None]
    if own:  # a solo baseline's phases are its clients' own (local-only's PF-XAB), none at the server
        row["phases"] = float(np.mean(own))
    # each client's pulls per phase (the phase length), averaged over the phases the run reached
    row["pulls_per_phase"] = float(result.phases["phase_length"].mean()) if len(result.phases) else 0.0
    return {name: row[name] for name in RUN_COLUMNS}, result.curve_at(grid)["regret"].to_numpy()


def _refuse_unknown(given: dict[str, Any], allowed: Sequence[str]) -> None:
    unknown = [name for name in given if name not in allowed]
    if unknown:
        name = unknown[0]
        hint = f" (compare takes {name}s=, a list)" if name in _PER_RUN else ""
        raise ConfigError(f"unknown keyword {name!r}{hint}; allowed: {', '.join(allowed)}")


def _checked_list(name: str, values: Any, check_one: Any) -> tuple[Any, ...]:
    """``values`` (a non-empty sequence without repeats) each checked by ``check_one``; one line otherwise."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | range | np.ndarray) or len(values) == 0:
        raise ConfigError(f"{name}={values!r} is invalid; allowed: a non-empty list")
    checked = tuple(check_one(v) for v in values)
    if len(set(checked)) != len(checked):
        raise ConfigError(f"{name}={list(values)!r} is invalid; allowed: a list without repeats")
    return checked


def _plan_config(base: RunConfig, algorithms: tuple[str, ...], seeds: tuple[int, ...],
                 parameters: dict[str, Any]) -> tuple[list[RunConfig], dict[str, Any]]:
    """The runs of a RunConfig comparison: every config is built (so checked) before any runs."""
    _refuse_unknown(parameters, [name for name in RunConfig.names() if name not in _PER_RUN])
    base = base.replace(**parameters)  # an own parameter that none of the algorithms (nor the problem) reads: refused
    refuse_unread([(a, base.problem) for a in algorithms], base.options, away_from_default(base.options))
    configs = [base.replace(algorithm=a, seed=s) for a in algorithms for s in seeds]
    setting = {k: v for k, v in base.to_dict().items() if k not in _PER_RUN}
    return configs, setting


#: compare's own keywords with a Federation, beside the spec's (the common ones and the algorithms' own).
_RUN_KEYWORDS = ("describe", "faults", "min_fraction")


def _plan_federation(federation: Federation, algorithms: tuple[str, ...], seeds: tuple[int, ...],
                     parameters: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The runs of a Federation comparison: :func:`run_checked`'s keywords, every spec built (so checked) first.

    An algorithm's own keyword (``candidates``) goes to the algorithms that declare it;
    one that none of them declares is refused.
    """
    own = {name: p for a in algorithms for name, p in options_of(a).items()}
    common = [name for name in COMMON if name not in ("num_clients", *_PER_RUN)]
    _refuse_unknown(parameters, [*common, *own, *_RUN_KEYWORDS])
    shared = {k: v for k, v in parameters.items() if k in common}
    extra = {"describe": parameters.get("describe"), "faults": parameters.get("faults", NO_FAULTS),
             "min_fraction": parse("min_fraction", parameters.get("min_fraction", DEFAULT_MIN_FRACTION))}
    specs = {a: run_spec(federation, a, **shared, **{k: v for k, v in parameters.items() if k in options_of(a)})
             for a in algorithms}  # the seed only seeds the noise: its own check is enough
    keywords = [{"spec": specs[a].replace(seed=s), **extra} for a in algorithms for s in seeds]
    first = specs[algorithms[0]]
    setting = {
        "problem": federation.name, "num_clients": federation.num_clients, "dimensions": federation.domain.ndim,
        "noise": federation.noise.kind, "noise_sigma": federation.noise.sigma,
        **{k: v for k, v in first.summary().items() if k in common},
        **{name: next(spec.options[name] for spec in specs.values() if name in spec.options) for name in own},
        "min_fraction": extra["min_fraction"],
    }
    if extra["faults"] != NO_FAULTS:
        setting["faults"] = dataclasses.asdict(extra["faults"])
    return keywords, setting


def compare(
    target: Federation | RunConfig,
    algorithms: Sequence[str] | None = None,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    *,
    workers: int = 1,
    progress: bool = True,
    runner: JobRunner | None = None,
    **parameters: Any,
) -> Comparison:
    """Run every algorithm with every seed on one federation; the runs, their summary and their curves.

    ``target``: a :class:`Federation` (``parameters`` are :func:`pfxab_flower.running.engine.run`'s
    keywords: ``alpha``, ``horizon``, ``nu1``, ``rho``, ``max_depth``, ``confidence``, the
    algorithms' own (``candidates``: given to the algorithms that declare it), ``min_fraction``,
    ``faults``, ``describe``, with ``run``'s defaults; ``algorithms``: default every registered one whose modules
    are installed),
    or a :class:`RunConfig` (its ``algorithm`` and ``seed`` are ignored; ``parameters``
    replace its other fields, e.g. ``alpha=0.9``). Every run is checked before any starts.
    ``progress`` shows a progress bar on stderr. ``runner`` runs the jobs (default:
    ``workers`` local processes; ``pfxab compare --executor ray`` passes a Ray cluster's,
    for a RunConfig only: a remote worker rebuilds the federation from it).
    """
    algorithms = _checked_list("algorithms", available_names() if algorithms is None else algorithms,
                               lambda a: check("algorithm", a, label="algorithms"))
    seeds = _checked_list("seeds", seeds, lambda s: check("seed", s, label="seeds"))
    workers = parse_workers(workers)
    token: int | None = None
    if isinstance(target, RunConfig):
        configs, setting = _plan_config(target, algorithms, seeds, parameters)
        sources: list[RunConfig | int] = list(configs)  # a seeded problem (the shifted ones): a federation per seed
        federations = [shared_federation(c) for c in configs]
        keywords: list[dict[str, Any]] = [
            {"spec": AlgorithmSpec.from_config(c, f.reward_range, f.domain.ndim), "describe": describe_problem(c)}
            for c, f in zip(configs, federations, strict=True)]
    elif isinstance(target, Federation):
        if runner is not None:
            raise ConfigError("runner=... is invalid with a Federation; allowed: a RunConfig (a remote worker "
                              "rebuilds its federation from it), or local workers=")
        keywords, setting = _plan_federation(target, algorithms, seeds, parameters)
        federations, token = [target], id(target)
        sources = [token] * len(keywords)
    else:
        raise ConfigError(f"target={type(target).__name__} is invalid; allowed: a Federation or a RunConfig")
    for federation in {id(f): f for f in federations}.values():
        federation.optimum(setting["alpha"])  # once, before workers fork: they inherit it
    grid = time_grid(setting["horizon"], CURVE_POINTS)
    results: list[tuple[dict[str, Any], np.ndarray] | None] = [None] * len(keywords)
    errors: dict[int, BaseException] = {}
    if token is not None:
        _FEDERATIONS[token] = federation
    try:
        with tqdm(total=len(keywords), desc="pfxab compare", unit="run", file=sys.stderr,
                  disable=not progress) as bar:

            def done(index: int, result: tuple[dict[str, Any], np.ndarray] | None,
                     error: BaseException | None) -> None:
                results[index] = result
                if isinstance(error, WorkerLostError):  # say which run: the worker's death names none
                    spec = keywords[index]["spec"]
                    error = WorkerLostError(f"run {spec.algorithm} seed {spec.seed}: {error}")
                if error is not None:
                    errors[index] = error
                bar.update()

            (runner or local_runner(workers))(_run_job, [(source, kw, grid) for source, kw in zip(sources, keywords,
                                                                                                  strict=True)], done)
    finally:
        if token is not None:
            _FEDERATIONS.pop(token, None)
    if errors:
        raise errors[min(errors)]  # the first run's, whatever order the workers ended in
    finished = [r for r in results if r is not None]
    runs = pd.DataFrame([row for row, _ in finished], columns=list(RUN_COLUMNS))
    curves = pd.DataFrame({
        "algorithm": np.repeat(runs["algorithm"].to_numpy(), grid.size),
        "seed": np.repeat(runs["seed"].to_numpy(), grid.size),
        "t": np.tile(grid, len(finished)),
        "regret": np.concatenate([curve for _, curve in finished]) if finished else np.array([], dtype=float),
    }, columns=list(CURVE_COLUMNS))
    return Comparison(runs=runs, summary=summarise(runs, algorithms), curves=curves, setting=setting,
                      algorithms=algorithms, seeds=seeds)


def load_comparison(directory: str | os.PathLike[str]) -> Comparison:
    """The comparison written into ``directory`` by :meth:`Comparison.write`; one :class:`ConfigError` line if not.

    The summary is recomputed from the runs (one source of the numbers); the runs and the
    curves must hold exactly the manifest's algorithms x seeds.
    """
    out = Path(directory)

    def refuse(why: str) -> ConfigError:
        return ConfigError(f"dir={str(directory)!r} is invalid ({why}); allowed: a comparison directory written by "
                           f"`pfxab compare --out` ({MANIFEST}, runs.parquet, curves.parquet)")

    try:
        manifest = json.loads(read_bounded(out / MANIFEST, MAX_DESCRIPTION_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise refuse(f"no {MANIFEST}") from None
    except (OSError, ValueError) as exc:
        raise refuse(f"{MANIFEST} is unreadable: {type(exc).__name__}: {first_line(exc)}") from None
    if not (isinstance(manifest, dict) and manifest.get("kind") == "comparison"
            and isinstance(manifest.get("setting"), dict) and isinstance(manifest.get("algorithms"), list)
            and isinstance(manifest.get("seeds"), list) and manifest["algorithms"] and manifest["seeds"]):
        raise refuse(f"{MANIFEST} is not a comparison's manifest")
    missing = [key for key in SETTING_KEYS if key not in manifest["setting"]]
    if missing:
        former = [old for old, new in RENAMED.items() if new == missing[0] and old in manifest["setting"]]
        since = f" (written before {former[0]!r} was renamed {missing[0]}: run `pfxab compare --out` again)" \
            if former else ""
        raise refuse(f"{MANIFEST} lacks setting {missing[0]!r}{since}")
    tables = {}
    for name, columns in (("runs", RUN_COLUMNS), ("curves", CURVE_COLUMNS)):
        try:
            frame = pd.read_parquet(out / f"{name}.parquet")
        except FileNotFoundError:
            raise refuse(f"no {name}.parquet") from None
        except MemoryError:  # the machine's shortage, not the table's damage: said as such
            raise
        except (OSError, ValueError, pyarrow.ArrowException) as exc:
            raise refuse(f"{name}.parquet is unreadable: {type(exc).__name__}: {first_line(exc)}") from None
        for column in LATER_COLUMNS if name == "runs" else ():
            if column not in frame.columns:  # written before simple regret was kept: not known
                frame[column] = math.nan
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise refuse(f"{name}.parquet lacks column {missing[0]!r}")
        tables[name] = frame
    algorithms, seeds = tuple(manifest["algorithms"]), tuple(manifest["seeds"])
    expected = set(itertools.product(algorithms, seeds))
    runs, curves = tables["runs"], tables["curves"]
    pairs = list(zip(runs["algorithm"], runs["seed"], strict=True))
    if len(pairs) != len(expected) or set(pairs) != expected or set(
            zip(curves["algorithm"], curves["seed"], strict=True)) != expected:
        raise refuse(f"its tables do not hold the runs of its {MANIFEST}; run `pfxab compare --out` again")
    return Comparison(runs=runs, summary=summarise(runs, algorithms), curves=curves, setting=manifest["setting"],
                      algorithms=algorithms, seeds=seeds)

