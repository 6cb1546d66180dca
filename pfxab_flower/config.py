"""Every parameter of a run and of the Flower app, declared once: default, check, help, limits.

:data:`PARAMETERS` is the one declaration of the common parameters (an algorithm's own
parameters, e.g. PF-PNE's ``pf_pne_eps``, are declared by its policy instead: :func:`declared`
finds each). Derived from it or tested against it: :class:`RunConfig` and :class:`AppOptions`
(their defaults and checks), the command-line flags (``simulations/commands/options.py``), the
Flower run-config keys (kebab-case, ``noise-sigma``) and the ``[tool.flwr.app.config]`` defaults
in ``pyproject.toml`` (``tests/test_config.py`` compares them). The choices of ``problem``,
``algorithm`` and ``confidence`` are not listed here: they are read from their registries
(:mod:`pfxab_flower.problem_registry`, :mod:`pfxab_flower.algorithms.registry`,
:mod:`pfxab_flower.algorithms.bounds`) on each check. The command-line-only values
(``--engine``, ``--workers``, ``--algorithms``, ``--seeds``, ...) are declared here too (scope ``other``).

Every check of a declared parameter runs the same code, by its snake_case name:

* :func:`check` for Python values (API keyword arguments, a strategy's constructor): the type must be right
  (numpy integers and floats count as integers and numbers, ``bool`` is not a number), the value is returned as a
  plain Python value.
* :func:`parse` for text (flags, run-config keys, CSV or TOML rows): converted to the declared type, then checked.

A bad value raises :class:`ConfigError` with one line, ``"{name}={value!r} is invalid; allowed: {what}"``,
before any work starts (and before Ray starts). The name is spelled the way the value was given
(:func:`~pfxab_flower.errors.spelled_as`): ``noise_sigma`` from Python, ``--noise-sigma`` from the
command line, ``noise-sigma`` from a Flower run config or a sweep's TOML file.

The limits (``MAX_*``) are :mod:`pfxab_flower.limits`', each from a measurement; the values of one run and of the
Flower app are :class:`~pfxab_flower.run_parameters.RunConfig` and ``AppOptions``, built from these declarations.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.faults import DEFAULT_MIN_FRACTION, DEFAULT_ROUND_TIMEOUT
from pfxab_flower.limits import (
    MAX_CLIENTS,
    MAX_CURVE_POINTS,
    MAX_DIMENSIONS,
    MAX_HORIZON,
    MAX_INT64,
    MAX_SEED,
    MAX_SEEDS,
    NU1_RANGE,
    RHO_LOW,
    index_list,
    seed_ranges,
)
from pfxab_flower.problem_registry import problem_help

#: Reward noise models (:class:`~pfxab_flower.noise.NoiseModel`, which checks its kind here).
NOISE_KINDS = ("uniform", "gaussian", "bernoulli", "none")
#: What a pull is (docs/flower.md#evaluation-modes): objective + synthetic noise, an exact value, or one real call.
EVALUATIONS = ("simulated", "deterministic", "stochastic")
ENGINES = ("inprocess", "flower")
#: Where the runs of a sweep or comparison execute: a local process pool, or tasks on a Ray cluster.
EXECUTORS = ("processes", "ray")
#: Confidence widths of every algorithm's eliminations: the paper's (Hoeffding, worst-case noise) or
#: empirical-Bernstein ones from the observed variance (docs/algorithms/index.md).
CONFIDENCES = ("hoeffding", "bernstein")
#: Flower APIs the app runs on: the Message API (the default: several times cheaper per round,
#: see docs/performance.md) or the legacy Strategy/NumPyClient one.
APIS = ("message", "legacy")
#: The landmine data set's fields (0-based) and the default clients: both terrain types.
LANDMINE_FIELD_COUNT = 29
DEFAULT_LANDMINE_FIELDS = tuple(range(0, LANDMINE_FIELD_COUNT, 3))
#: RunConfig fields that are an algorithm's own parameter (declared by its policy, not in :data:`PARAMETERS`).
OPTION_FIELDS = ("pf_pne_eps", "random_fraction", "candidates")


@dataclass(frozen=True)
class Parameter:
    """One declared parameter: its type, default, what is allowed (the check) and its help text.

    A *choice* parameter (``problem``, ``noise``, ...) allows one of the names ``choices()``
    returns, each with a short description (``""`` if none). They are looked up on every check,
    not copied here: the problems come from :mod:`pfxab_flower.problem_registry`, which can
    grow after this module is imported. The error and the flag's ``{a,b}`` list both come from them.
    """

    name: str  # snake_case; the flag and the run-config key are its kebab-case (``key``)
    kind: type  # int, float, str, bool, or tuple (distinct client indices)
    default: Any
    rule: str  # the "allowed: ..." part of the one-line error ("" for a choice parameter: its choices)
    help: str
    valid: Callable[[Any], bool] = lambda value: True  # on the converted value
    optional: bool = False  # None (unset; "" in a run config) is allowed
    scope: str = "run"  # "run": a RunConfig field; "app": an AppOptions field; "other": a flag or a limit
    unset: str = "unset"  # what leaving an optional parameter unset means (its default in --help)
    choices: Callable[[], Mapping[str, str]] | None = None  # a choice parameter's names and descriptions

    @property
    def key(self) -> str:
        return self.name.replace("_", "-")

    @property
    def allowed(self) -> str:
        """The "allowed: ..." part of the one-line error."""
        return ", ".join(self.choices()) if self.choices is not None else self.rule

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` (already of the declared type) is allowed."""
        return value in self.choices() if self.choices is not None else self.valid(value)


