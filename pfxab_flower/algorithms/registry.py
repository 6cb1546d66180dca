"""The one list of algorithms: each :class:`~pfxab_flower.algorithms.phased.Policy` registered by name.

The CLI's choices, the Flower strategy classes, figure labels and the keywords each algorithm takes (the common
ones, :data:`pfxab_flower.schema.catalogue.COMMON`, and its policy's own ``parameters``) are derived from it
(docs/extending.md).
:class:`CarriedAlgorithms` takes the registry into the processes a ClientApp is pickled into.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.util import find_spec
from typing import Any

from pfxab_flower import namespace
from pfxab_flower.algorithms.phased.policy import Policy
from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.parameter import Parameter

_ALGORITHMS: dict[str, type[Policy]] = {}
_NAME = re.compile(r"^[a-z][a-z0-9-]*$")


def register_algorithm(policy: type[Policy]) -> type[Policy]:
    """Add ``policy`` under its ``name`` (also a class decorator); a :class:`ConfigError` if the declaration is bad.

    Re-registering the same class is a no-op; another class under a taken name is refused, and
    so is an option the one namespace refuses (:func:`pfxab_flower.namespace.checked`: a common
    parameter's or a problem's name, one another algorithm declares with a different default or
    type, a ``RunConfig`` attribute, not snake_case, a default that fails its own check): an
    option name means one thing on the wire and in every table.
    """
    name = getattr(policy, "name", None)
    if not (isinstance(name, str) and _NAME.match(name)):
        raise ConfigError(f"name={name!r} is invalid; allowed: lower-case letters, digits and '-', e.g. 'pf-xab'")
    if _ALGORITHMS.get(name, policy) is not policy:
        raise ConfigError(f"algorithm {name!r} is already registered (by {_ALGORITHMS[name].__qualname__})")
    if _ALGORITHMS.get(name) is policy:
        return policy
    for attribute in ("label", "description"):  # printed by --help, tables and figures: one printable line
        text = getattr(policy, attribute, None)
        if not (isinstance(text, str) and text.strip() and text.isprintable()):
            raise ConfigError(f"{name}: {attribute}={text!r} is invalid; allowed: one printable line of text")
    own = namespace.checked("algorithm", name, getattr(policy, "parameters", None))  # one namespace for all
    _ALGORITHMS[name] = policy
    namespace.claim("algorithm", name, own)
    return policy


def algorithm_names() -> tuple[str, ...]:
    """The registered algorithms, in registration order (the built-in three, then the two baselines, first)."""
    return tuple(_ALGORITHMS)


def available_names() -> tuple[str, ...]:
    """The registered algorithms whose modules are installed (all but those of an optional extra not installed)."""
    return tuple(name for name in _ALGORITHMS if missing_module(name) is None)


def missing_module(name: str) -> str | None:
    """The first module the algorithm ``name`` needs that is not installed (``None``: it can run here)."""
    return next((module for module in _ALGORITHMS[name].requires if not installed(module)), None)


@cache
def installed(module: str) -> bool:
    """Whether ``module`` can be imported here (looked up once, never imported: optuna's import costs ~1 s)."""
    return find_spec(module) is not None


def require_installed(name: str, label: str | None = None) -> None:
    """A one-line :class:`ConfigError` if the algorithm ``name`` needs a module that is not installed (naming the
    optional extra that installs it)."""
    module = missing_module(name)
    if module is not None:
        extra = _ALGORITHMS[name].extra
        raise ConfigError(f"{spelled(label or 'algorithm')}={name!r} is invalid without {module} installed; allowed: "
                          f"another algorithm, or first pip install \"pfxab-flower[{extra}]\" (in a clone: "
                          f"pip install -e \".[{extra}]\")")


def federated_names() -> tuple[str, ...]:
    """The registered algorithms whose clients share estimates phase by phase: all but the solo baselines."""
    return tuple(name for name, policy in _ALGORITHMS.items() if not policy.solo)


def policy_class(name: str) -> type[Policy]:
    """The policy registered as ``name``; a one-line :class:`ConfigError` naming the choices if none is."""
    if name not in _ALGORITHMS:
        raise ConfigError(f"algorithm={name!r} is invalid; allowed: {', '.join(_ALGORITHMS)}")
    return _ALGORITHMS[name]


def make_policy(name: str) -> Policy:
    """A policy object of the algorithm ``name``."""
    return policy_class(name)()


def label(name: str) -> str:
    """How the algorithm ``name`` is named in figures and tables (``PF-XAB``); the name itself if unknown."""
    policy = _ALGORITHMS.get(name)
    return policy.label if policy is not None else name


def class_name(name: str) -> str:
    """The Python name of the algorithm's strategy class: its label without punctuation (``PF-XAB`` -> ``PFXAB``)."""
    return re.sub(r"[^A-Za-z0-9]", "", label(name))


def options_of(name: str) -> dict[str, Parameter]:
    """The parameters the algorithm ``name`` declares itself, by name (PF-SH: ``candidates``)."""
    return {p.name: p for p in policy_class(name).parameters}


def declared_options() -> dict[str, Parameter]:
    """Every registered algorithm's own parameters, by name (a name means the same everywhere)."""
    return {p.name: p for policy in _ALGORITHMS.values() for p in policy.parameters}


class CarriedAlgorithms:
    """The registry as it stands when this object is pickled, registered where it is unpickled (:meth:`register`).

    Flower's simulation engine pickles the ``ClientApp`` it is given into Ray's workers, which
    import this package afresh: an algorithm registered by a script (``__main__``) would be
    unknown there, and every message naming it refused. A ``ClientApp`` holding one of these
    (every one :mod:`pfxab_flower.client_apps` builds) takes the registry along; it calls
    :meth:`register` before decoding a message. A policy class defined in a script travels by
    value (cloudpickle, which unpickles it as one class per process), one of an importable module
    by reference. The worker then runs what the driver registered: a name the worker holds for
    another class (a Ray worker kept from an earlier run) is given the driver's.
    """

    def __init__(self) -> None:
        self.policies: tuple[type[Policy], ...] = ()  # filled by unpickling: its own process has them all

    def __getstate__(self) -> dict[str, Any]:
        return {"policies": tuple(_ALGORITHMS.values())}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.policies = state["policies"]

    def register(self) -> None:
        """Register each carried algorithm under its name in this process (a no-op once they are)."""
        for policy in self.policies:
            if _ALGORITHMS.get(policy.name) is not policy:
                _ALGORITHMS.pop(policy.name, None)
                namespace.release("algorithm", policy.name)
                register_algorithm(policy)
