"""The common parameters of a run and of the Flower app (:data:`PARAMETERS`), and the check of a value by name.

The algorithms' and problems' own parameters are declared by their owners and found here through
the registries (:func:`declared`, :func:`scoped`): this module sits above both. RunConfig, the
flags, the run-config keys and ``[tool.flwr.app.config]`` all derive from what it finds.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import Any

from pfxab_flower import namespace
from pfxab_flower.algorithms import registry
from pfxab_flower.algorithms.bounds import BOUNDS
from pfxab_flower.arms.domain import DIMENSIONS
from pfxab_flower.arms.noise import NOISE, NOISE_SIGMA
from pfxab_flower.errors import SPELLINGS, ConfigError, spelled
from pfxab_flower.faults import DEFAULT_MIN_FRACTION, DEFAULT_ROUND_TIMEOUT
from pfxab_flower.limits import (
    MAX_CURVE_POINTS,
    MAX_HORIZON,
    MAX_INT64,
    MAX_SEED,
    MAX_SEEDS,
    NU1_RANGE,
    RHO_LOW,
    seed_ranges,
)
from pfxab_flower.parameter import Parameter, between, check_against, choice, from_text, refuse
from pfxab_flower.problems import registry as problem_registry
from pfxab_flower.problems.federation import EVALUATION, NUM_CLIENTS

ENGINES = ("inprocess", "flower")
#: Where the runs of a sweep or comparison execute: a local process pool, or tasks on a Ray cluster.
EXECUTORS = ("processes", "ray")
#: Confidence widths of every algorithm's eliminations: the paper's (Hoeffding, worst-case noise) or
#: empirical-Bernstein ones from the observed variance (docs/algorithms/index.md).
CONFIDENCES = ("hoeffding", "bernstein")
#: Flower APIs the app runs on: the Message API (the default: several times cheaper per round,
#: see docs/performance.md) or the legacy Strategy/NumPyClient one.
APIS = ("message", "legacy")


def _algorithm_list(text: str) -> list[str] | None:
    """The names of an ``--algorithms`` text, in order, or ``None`` if one is unknown or repeated."""
    names = [name.strip() for name in text.split(",")]
    if any(name not in algorithm_names() for name in names) or len(set(names)) != len(names):
        return None
    return names


_CORES = os.cpu_count() or 1
#: The least share of a core per simulated client: each client Ray runs at once is a worker process of its own
#: (about 150 MB), so ``1 / MIN_CPUS`` per core at most.
MIN_CPUS = 0.125
_SEEDS_ALLOWED = (f"an integer, a range like 0-9, or a comma-separated list like 0,3,5 (integers in [0, 2**32), "
                  f"no repeats, at most {MAX_SEEDS:,} seeds)")

#: The declaration: RunConfig fields (in order), then the Flower app's options, then other flags and limits.
PARAMETERS: dict[str, Parameter] = {p.name: p for p in (
    choice("problem", "garland", "federation to optimise", problem_registry.problem_help),
    choice("algorithm", "pf-xab", "algorithm", lambda: _registered_algorithms()),
    NUM_CLIENTS,
    Parameter("alpha", float, 0.5, "a number in [0, 1]", "personalisation weight in [0, 1]", between(0, 1),
              every_algorithm=True),
    Parameter("horizon", int, 2_000_000, f"an integer in [1, {MAX_HORIZON:,}]",
              f"pulls per client T, at most {MAX_HORIZON:,}",
              between(1, MAX_HORIZON), every_algorithm=True),
    Parameter("seed", int, 0, "an integer in [0, 2**32)", "random seed (noise), in [0, 2**32)",
              between(0, MAX_SEED), every_algorithm=True),
    Parameter("nu1", float, 1.0, f"a number in [{NU1_RANGE[0]:g}, {NU1_RANGE[1]:g}]",
              f"smoothness constant nu1 in [{NU1_RANGE[0]:g}, {NU1_RANGE[1]:g}]", between(*NU1_RANGE),
              every_algorithm=True),
    Parameter("rho", float, 0.5, f"a number in [{RHO_LOW:g}, 1)", f"smoothness rate rho in [{RHO_LOW:g}, 1)",
              between(RHO_LOW, 1, high_open=True), every_algorithm=True),
    NOISE,
    NOISE_SIGMA,
    EVALUATION,
    Parameter("max_depth", int, None, "an integer >= 1 (or unset for no limit)", "deepest phase",
              between(1, MAX_INT64), optional=True, unset="none, the budget alone limits the depth",
              every_algorithm=True),
    Parameter("max_evaluations", int, None, "an integer >= 1 (or unset for no limit)",
              "most distinct points each client evaluates (a phase starts only if it fits)",
              between(1, MAX_INT64), optional=True, unset="none, the horizon alone limits the run", late=True,
              every_algorithm=True),
    replace(choice("confidence", "hoeffding",
                   "confidence widths: hoeffding (the paper's) or bernstein (from the observed variance)",
                   lambda: _registered_bounds()), late=True, every_algorithm=True),
    # The Flower app (run-config keys beside the RunConfig fields).
    Parameter("out_dir", str, "results/latest", "a directory path",
              "where the ServerApp writes summary.json, clients.csv, curve.csv", lambda text: bool(text.strip()),
              scope="app"),
    Parameter("round_timeout", float, DEFAULT_ROUND_TIMEOUT, "a number of seconds > 0",
              "longest a Flower round may take, in seconds",
              between(0, math.inf, low_open=True), scope="app"),
    Parameter("fail_rate", float, 0.0, "a probability in [0, 1]",
              "inject failures: each client misses each phase with this probability", between(0, 1), scope="app"),
    Parameter("fail_clients", tuple, None, "distinct comma-separated client indices, or \"\" for every client",
              "the clients fail-rate applies to, comma-separated", optional=True, scope="app",
              unset="every client"),
    Parameter("straggle_seconds", float, 0.0, "a number of seconds >= 0 (0: injected failures)",
              "the clients fail-rate selects answer this many seconds late instead of failing "
              "(a failure if at least round-timeout)", between(0, math.inf), scope="app"),
    Parameter("min_fraction", float, DEFAULT_MIN_FRACTION, "a number in [0, 1] (0: never stop)",
              "stop unless this share of the clients answers in every exchange", between(0, 1), scope="app"),
    Parameter("secure_aggregation", bool, False, "true, false",
              "sum the local means with Flower's SecAgg+ (true/false)", scope="app"),
    choice("api", "message", "Flower API: message (Message API) or legacy (Strategy/NumPyClient)", APIS,
            scope="app"),
    # Flags and limits that are not run-config keys.
    Parameter("num_cpus", float, 1.0, f"a number in [{MIN_CPUS}, {_CORES}] (this machine's cores)",
              "CPUs per simulated client, at most this machine's cores (Ray waits forever for more); a fraction "
              "lets that many clients' evaluations overlap (objectives that wait more than they compute)",
              between(MIN_CPUS, _CORES), scope="other"),
    Parameter("seeds", str, "0", _SEEDS_ALLOWED, "seeds, e.g. 0-9 or 0,3,5",
              lambda text: seed_ranges(text) is not None, scope="other"),
    Parameter("curve_points", int, 200, f"an integer in [2, {MAX_CURVE_POINTS}]",
              "points of each run's regret curve in a sweep", between(2, MAX_CURVE_POINTS), scope="other"),
    choice("executor", "processes",
            "where the runs execute: local worker processes, or tasks on the Ray cluster at --ray-address", EXECUTORS,
            scope="other"),
    Parameter("ray_address", str, None, "HOST:PORT of a running Ray head node (what `ray start --head` prints)",
              "an existing Ray cluster to run on (HOST:PORT of its head node)",
              lambda text: bool(text.strip()), optional=True, scope="other", unset="none, run locally"),
    DIMENSIONS,
    Parameter("workers", int, 1, f"an integer in [1, {_CORES}] (this machine's CPUs)",
              "local worker processes, at most this machine's CPUs (more only queue for the same cores)",
              between(1, _CORES), scope="other"),
    Parameter("algorithms", str, None, "a comma-separated list of distinct registered algorithm names",
              "comma-separated algorithms to compare", lambda text: _algorithm_list(text) is not None, optional=True,
              scope="other", unset="every registered algorithm (of an optional extra: if it is installed)"),
    choice("engine", "inprocess", "engine: the in-process loop or a Flower simulation", ENGINES, scope="other"),
)}


namespace.reserve(PARAMETERS, "a common run parameter")

#: The keywords every algorithm takes, each a declared parameter of the same name: every parameter declared
#: ``every_algorithm``, in order (``num_clients``, ``alpha``, ``horizon``, ...).
#: Derived: a new common parameter is its declaration above (and the code that reads it), nothing more.
COMMON: tuple[str, ...] = tuple(p.name for p in PARAMETERS.values() if p.every_algorithm)

namespace.reserve(COMMON, "a common run parameter")

#: Former names of common parameters, each with its name now. One name each in the code: a former keyword, run-config
#: or sweep key is refused with a line naming the new one (:func:`refuse_renamed`), and no own parameter may take it;
#: only the command line reads a former flag, as the new one with a warning (``cli.commands.options.RenamedFlag``).
RENAMED: dict[str, str] = {"clients": NUM_CLIENTS.name}

namespace.reserve(RENAMED, "a common run parameter, before it was renamed")


def refuse_renamed(given: str, where: str | None = None, spelling: str | None = None) -> None:
    """A one-line :class:`ConfigError` if ``given`` (as the user wrote it: ``clients``, ``--clients``) is a former
    name (:data:`RENAMED`); nothing otherwise.

    The line names the new name as ``spelling`` (a key of :data:`~pfxab_flower.errors.SPELLINGS`; default: the
    entry point's, :func:`~pfxab_flower.errors.spelled`) and ``given`` as ``where`` if given (a sweep file's place).
    """
    name = given.lstrip("-").replace("-", "_")
    if name in RENAMED:
        new = SPELLINGS[spelling](RENAMED[name]) if spelling is not None else spelled(RENAMED[name])
        raise ConfigError(f"{where or repr(given)} is renamed {new}; allowed: {new}")


def algorithm_names() -> tuple[str, ...]:
    """The registered algorithms (:mod:`pfxab_flower.algorithms.registry`), looked up when needed.

    On each call: an algorithm registered after import (``register_algorithm``) is one of the choices from then on.
    """
    return tuple(_registered_algorithms())


def _registered_algorithms() -> dict[str, str]:
    """The registered algorithms' names and one-line descriptions (the ``algorithm`` choices)."""
    return {name: registry.policy_class(name).description for name in registry.algorithm_names()}


