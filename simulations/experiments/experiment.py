"""An experiment configuration (TOML): one paper figure's fixed parameters and grid, every run checked first.

Tables ``[experiment]`` (``name``, ``kind``: ``regret`` or ``rewards``, optional ``title``), ``[fixed]``
(run parameters shared by every run) and ``[grid]`` (run parameters to vary: every combination is one
run); see ``simulations/configs/`` and docs/results.md. A bad value anywhere is one line naming the file
and the key, and nothing runs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import stat
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pfxab_flower.algorithms.registry import algorithm_names, label
from pfxab_flower.errors import ConfigError, spelled_as
from pfxab_flower.limits import MAX_CONFIG_BYTES, MAX_SWEEP_RUNS, MAX_TITLE_CHARS
from pfxab_flower.schema.catalogue import PARAMETERS, RENAMED, check, refuse_renamed, scoped
from pfxab_flower.schema.own_options import away_from_default, refuse_unread
from pfxab_flower.schema.run_config import RunConfig

KINDS = ("regret", "rewards")
_EXPERIMENT_KEYS = ("name", "kind", "title", "curve_points")
_RUN_FIELDS = tuple(RunConfig.names())


@dataclass(frozen=True)
class Experiment:
    """A parsed, fully validated experiment: its metadata and one RunConfig per grid row."""

    name: str
    kind: str
    title: str
    fixed: dict[str, Any]
    grid: dict[str, list[Any]]
    configs: tuple[RunConfig, ...]
    curve_points: int = 200
    #: The TOML text it was read from (the sweep keeps it as ``config.toml`` beside the results).
    source: str = ""

    @property
    def varying(self) -> tuple[str, ...]:
        """The RunConfig fields the grid varies (snake case, in file order)."""
        return tuple(self.grid)


def _where(path: Path, table: str, key: str | None = None) -> str:
    return f"{path.name}: [{table}]" + (f" {key}" if key else "")


def bundled_experiments() -> dict[str, Path]:
    """The experiment configs shipped inside the package (the paper's figures), by name."""
    folder = Path(__file__).resolve().parents[1] / "configs"  # package data: simulations/configs, installed too
    return {p.stem: p for p in sorted(folder.glob("*.toml"))}


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # e.g. a name too long: read_config_text says why
        return True


def resolve_experiment(spec: str | Path) -> Path:
    """A config path as given, or the bundled config of that name (``figure1``), so sweeps work from a wheel."""
    path = Path(spec)
    if path.suffix or _exists(path):
        return path
    bundled = bundled_experiments()
    if str(spec) in bundled:
        return bundled[str(spec)]
    raise ConfigError(f"config={str(spec)!r} is invalid; allowed: an existing TOML file or a bundled experiment "
                      f"({', '.join(bundled)})")


def load_experiment(path: str | Path) -> Experiment:
    """Read and validate an experiment TOML (or a bundled one by name); one-line :class:`ConfigError` if bad."""
    path = resolve_experiment(path)
    source = read_config_text(path)
    try:
        data = tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise ConfigError(f"{path.name}: not valid TOML ({first})") from None
    except RecursionError:  # tomllib recurses once per level of nested arrays or tables
        raise ConfigError(f"{path.name}: not valid TOML (nested deeper than can be read); allowed: a [grid] of "
                          "flat lists of values") from None
    unknown = sorted(set(data) - {"experiment", "fixed", "grid"})
    if unknown:
        raise ConfigError(f"{path.name}: unknown table [{unknown[0]}]; allowed: [experiment], [fixed], [grid]")
    meta = _table(data, "experiment", path)
    for key in meta:
        if key not in _EXPERIMENT_KEYS:
            raise ConfigError(f"{_where(path, 'experiment', key)} is unknown; allowed: {', '.join(_EXPERIMENT_KEYS)}")
    # a file name that is not UTF-8 names the experiment with U+FFFD where its bytes were: it is printed
    name = meta.get("name", os.fsencode(path.stem).decode("utf-8", "replace"))
    kind = meta.get("kind", "regret")
    if kind not in KINDS:
        raise ConfigError(f"{_where(path, 'experiment', 'kind')}={kind!r} is invalid; allowed: {', '.join(KINDS)}")
    try:
        with spelled_as("keyword"):  # errors name the file's own keys: snake_case in [experiment]
            curve_points = check("curve_points", meta.get("curve_points", PARAMETERS["curve_points"].default))
    except ConfigError as exc:
        raise ConfigError(f"{_where(path, 'experiment')} {exc}") from None
    for key in ("name", "title"):  # text for people (a figure's title): a 900 KB title took plot 172 s
        text = meta.get(key)
        if text is not None and (not isinstance(text, str) or len(text) > MAX_TITLE_CHARS):
            shown = repr(text) if len(repr(text)) <= 80 else repr(text)[:60] + "..."
            raise ConfigError(f"{_where(path, 'experiment', key)}={shown} is invalid; allowed: a text of at most "
                              f"{MAX_TITLE_CHARS} characters")
    fixed = {_field_name(k, path, "fixed"): v for k, v in _unique_fields(data, "fixed", path).items()}
    grid: dict[str, list[Any]] = {}
    for key, values in _unique_fields(data, "grid", path).items():
        name_ = _field_name(key, path, "grid")
        if not isinstance(values, list) or not values or any(isinstance(v, list | dict) for v in values):
            shown = repr(values) if len(repr(values)) <= 80 else repr(values)[:60] + "..."
            raise ConfigError(f"{_where(path, 'grid', key)}={shown} is invalid; allowed: a non-empty list of "
                              "values (numbers or strings)")
        if name_ in fixed:
            raise ConfigError(f"{_where(path, 'grid', key)} is also in [fixed]; allowed: one of the two")
        grid[name_] = values
    rows = math.prod(len(values) for values in grid.values())
    if rows > MAX_SWEEP_RUNS:  # counted before a single row is built
        sizes = " x ".join(str(len(values)) for values in grid.values())
        raise ConfigError(f"{_where(path, 'grid')} has {rows:,} runs ({sizes}); allowed: at most "
                          f"{MAX_SWEEP_RUNS:,} runs per sweep (split it into several sweeps)")
    configs = []
    for row in itertools.product(*grid.values()):
        values = {**fixed, **dict(zip(grid, row, strict=True))}
        try:
            with spelled_as("key"):  # kebab-case in [fixed] and [grid], as their list of allowed keys
                configs.append(RunConfig.from_mapping(values))
        except ConfigError as exc:
            raise ConfigError(f"{path.name}: {exc}") from None
    if len({run_id(c) for c in configs}) != len(configs):
        raise ConfigError(f"{_where(path, 'grid')} has repeated values; allowed: distinct values per key")
    for field in dict.fromkeys([*fixed, *grid]):  # an own parameter set where no run of the sweep reads it: refused
        runs = [(c.algorithm, c.problem) for c in configs if field in away_from_default(c.options)]
        try:
            with spelled_as("key"):
                refuse_unread(runs, next((c.options for c in configs if field in away_from_default(c.options)), {}),
                              [field] if runs else [])
        except ConfigError as exc:
            raise ConfigError(f"{path.name}: {exc}") from None
    return Experiment(str(name), kind, str(meta.get("title", name)), fixed, grid, tuple(configs), curve_points,
                      source)


def read_config_text(path: Path) -> str:
    """The text of a config file: a regular file of at most :data:`MAX_CONFIG_BYTES`, UTF-8; one line otherwise.

    Opened without blocking and checked on the open file, so a FIFO (which would wait for a
    writer for ever), a device (``/dev/zero``: endless) or a huge file is refused before reading.
    """
    where = f"config={str(path)!r}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ConfigError(f"{where} is invalid; allowed: an existing TOML file") from None
    except OSError as exc:  # no permission, a name too long, an I/O error
        raise ConfigError(f"{where} is invalid ({exc.strerror or exc}); allowed: a readable TOML file") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError(f"{where} is invalid (Is a directory); allowed: a readable TOML file")
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{where} is invalid (not a regular file: a FIFO, socket or device); "
                              "allowed: a readable TOML file")
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{where} is invalid ({info.st_size:,} bytes); allowed: a TOML file of at most "
                              f"{MAX_CONFIG_BYTES:,} bytes")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{where} is invalid ({exc.strerror or exc}); allowed: a readable TOML file") from None
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:  # it grew while we looked
        raise ConfigError(f"{where} is invalid (over {MAX_CONFIG_BYTES:,} bytes); allowed: a smaller TOML file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path.name}: not valid TOML (not UTF-8 text: {exc.reason} at byte {exc.start})") from None