def _between(low: float, high: float, low_open: bool = False, high_open: bool = False) -> Callable[[Any], bool]:
    def valid(value: float) -> bool:
        return (value > low if low_open else value >= low) and (value < high if high_open else value <= high)

    return valid


def _choice(name: str, default: str, help: str, choices: Callable[[], Mapping[str, str]] | tuple[str, ...],
            scope: str = "run") -> Parameter:
    """A choice parameter: one of ``choices`` (a fixed tuple, or a function giving names and descriptions)."""
    listed = (lambda: dict.fromkeys(choices, "")) if isinstance(choices, tuple) else choices
    return Parameter(name, str, default, "", help, scope=scope, choices=listed)


def _algorithm_list(text: str) -> list[str] | None:
    """The names of an ``--algorithms`` text, in order, or ``None`` if one is unknown or repeated."""
    names = [name.strip() for name in text.split(",")]
    if any(name not in algorithm_names() for name in names) or len(set(names)) != len(names):
        return None
    return names


_CORES = os.cpu_count() or 1
_SEEDS_ALLOWED = (f"an integer, a range like 0-9, or a comma-separated list like 0,3,5 (integers in [0, 2**32), "
                  f"no repeats, at most {MAX_SEEDS:,} seeds)")

#: The declaration: RunConfig fields (in order), then the Flower app's options, then other flags and limits.
PARAMETERS: dict[str, Parameter] = {p.name: p for p in (
    _choice("problem", "garland", "federation to optimise", problem_help),
    _choice("algorithm", "pf-xab", "algorithm", lambda: _registered_algorithms()),
    Parameter("clients", int, 10, f"an integer in [1, {MAX_CLIENTS}]",
              f"number of clients M, at most {MAX_CLIENTS}",
              _between(1, MAX_CLIENTS)),
    Parameter("alpha", float, 0.5, "a number in [0, 1]", "personalisation weight in [0, 1]", _between(0, 1)),
    Parameter("horizon", int, 2_000_000, f"an integer in [1, {MAX_HORIZON:,}]",
              f"pulls per client T, at most {MAX_HORIZON:,}",
              _between(1, MAX_HORIZON)),
    Parameter("seed", int, 0, "an integer in [0, 2**32)", "random seed (noise), in [0, 2**32)",
              _between(0, MAX_SEED)),
    Parameter("nu1", float, 1.0, f"a number in [{NU1_RANGE[0]:g}, {NU1_RANGE[1]:g}]",
              f"smoothness constant nu1 in [{NU1_RANGE[0]:g}, {NU1_RANGE[1]:g}]", _between(*NU1_RANGE)),
    Parameter("rho", float, 0.5, f"a number in [{RHO_LOW:g}, 1)", f"smoothness rate rho in [{RHO_LOW:g}, 1)",
              _between(RHO_LOW, 1, high_open=True)),
    _choice("noise", "uniform", "noise model", NOISE_KINDS),
    Parameter("noise_sigma", float, 0.1, "a number >= 0", "noise scale sigma >= 0", _between(0, math.inf)),
    _choice("evaluation", "simulated", "what a pull is: simulated, deterministic or stochastic", EVALUATIONS),
    Parameter("spread", float, 0.3, "a number in [0, 1)", "spread of the synthetic clients' shifts, in [0, 1)",
              _between(0, 1, high_open=True)),
    Parameter("max_depth", int, None, "an integer >= 1 (or unset for no limit)", "deepest phase",
              _between(1, MAX_INT64), optional=True, unset="none, the budget alone limits the depth"),
    Parameter("max_evaluations", int, None, "an integer >= 1 (or unset for no limit)",
              "most distinct points each client evaluates (a phase starts only if it fits)",
              _between(1, MAX_INT64), optional=True, unset="none, the horizon alone limits the run"),
    _choice("confidence", "hoeffding",
            "confidence widths: hoeffding (the paper's) or bernstein (from the observed variance)",
            lambda: _registered_bounds()),
    Parameter("landmine_data", str, None, "a file path", "path to LandmineData.mat (landmine problem)",
              optional=True, unset="$PFXAB_LANDMINE_DATA, else the downloaded copy in the cache"),
    Parameter("fields", str, None, f"distinct comma-separated integers in 0..{LANDMINE_FIELD_COUNT - 1}",
              "comma-separated landmine field indices (landmine problem)",
              lambda text: index_list(text, LANDMINE_FIELD_COUNT) is not None, optional=True,
              unset=",".join(map(str, DEFAULT_LANDMINE_FIELDS))),
    # The Flower app (run-config keys beside the RunConfig fields).
    Parameter("out_dir", str, "results/latest", "a directory path",
              "where the ServerApp writes summary.json, clients.csv, curve.csv", lambda text: bool(text.strip()),
              scope="app"),
    Parameter("round_timeout", float, DEFAULT_ROUND_TIMEOUT, "a number of seconds > 0",
              "longest a Flower round may take, in seconds",
              _between(0, math.inf, low_open=True), scope="app"),
    Parameter("fail_rate", float, 0.0, "a probability in [0, 1]",
              "inject failures: each client misses each phase with this probability", _between(0, 1), scope="app"),
    Parameter("fail_clients", tuple, None, "distinct comma-separated client indices, or \"\" for every client",
              "the clients fail-rate applies to, comma-separated", optional=True, scope="app",
              unset="every client"),
    Parameter("straggle_seconds", float, 0.0, "a number of seconds >= 0 (0: injected failures)",
              "the clients fail-rate selects answer this many seconds late instead of failing "
              "(a failure if at least round-timeout)", _between(0, math.inf), scope="app"),
    Parameter("min_fraction", float, DEFAULT_MIN_FRACTION, "a number in [0, 1] (0: never stop)",
              "stop unless this share of the clients answers in every exchange", _between(0, 1), scope="app"),
    Parameter("secure_aggregation", bool, False, "true, false",
              "sum the local means with Flower's SecAgg+ (true/false)", scope="app"),
    _choice("api", "message", "Flower API: message (Message API) or legacy (Strategy/NumPyClient)", APIS,
            scope="app"),
    # Flags and limits that are not run-config keys.
    Parameter("num_cpus", float, 1.0, f"a number in (0, {_CORES}] (this machine's cores)",
              "CPUs per simulated client, at most this machine's cores (Ray waits forever for more)",
              _between(0, _CORES, low_open=True), scope="other"),
    Parameter("seeds", str, "0", _SEEDS_ALLOWED, "seeds, e.g. 0-9 or 0,3,5",
              lambda text: seed_ranges(text) is not None, scope="other"),
    Parameter("curve_points", int, 200, f"an integer in [2, {MAX_CURVE_POINTS}]",
              "points of each run's regret curve in a sweep", _between(2, MAX_CURVE_POINTS), scope="other"),
    _choice("executor", "processes",
            "where the runs execute: local worker processes, or tasks on the Ray cluster at --ray-address", EXECUTORS,
            scope="other"),
    Parameter("ray_address", str, None, "HOST:PORT of a running Ray head node (what `ray start --head` prints)",
              "an existing Ray cluster to run on (HOST:PORT of its head node)",
              lambda text: bool(text.strip()), optional=True, scope="other", unset="none, run locally"),
    Parameter("dimensions", int, 1, f"an integer in [1, {MAX_DIMENSIONS}] (dimensions of the domain)",
              "dimensions of a search space", _between(1, MAX_DIMENSIONS), scope="other"),
    Parameter("workers", int, 1, f"an integer in [1, {_CORES}] (this machine's CPUs)",
              "local worker processes, at most this machine's CPUs (more only queue for the same cores)",
              _between(1, _CORES), scope="other"),
    Parameter("algorithms", str, None, "a comma-separated list of distinct registered algorithm names",
              "comma-separated algorithms to compare", lambda text: _algorithm_list(text) is not None, optional=True,
              scope="other", unset="every registered algorithm"),
    _choice("engine", "inprocess", "engine: the in-process loop or a Flower simulation", ENGINES, scope="other"),
)}