def _registered_bounds() -> dict[str, str]:
    """The registered confidence bounds (the ``confidence`` choices): a bound added at run time is one too."""
    return dict.fromkeys(BOUNDS, "")


def __getattr__(name: str) -> Any:
    """``ALGORITHMS``: the registered algorithms' names, as of the moment it is read."""
    if name == "ALGORITHMS":
        return algorithm_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def own_parameters() -> dict[str, Parameter]:
    """The registered algorithms' and problems' own parameters, by name (``candidates``, ``spread``)."""
    return {**registry.declared_options(), **problem_registry.declared_options()}


def declared(name: str) -> Parameter:
    """The declaration of ``name``: :data:`PARAMETERS`', or that of the algorithm or problem that owns it."""
    if name in PARAMETERS:
        return PARAMETERS[name]
    refuse_renamed(name)
    own = own_parameters()
    if name not in own:
        known = ", ".join(p.key for p in [*scoped("run"), *scoped("app"), *scoped("other")])
        raise ConfigError(f"unknown parameter {name.replace('_', '-')!r}; allowed: {known}")
    return own[name]


_declared = declared


def check(name: str, value: Any, label: str | None = None) -> Any:
    """Validate the Python value of the declared parameter ``name`` (snake_case); the plain value.

    Numpy scalars are accepted as the Python values they hold (``np.int64(5)`` is an
    integer); ``bool`` is neither an integer nor a number. Anything else raises
    :class:`ConfigError` with one line naming the value (as ``label``, e.g. a keyword
    argument's own name, if given) and what is allowed.
    """
    checked = check_against(_declared(name), value, label)
    if name == "algorithm":  # registered, but its optional extra may not be installed: one line naming it
        registry.require_installed(checked, label)
    return checked