def _table(data: dict[str, Any], name: str, path: Path) -> dict[str, Any]:
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path.name}: {name}={table!r} is invalid; allowed: a [{name}] table")
    return table


def _unique_fields(data: dict[str, Any], table: str, path: Path) -> dict[str, Any]:
    """A table whose keys name distinct fields: ``noise-sigma`` and ``noise_sigma`` are one field, and
    silently letting the later one win (or, in ``[grid]``, dropping the other's grid points) is refused."""
    entries = _table(data, table, path)
    seen: dict[str, str] = {}
    for key in entries:
        name = _field_name(key, path, table)
        if name in seen:
            raise ConfigError(f"{_where(path, table, key)} and {seen[name]} are the same field; allowed: one "
                              "spelling of each key per table")
        seen[name] = key
    return entries


def _field_name(key: str, path: Path, table: str) -> str:
    name = key.replace("-", "_")
    if name not in _RUN_FIELDS:
        refuse_renamed(key, _where(path, table, key), spelling="keyword")  # snake_case, as the bundled files spell keys
        allowed = ", ".join(f.replace("_", "-") for f in _RUN_FIELDS)
        raise ConfigError(f"{_where(path, table, key)} is unknown; allowed: {allowed}")
    return name


#: Parameters added after results were first written (declared ``late``): left out of a run's id at their
#: default, so an older results directory keeps its run ids (and resumes) unchanged.
LATER_FIELDS = tuple(p.name for p in scoped("run") if p.late)
LATER_FIELD_DEFAULTS = {name: getattr(RunConfig(), name) for name in LATER_FIELDS}
#: A renamed field's name when run ids were first written (``num_clients`` was ``clients``): a run's id hashes it under
#: that name, and a run directory's ``config.json`` written then names it so, so such a directory resumes unchanged.
FIRST_NAMES = {new: old for old, new in RENAMED.items()}


