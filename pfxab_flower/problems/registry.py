"""The problems a run can name, each registered once with its builder, help and own parameters.

Every list of problems (``--problem``'s choices, ``RunConfig``'s check) and every problem's own
parameter (``spread``, landmine's ``fields``: flags, run-config keys) is derived from here. A
builder given as ``"module:function"`` is imported only when a run builds that problem, so
importing the package stays cheap. This module imports nothing of the package above its leaves.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pfxab_flower import namespace
from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.limits import index_list
from pfxab_flower.parameter import Parameter, between, refuse

if TYPE_CHECKING:
    from pfxab_flower.arms.noise import NoiseModel


class ProblemRun(Protocol):
    """What a builder reads of a run (a :class:`~pfxab_flower.schema.run_config.RunConfig` has it all).

    The problems' own parameters are attributes too (``run.spread``), hence ``__getattr__``.
    """

    @property
    def problem(self) -> str: ...
    @property
    def num_clients(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def noise(self) -> str: ...
    @property
    def noise_sigma(self) -> float: ...
    @property
    def evaluation(self) -> str: ...
    def __getattr__(self, name: str) -> Any: ...


def problem_fields() -> tuple[str, ...]:
    """Every run field a problem is built from: those :class:`ProblemRun` declares, then every registered problem's
    own parameters. What a Flower node keeps of a run config to build its problem (nothing else is needed there)."""
    common = tuple(name for name, value in vars(ProblemRun).items() if isinstance(value, property))
    return (*common, *declared_options())


#: ``builder(run, noise)``: a :class:`~pfxab_flower.problems.federation.Federation` of ``run.num_clients`` clients with
#: ``noise`` as their noise model (``object`` here: problems/ sits above this module; ``build_federation`` checks it).
Builder = Callable[[ProblemRun, "NoiseModel"], object]
#: ``check(run)``: a one-line :class:`ConfigError` if the run's values do not fit the problem (before any work).
RunCheck = Callable[[ProblemRun], None]

#: A problem's name is a run-config value, a flag's choice and part of a sweep's run directories.
_NAME = re.compile(r"[a-z][a-z0-9_-]*")
#: ``"package.module:function"``: a builder imported when first used.
_REFERENCE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


@dataclass(frozen=True)
class Problem:
    """One registered problem: its name, its builder (or where to import it from) and its help."""

    name: str
    builder: Builder | str
    help: str
    #: the domain's dimension if declared (tables and maps group by it without building the federation)
    dimension: int | None = None
    #: its own parameters (flags and run-config keys like the common ones; every run carries them)
    parameters: tuple[Parameter, ...] = ()
    #: its check of a run's values together (e.g. no more clients than landmine fields)
    check: RunCheck | None = None
    #: whether its federation depends on the run's seed (the shifted problems' translation): runs of other
    #: seeds do not share it (:func:`pfxab_flower.running.parallel.federation_key`)
    seeded: bool = False

    def build(self, config: ProblemRun, noise: NoiseModel) -> object:
        """The federation of ``config`` (the builder is imported first if it was registered by reference)."""
        builder = self.builder
        if isinstance(builder, str):
            module, _, attribute = builder.partition(":")
            builder = getattr(importlib.import_module(module), attribute)
        return builder(config, noise)


_PROBLEMS: dict[str, Problem] = {}


def register_problem(name: str, builder: Builder | str, *, help: str, dimension: int | None = None,
                     parameters: tuple[Parameter, ...] = (), check: RunCheck | None = None,
                     seeded: bool = False) -> Problem:
    """Make ``name`` a problem every entry point accepts (``RunConfig(problem=name)``, ``--problem name``).

    ``builder(config, noise)`` returns the :class:`~pfxab_flower.problems.federation.Federation` of
    ``config.num_clients`` clients; ``"module:function"`` defers its import to the first build.
    ``help`` is the short description ``--problem``'s help shows; ``dimension``, if given, the
    domain's dimension (read by tables that group problems by it); ``parameters`` the problem's
    own (a flag and a run-config key each, read by the builder as ``config.<name>``); ``check``
    its check of a run's values; ``seeded`` whether the builder reads ``config.seed`` (each seed its own
    federation). A name already taken is refused (:func:`unregister_problem` first), and so is a parameter
    the one namespace refuses (:func:`pfxab_flower.namespace.checked`: a common parameter's or an
    algorithm's name, a ``RunConfig`` attribute, not snake_case, a default that fails its own check).
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"problem name {name!r} is invalid; allowed: lower-case letters, digits, '-' and '_', "
                          "starting with a letter")
    if name in _PROBLEMS:
        raise ConfigError(f"problem {name!r} is already registered; allowed: a new name "
                          f"(taken: {', '.join(_PROBLEMS)})")
    if not (callable(builder) or (isinstance(builder, str) and _REFERENCE.fullmatch(builder))):
        raise ConfigError(f"builder={builder!r} of problem {name!r} is invalid; allowed: a callable "
                          "builder(config, noise), or 'module:function' naming one")
    if not isinstance(help, str) or not help.strip() or not help.strip().isprintable():  # --help prints it
        raise ConfigError(f"help={help!r} of problem {name!r} is invalid; allowed: a one-line description "
                          "(printable: no newline or escape sequence)")
    whole = isinstance(dimension, int) and not isinstance(dimension, bool)
    if dimension is not None and not (whole and dimension >= 1):
        raise ConfigError(f"dimension={dimension!r} of problem {name!r} is invalid; allowed: an integer >= 1")
    if check is not None and not callable(check):
        raise ConfigError(f"check={check!r} of problem {name!r} is invalid; allowed: a callable check(run) raising "
                          "ConfigError for values that do not fit the problem, or None")
    if not isinstance(seeded, bool):
        raise ConfigError(f"seeded={seeded!r} of problem {name!r} is invalid; allowed: True or False")
    own = namespace.checked("problem", name, parameters)  # one namespace with the common and the algorithms' own
    _PROBLEMS[name] = Problem(name, builder, help.strip(), dimension, own, check, seeded)
    namespace.claim("problem", name, own)
    return _PROBLEMS[name]