def parse(name: str, value: Any) -> Any:
    """Like :func:`check`, for a value that may be text (a flag, a run-config key, a CSV cell).

    ``"0.5"`` becomes ``0.5``, ``"true"`` ``True``, ``""``/``none``/``null`` unset
    (for an optional parameter) and ``""`` every client for ``fail_clients``; text that
    does not convert is reported as given.
    """
    return check(name, from_text(_declared(name), value))


def run_config_value(name: str, value: Any) -> Any:
    """How a value is written in a Flower run config / ``pyproject.toml`` (``""`` for unset, ``"1,2"`` for lists)."""
    if value is None:
        return ""
    if declared(name).kind is tuple:
        return ",".join(map(str, value))
    return value


def scoped(scope: str) -> list[Parameter]:
    """The declared parameters of one scope (``run``, ``app`` or ``other``), in a run's listing order.

    ``run`` also holds the algorithms' and problems' own parameters, each after the one it
    declares it follows (``after``), the rest at the end: the order of flags and CSV columns.
    """
    core = [p for p in PARAMETERS.values() if p.scope == scope]
    if scope != "run":
        return core
    own = list(own_parameters().values())

    def placed(p: Parameter) -> list[Parameter]:
        return [p, *(q for o in own if o.after == p.name for q in placed(o))]

    listing = [q for p in core for q in placed(p)]
    for o in own:  # following nothing listed: at the end
        listing += [] if o in listing else placed(o)
    return listing


def parse_seeds(text: str) -> list[int]:
    """The seeds of ``--seeds``: ``7``, ``0-9`` (inclusive) or ``0,3,5`` (items may be ranges), in order.

    At most :data:`MAX_SEEDS`, counted before the list is built.
    """
    ranges = seed_ranges(str(text))
    if ranges is None:
        refuse("seeds", text, _SEEDS_ALLOWED)
    return [seed for first, last in ranges for seed in range(first, last + 1)]


def parse_algorithms(text: str) -> list[str]:
    """The algorithms of ``--algorithms``: a comma-separated list of names, in order, no repeats."""
    names = [name.strip() for name in str(text).split(",")]
    known = algorithm_names()
    if any(name not in known for name in names) or len(set(names)) != len(names):
        refuse("algorithms", text, f"a comma-separated list of distinct names from {', '.join(known)}")
    return names


def parse_workers(text: str | int) -> int:
    """The number of worker processes of ``--workers``: an integer in [1, this machine's CPUs].

    More workers than CPUs only queue for the same cores (``--workers 100000`` forked every
    worker before the first job ran and brought the machine to a load of 300).
    """
    return int(parse("workers", text))  # an int already: parse checked it