def same_run(saved: Mapping[str, Any], config: RunConfig) -> bool:
    """Whether a run directory's ``config.json`` is ``config``'s: a field added later (:data:`LATER_FIELDS`) that it
    lacks counts as at its default, as :func:`run_id` leaves such a field out (both name the same run, so a sweep
    written before an algorithm's own parameter existed resumes without redoing its runs)."""
    expected: dict[str, Any] = json.loads(json.dumps(config.to_dict()))  # as written (tuples become lists)
    defaults: dict[str, Any] = json.loads(json.dumps(LATER_FIELD_DEFAULTS))
    saved = {RENAMED.get(k, k): v for k, v in saved.items()}  # written before a rename (FIRST_NAMES)
    filled: dict[str, Any] = {**{k: v for k, v in defaults.items() if k not in saved}, **saved}
    return filled == expected


#: What :func:`run_id` makes (the only names a sweep owns in its ``runs/``).
RUN_ID_PATTERN = re.compile(r"[a-z]+-[a-z-]+-a[0-9.e+-]+-s[0-9]+-[0-9a-f]{12}")


def run_id(config: RunConfig) -> str:
    """A stable, readable directory name for one run: a slug plus a hash of every field."""
    fields = {FIRST_NAMES.get(k, k): v for k, v in config.to_dict().items()
              if LATER_FIELD_DEFAULTS.get(k, object()) != v}
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]
    return f"{config.problem}-{config.algorithm}-a{config.alpha:g}-s{config.seed}-{digest}"


class _Labels(Mapping[str, str]):
    """Each registered algorithm's label (``PF-XAB``), read from the registry when asked."""

    def __getitem__(self, name: str) -> str:
        if name not in algorithm_names():
            raise KeyError(name)
        return label(name)

    def __iter__(self) -> Iterator[str]:
        return iter(algorithm_names())

    def __len__(self) -> int:
        return len(algorithm_names())


#: How algorithms are named in figures and tables (as in the paper): their policies' ``label``.
ALGORITHM_LABELS: Mapping[str, str] = _Labels()


def series_keys(experiment: Experiment) -> list[str]:
    """Grid fields that distinguish lines (every varying field except alpha and the seed)."""
    return [k for k in experiment.varying if k not in ("alpha", "seed")]


def series_label(experiment: Experiment, values: tuple[Any, ...]) -> str:
    """The legend / row label of one series: the algorithm's name, then any other varying field."""
    keys = series_keys(experiment)
    parts = [
        ALGORITHM_LABELS.get(value, str(value)) if key == "algorithm" else f"{key}={value}"
        for key, value in zip(keys, values, strict=True)
    ]
    if "algorithm" not in keys:
        algorithm = experiment.fixed.get("algorithm", "pf-xab")
        parts.insert(0, ALGORITHM_LABELS.get(algorithm, algorithm))
    return ", ".join(parts)