def unregister_problem(name: str) -> None:
    """Forget the problem ``name`` (e.g. a test's own, or one to register again with another builder)."""
    problem(name)
    del _PROBLEMS[name]
    namespace.release("problem", name)


def problem(name: str) -> Problem:
    """The registered problem ``name``; a one-line :class:`ConfigError` naming the registered ones if none."""
    if name not in _PROBLEMS:
        raise ConfigError(f"{spelled('problem')}={name!r} is invalid; allowed: {', '.join(_PROBLEMS)}")
    return _PROBLEMS[name]


def problem_names() -> tuple[str, ...]:
    """The registered problems' names, in registration order (the built-in ones first)."""
    return tuple(_PROBLEMS)


def problem_help() -> dict[str, str]:
    """Each registered problem's one-line help, by name."""
    return {name: p.help for name, p in _PROBLEMS.items()}


def declared_options() -> dict[str, Parameter]:
    """Every registered problem's own parameters, by name (a name means the same for every problem)."""
    return {p.name: p for problem in _PROBLEMS.values() for p in problem.parameters}


def check_run(run: ProblemRun) -> None:
    """The check its problem makes of a run's values together, if it has one."""
    checker = problem(run.problem).check
    if checker is not None:
        checker(run)


# -- the built-in problems: their own parameters, then one registration each (builders imported when used) --------

#: The synthetic problems' own parameter: how far apart the clients' shifts are.
SPREAD = Parameter("spread", float, 0.3, "a number in [0, 1)", "spread of the synthetic clients' shifts, in [0, 1)",
                   between(0, 1, high_open=True), after="evaluation")
