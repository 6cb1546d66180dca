"""One namespace for every parameter name: the common ones, the algorithms' own and the problems' own.

A name is a keyword, a flag, a run-config key, a table column and a ``RunConfig`` attribute at once, so
the registries :func:`claim` their own parameters here and the modules that give names a meaning
:func:`reserve` them; whichever comes second is one line (docs/reliability.md, issue 47). A leaf.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from pfxab_flower.errors import ConfigError
from pfxab_flower.parameter import Parameter, check_against

#: snake_case: what a keyword, a flag (``--a-b``) and a run-config key (``a-b``) can all spell back.
_SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")
#: The types a declared value may have (a flag, a run-config value and a CSV cell convert to them).
KINDS = (int, float, str, bool, tuple)


@dataclass
class _Owned:
    registry: str  # "problem" or "algorithm"
    declaration: Parameter
    owners: set[str] = field(default_factory=set)


_RESERVED: dict[str, str] = {}
_OWNED: dict[str, _Owned] = {}


def reserve(names: Iterable[str], what: str) -> None:
    """Give ``names`` the meaning ``what`` (e.g. "a common run parameter"); one line if an own parameter has one.

    Called where the names are declared, when that module is first imported: a registration
    made before (a user's script registering first) is refused then, before any run.
    """
    for name in names:
        if name in _OWNED and name not in _RESERVED:
            owned = _OWNED[name]
            raise ConfigError(f"parameter {name!r} of {owned.registry} {sorted(owned.owners)[0]!r} is invalid "
                              f"(the name of {what}); allowed: {ALLOWED}")
        _RESERVED.setdefault(name, what)


ALLOWED = ("a parameter.Parameter with a snake_case name that no common parameter, other registry's parameter, "
           "RunConfig attribute or result column has, of type int, float, str, bool or tuple, whose default "
           "passes its own check")


def checked(registry: str, owner: str, parameters: object) -> tuple[Parameter, ...]:
    """``parameters`` of ``owner`` (a problem's or an algorithm's name), each declaration checked; one line if not.

    Checked: a tuple of :class:`Parameter`, snake_case names not reserved (:func:`reserve`), not
    owned by the other registry, nor by this one with another type or default (a name means one
    thing), no name twice; a known type; a check that is callable and passes the default (a
    check that raises counts as failing). Nothing is recorded (:func:`claim` does).
    """
    if not isinstance(parameters, tuple | list):
        raise ConfigError(f"parameters={parameters!r} of {registry} {owner!r} is invalid; allowed: a tuple of "
                          "parameter.Parameter")
    seen: set[str] = set()
    for p in parameters:
        name = getattr(p, "name", p)
        if not isinstance(p, Parameter) or not isinstance(p.name, str):
            _refuse(registry, owner, name, "not a parameter.Parameter")
        elif not _SNAKE.fullmatch(p.name):
            _refuse(registry, owner, name, "not a snake_case name")
        elif p.name in _RESERVED:
            _refuse(registry, owner, name, f"the name of {_RESERVED[p.name]}")
        elif p.name in seen:
            _refuse(registry, owner, name, "declared twice")
        elif (other := _OWNED.get(p.name)) is not None and other.registry != registry:
            _refuse(registry, owner, name, f"already a parameter of {other.registry} {sorted(other.owners)[0]!r}")
        elif other is not None and (other.declaration.kind, other.declaration.default) != (p.kind, p.default):
            theirs = other.declaration
            _refuse(registry, owner, name, f"declared by {registry} {sorted(other.owners)[0]!r} with type "
                                           f"{theirs.kind.__name__} and default {theirs.default!r}")
        seen.add(p.name)
        _check_declaration(registry, owner, p)
    return tuple(parameters)


def _check_declaration(registry: str, owner: str, p: Parameter) -> None:
    """A declaration usable by every later ``RunConfig``: a known type, callable checks, a default that passes."""
    if p.kind not in KINDS:
        _refuse(registry, owner, p.name, f"type {getattr(p.kind, '__name__', p.kind)!r} is not one of int, float, "
                                         "str, bool, tuple")
    if not callable(p.valid) or (p.choices is not None and not callable(p.choices)):
        _refuse(registry, owner, p.name, "its check is not callable")
    if p.default is None and p.optional:
        return
    try:
        check_against(p, p.default)
    except ConfigError as exc:
        raised = exc.__cause__
        why = (f"its check raised {type(raised).__name__} on its default {p.default!r}" if raised is not None else
               f"its default {p.default!r} fails its own check ({p.rule or p.name})")
        _refuse(registry, owner, p.name, why)


def _refuse(registry: str, owner: str, name: object, why: str) -> None:
    raise ConfigError(f"parameter {name!r} of {registry} {owner!r} is invalid ({why}); allowed: {ALLOWED}")


def claim(registry: str, owner: str, parameters: Iterable[Parameter]) -> None:
    """Record ``owner``'s ``parameters`` (already :func:`checked`) as its registry's."""
    for p in parameters:
        _OWNED.setdefault(p.name, _Owned(registry, p)).owners.add(owner)


def release(registry: str, owner: str) -> None:
    """Forget ``owner``'s claims (an unregistered problem, an algorithm registered anew)."""
    for name in [name for name, owned in _OWNED.items() if owned.registry == registry]:
        _OWNED[name].owners.discard(owner)
        if not _OWNED[name].owners:
            del _OWNED[name]