def _fail(name: str, value: object, allowed: str) -> NoReturn:
    raise ConfigError(f"{spelled(name)}={value!r} is invalid; allowed: {allowed}")


def algorithm_names() -> tuple[str, ...]:
    """The registered algorithms (:mod:`pfxab_flower.algorithms.registry`), looked up when needed.

    Lazily: the algorithms import this module, and an algorithm registered after import
    (``register_algorithm``) is one of the choices from then on.
    """
    return tuple(_registered_algorithms())


def _registered_algorithms() -> dict[str, str]:
    """The registered algorithms' names and one-line descriptions (the ``algorithm`` choices)."""
    from pfxab_flower.algorithms import registry  # the algorithms import this module: read it when asked

    return {name: registry.policy_class(name).description for name in registry.algorithm_names()}


def _registered_bounds() -> dict[str, str]:
    """The registered confidence bounds (the ``confidence`` choices): a bound added at run time is one too."""
    from pfxab_flower.algorithms.bounds import BOUNDS  # the bounds import this module: read it when asked

    return dict.fromkeys(BOUNDS, "")


def __getattr__(name: str) -> Any:
    """``ALGORITHMS``: the registered algorithms' names, as of the moment it is read."""
    if name == "ALGORITHMS":
        return algorithm_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def declared(name: str) -> Parameter:
    """The declaration of ``name``: :data:`PARAMETERS`', or the algorithm that declares it (``pf_pne_eps``)."""
    if name in PARAMETERS:
        return PARAMETERS[name]
    from pfxab_flower.algorithms.registry import declared_options  # see _registered_algorithms

    options = declared_options()
    if name not in options:
        known = ", ".join(p.key for p in [*PARAMETERS.values(), *options.values()])
        raise ConfigError(f"unknown parameter {name.replace('_', '-')!r}; allowed: {known}")
    return options[name]


