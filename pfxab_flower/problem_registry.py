"""The problems a run can name: one registry, from which every list of problem names is derived.

A problem is a name, a *builder* and a one-line help. The builder turns a validated
:class:`~pfxab_flower.run_parameters.RunConfig` and its :class:`~pfxab_flower.noise.NoiseModel` into a
:class:`~pfxab_flower.problems.federation.Federation` of ``config.clients`` clients, on a domain
of any dimension. Everything that lists problems reads it here: ``RunConfig``'s check of
``problem`` (and its one-line error), ``--problem``'s choices and help in every ``pfxab``
command, :func:`pfxab_flower.problems.build_federation`; the README's list is tested against it.

A new problem is one file with its builder plus one registration line::

    from pfxab_flower import register_problem
    register_problem("bowl", bowl_federation, help="a 2-D bowl per client")

A builder may also be given as ``"module:function"``: it is then imported only when a run
builds that problem. The built-in problems are registered that way at the end of this
module, so that importing ``pfxab_flower`` stays cheap (``landmine`` needs scikit-learn and
SciPy; the synthetic ones SciPy's optimiser).

Why this module sits outside ``problems/`` and imports nothing of the package but its
errors: :mod:`pfxab_flower.config` checks ``problem`` against it, and every module of
``problems/`` imports ``config``; inside that package, importing ``config`` first would run
``problems/__init__.py`` first, which imports ``config``: a cycle.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pfxab_flower.errors import ConfigError, spelled

if TYPE_CHECKING:
    from pfxab_flower.noise import NoiseModel
    from pfxab_flower.problems.federation import Federation
    from pfxab_flower.run_parameters import RunConfig

#: ``builder(config, noise) -> Federation`` (``config.clients`` clients, ``noise`` as their noise model).
Builder = Callable[["RunConfig", "NoiseModel"], "Federation"]

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

    def build(self, config: RunConfig, noise: NoiseModel) -> Federation:
        """The federation of ``config`` (the builder is imported first if it was registered by reference)."""
        builder = self.builder
        if isinstance(builder, str):
            module, _, attribute = builder.partition(":")
            builder = getattr(importlib.import_module(module), attribute)
        return builder(config, noise)


_PROBLEMS: dict[str, Problem] = {}


def register_problem(name: str, builder: Builder | str, *, help: str, dimension: int | None = None) -> Problem:
    """Make ``name`` a problem every entry point accepts (``RunConfig(problem=name)``, ``--problem name``).

    ``builder(config, noise)`` returns the :class:`~pfxab_flower.problems.federation.Federation` of
    ``config.clients`` clients; ``"module:function"`` defers its import to the first build.
    ``help`` is the short description ``--problem``'s help shows; ``dimension``, if given, the
    domain's dimension (read by tables that group problems by it). A name already taken is refused
    (:func:`unregister_problem` first to replace one).
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
    if not isinstance(help, str) or not help.strip():
        raise ConfigError(f"help={help!r} of problem {name!r} is invalid; allowed: a one-line description")
    whole = isinstance(dimension, int) and not isinstance(dimension, bool)
    if dimension is not None and not (whole and dimension >= 1):
        raise ConfigError(f"dimension={dimension!r} of problem {name!r} is invalid; allowed: an integer >= 1")
    _PROBLEMS[name] = Problem(name, builder, help.strip(), dimension)
    return _PROBLEMS[name]


def unregister_problem(name: str) -> None:
    """Forget the problem ``name`` (e.g. a test's own, or one to register again with another builder)."""
    problem(name)
    del _PROBLEMS[name]


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


# The built-in problems (one line each; imported when a run builds them).
register_problem("garland", "pfxab_flower.problems.synthetic:garland_federation",
                 help="1-D, Garland shifted per client", dimension=1)
register_problem("doublesine", "pfxab_flower.problems.synthetic:doublesine_federation",
                 help="1-D, DoubleSine shifted per client", dimension=1)
register_problem("landmine", "pfxab_flower.problems.landmine:landmine_federation",
                 help="2-D, an RBF-SVM's C and gamma tuned on one landmine field per client", dimension=2)
for _family, _label in (("garland", "Garland"), ("doublesine", "DoubleSine")):  # problems/separable.py
    for _dimension in (2, 3, 5):
        register_problem(f"{_family}-{_dimension}d", f"pfxab_flower.problems.separable:{_family}_{_dimension}d",
                         help=f"{_dimension}-D, {_label} in every coordinate, shifted per client", dimension=_dimension)