#: The landmine data set's fields (0-based) and the default clients: both terrain types.
LANDMINE_FIELD_COUNT = 29
DEFAULT_LANDMINE_FIELDS = tuple(range(0, LANDMINE_FIELD_COUNT, 3))
LANDMINE_PARAMETERS = (
    Parameter("landmine_data", str, None, "a file path", "path to LandmineData.mat (landmine problem)",
              optional=True, unset="$PFXAB_LANDMINE_DATA, else the downloaded copy in the cache", after="confidence"),
    Parameter("fields", str, None, f"distinct comma-separated integers in 0..{LANDMINE_FIELD_COUNT - 1}",
              "comma-separated landmine field indices (landmine problem)",
              lambda text: index_list(text, LANDMINE_FIELD_COUNT) is not None, optional=True,
              unset=",".join(map(str, DEFAULT_LANDMINE_FIELDS)), after="confidence"),
)


def landmine_fields(run: ProblemRun) -> tuple[int, ...]:
    """The landmine fields of a run's clients: the first ``num_clients`` of ``fields`` (default 0, 3, ..., 27)."""
    return _chosen_fields(run)[: run.num_clients]


def _chosen_fields(run: ProblemRun) -> tuple[int, ...]:
    return DEFAULT_LANDMINE_FIELDS if run.fields is None else index_list(run.fields, LANDMINE_FIELD_COUNT) or ()


def _check_landmine(run: ProblemRun) -> None:
    """One client per landmine field: no more clients than fields chosen."""
    chosen = _chosen_fields(run)
    if run.num_clients > len(chosen):
        fields_ = spelled("fields")
        allowed = (f"at most {len(chosen)}, the number of landmine fields in {fields_}={run.fields!r}"
                   if run.fields is not None else
                   f"at most {len(chosen)} with the default landmine fields ({LANDMINE_PARAMETERS[1].unset}); "
                   f"{fields_} can name up to {LANDMINE_FIELD_COUNT}")
        refuse("num_clients", run.num_clients, allowed)



register_problem("garland", "pfxab_flower.problems.synthetic:garland_federation",
                 help="1-D, Garland shifted per client", dimension=1, parameters=(SPREAD,))
register_problem("doublesine", "pfxab_flower.problems.synthetic:doublesine_federation",
                 help="1-D, DoubleSine shifted per client", dimension=1, parameters=(SPREAD,))
register_problem("landmine", "pfxab_flower.problems.landmine:landmine_federation",
                 help="2-D, an RBF-SVM's C and gamma tuned on one landmine field per client", dimension=2,
                 parameters=LANDMINE_PARAMETERS, check=_check_landmine)
for _family, _label in (("garland", "Garland"), ("doublesine", "DoubleSine")):  # problems/separable.py
    for _dimension in (2, 3, 5):
        register_problem(f"{_family}-{_dimension}d", f"pfxab_flower.problems.separable:{_family}_{_dimension}d",
                         help=f"{_dimension}-D, {_label} in every coordinate, shifted per client", dimension=_dimension,
                         parameters=(SPREAD,))
for _family, _label in (("garland", "Garland"), ("doublesine", "DoubleSine")):  # problems/translated.py
    for _dimension in (1, 2, 3, 5):
        register_problem(f"{_family}-shifted" + ("" if _dimension == 1 else f"-{_dimension}d"),
                         "pfxab_flower.problems.translated:shifted_federation", dimension=_dimension,
                         help=f"{_dimension}-D {_label}, its optima moved by a random translation drawn from the seed",
                         parameters=(SPREAD,), seeded=True)
for _dimension in (1, 2, 3, 5):  # problems/bumps.py: the smooth family
    register_problem("bumps" if _dimension == 1 else f"bumps-{_dimension}d",
                     f"pfxab_flower.problems.bumps:bumps_{_dimension}d",
                     help=f"{_dimension}-D, smooth: two Gaussian bumps, shifted per client", dimension=_dimension,
                     parameters=(SPREAD,))