_declared = declared


def check(name: str, value: Any, label: str | None = None) -> Any:
    """Validate the Python value of the declared parameter ``name`` (snake_case); the plain value.

    Numpy scalars are accepted as the Python values they hold (``np.int64(5)`` is an
    integer); ``bool`` is neither an integer nor a number. Anything else raises
    :class:`ConfigError` with one line naming the value (as ``label``, e.g. a keyword
    argument's own name, if given) and what is allowed.
    """
    return check_against(_declared(name), value, label)


def check_against(p: Parameter, value: Any, label: str | None = None) -> Any:
    """:func:`check` with the declaration ``p`` itself, e.g. a declared one with a limit known only at run time."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None and p.optional:
        return None
    converted = _typed(p, value)
    if converted is None or not p.accepts(converted):
        if label is not None:  # a Python keyword argument, named as the caller wrote it
            raise ConfigError(f"{label}={value!r} is invalid; allowed: {p.allowed}")
        _fail(p.name, value, p.allowed)
    return converted


def _typed(p: Parameter, value: Any) -> Any:
    """``value`` as ``p.kind``, or ``None`` if it is not one (a bool is never a number)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if p.kind is int:
        return value if number and isinstance(value, int) else None
    if p.kind is float:
        return float(value) if number and math.isfinite(value) else None
    if p.kind is bool:
        return value if isinstance(value, bool) else None
    if p.kind is tuple:
        return _client_indices(value)
    return value if isinstance(value, p.kind) else None


