"""One declared parameter (:class:`Parameter`) and the one check of a value against its declaration.

A leaf (it imports only errors and limits), so the module that owns a parameter declares it:
the common ones in :mod:`pfxab_flower.schema.catalogue`, an algorithm's on its policy, a problem's at its
registration. A bad value is one :class:`ConfigError` line: ``"{name}={value!r} is invalid; allowed: {what}"``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.limits import MAX_CLIENTS, MAX_INT64, index_list


@dataclass(frozen=True)
class Parameter:
    """One declared parameter: its type, default, what is allowed (the check) and its help text.

    A *choice* parameter (``problem``, ``noise``, ...) allows one of the names ``choices()``
    returns, each with a short description (``""`` if none). They are looked up on every check,
    not copied here: the problems come from :mod:`pfxab_flower.problems.registry`, which can
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
    #: An algorithm's or a problem's own parameter: the run parameter it follows in a run's listing (flags,
    #: a sweep's CSV columns); ``None``: at the end.
    after: str | None = None
    #: An algorithm's own: every algorithm's messages carry it at its default (they did before it was its own).
    on_every_wire: bool = False
    #: Added after results were first written: a run's id leaves it out at its default (older ids stay).
    late: bool = False
    #: A common run parameter every algorithm takes as a keyword and reads from its spec (``alpha``, ``confidence``):
    #: :data:`pfxab_flower.schema.catalogue.COMMON` lists those so marked.
    every_algorithm: bool = False

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


def between(low: float, high: float, low_open: bool = False, high_open: bool = False) -> Callable[[Any], bool]:
    """The check of a number in ``[low, high]`` (either end open if asked)."""
    def valid(value: float) -> bool:
        return (value > low if low_open else value >= low) and (value < high if high_open else value <= high)

    return valid


def choice(name: str, default: str, help: str, choices: Callable[[], Mapping[str, str]] | tuple[str, ...],
           scope: str = "run") -> Parameter:
    """A choice parameter: one of ``choices`` (a fixed tuple, or a function giving names and descriptions)."""
    listed = (lambda: dict.fromkeys(choices, "")) if isinstance(choices, tuple) else choices
    return Parameter(name, str, default, "", help, scope=scope, choices=listed)


def refuse(name: str, value: object, allowed: str) -> NoReturn:
    """The one-line error of a bad value of ``name``, spelled the way the value was given."""
    raise ConfigError(f"{spelled(name)}={value!r} is invalid; allowed: {allowed}")


def check_against(p: Parameter, value: Any, label: str | None = None) -> Any:
    """Validate the Python value of the declared parameter ``p``; the plain value.

    Numpy scalars are accepted as the Python values they hold (``np.int64(5)`` is an
    integer); ``bool`` is neither an integer nor a number. Anything else raises
    :class:`ConfigError` with one line naming the value (as ``label``, e.g. a keyword
    argument's own name, if given) and what is allowed.
    """
    if isinstance(value, np.generic):
        value = value.item()
    if value is None and p.optional:
        return None
    converted = _typed(p, value)
    try:
        accepted = converted is not None and p.accepts(converted)
    except Exception as exc:  # a declared check that raises (a user's): one line, never a traceback
        raise ConfigError(f"{label or spelled(p.name)}={value!r} is invalid (its check raised {type(exc).__name__}: "
                          f"{exc}); allowed: {p.rule or p.name}") from exc
    if not accepted:
        if label is not None:  # a Python keyword argument, named as the caller wrote it
            raise ConfigError(f"{label}={value!r} is invalid; allowed: {p.allowed}")
        refuse(p.name, value, p.allowed)
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


def from_text(p: Parameter, value: Any) -> Any:
    """``value`` converted to ``p.kind`` if it is text (a flag, a run-config key, a CSV cell); else as given.

    ``"0.5"`` becomes ``0.5``, ``"true"`` ``True``, ``""``/``none``/``null`` unset (for an
    optional parameter); text that does not convert is returned as given, for the check to report.
    """
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