def _client_indices(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, str):
        return index_list(value, MAX_CLIENTS)
    if isinstance(value, tuple | list) and all(isinstance(v, int | np.integer) and not isinstance(v, bool)
                                               for v in value):
        return index_list(",".join(str(int(v)) for v in value), MAX_CLIENTS)
    return None


def parse(name: str, value: Any) -> Any:
    """Like :func:`check`, for a value that may be text (a flag, a run-config key, a CSV cell).

    ``"0.5"`` becomes ``0.5``, ``"true"`` ``True``, ``""``/``none``/``null`` unset
    (for an optional parameter) and ``""`` every client for ``fail_clients``; text that
    does not convert is reported as given.
    """
    return check(name, _from_text(_declared(name), value))


def _from_text(p: Parameter, value: Any) -> Any:
    if p.kind is int and isinstance(value, float) and value.is_integer():
        return int(value)  # a TOML or CSV number written 2e6
    if not isinstance(value, str) or p.kind in (str, tuple):
        return None if p.optional and isinstance(value, str) and _unset(value) else value
    text = value.strip()
    if p.optional and _unset(text):
        return None
    try:
        if p.kind is int:
            if text.lstrip("+-").isdecimal():
                return int(text)
            number = float(text)  # "2e6"; "1e30" stays text, reported as given
            return int(number) if number.is_integer() and abs(number) <= MAX_INT64 else value
        if p.kind is float:
            return float(text)
    except (ValueError, OverflowError):
        return value
    if p.kind is bool and text.lower() in ("true", "false"):
        return text.lower() == "true"
    return value


def _unset(text: str) -> bool:
    return text.strip().lower() in ("", "none", "null")


def run_config_value(name: str, value: Any) -> Any:
    """How a value is written in a Flower run config / ``pyproject.toml`` (``""`` for unset, ``"1,2"`` for lists)."""
    if value is None:
        return ""
    if declared(name).kind is tuple:
        return ",".join(map(str, value))
    return value


def scoped(scope: str) -> list[Parameter]:
    """The declared parameters of one scope (``run``, ``app`` or ``other``), in declaration order.

    ``run`` also holds the algorithms' own parameters that are :class:`RunConfig` fields (``pf_pne_eps``).
    """
    core = [declared(p.name) for p in PARAMETERS.values() if p.scope == scope]
    if scope != "run":
        return core
    return core + [declared(name) for name in OPTION_FIELDS]


def parse_seeds(text: str) -> list[int]:
    """The seeds of ``--seeds``: ``7``, ``0-9`` (inclusive) or ``0,3,5`` (items may be ranges), in order.

    At most :data:`MAX_SEEDS`, counted before the list is built.
    """
    ranges = seed_ranges(str(text))
    if ranges is None:
        _fail("seeds", text, _SEEDS_ALLOWED)
    return [seed for first, last in ranges for seed in range(first, last + 1)]


def parse_algorithms(text: str) -> list[str]:
    """The algorithms of ``--algorithms``: a comma-separated list of names, in order, no repeats."""
    names = [name.strip() for name in str(text).split(",")]
    known = algorithm_names()
    if any(name not in known for name in names) or len(set(names)) != len(names):
        _fail("algorithms", text, f"a comma-separated list of distinct names from {', '.join(known)}")
    return names


def parse_workers(text: str | int) -> int:
    """The number of worker processes of ``--workers``: an integer in [1, this machine's CPUs].

    More workers than CPUs only queue for the same cores (``--workers 100000`` forked every
    worker before the first job ran and brought the machine to a load of 300).
    """
    return int(parse("workers", text))  # an int already: parse checked it
