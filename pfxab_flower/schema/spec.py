"""What one run of one algorithm is: an :class:`AlgorithmSpec`, built and checked once, then carried as is.

Built from Python keywords (:meth:`AlgorithmSpec.build`) or a checked RunConfig (:meth:`~AlgorithmSpec.from_config`);
it travels to every client in each message (:meth:`~AlgorithmSpec.to_wire`, :meth:`~AlgorithmSpec.from_wire`).
The common parameters are fields (or, without a field, in ``common``, read as attributes all the same); the
algorithm's own (its policy's ``parameters``) are ``options``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from pfxab_flower import namespace
from pfxab_flower.algorithms.bounds import bound_named
from pfxab_flower.algorithms.registry import declared_options, options_of, policy_class
from pfxab_flower.errors import ConfigError
from pfxab_flower.limits import REWARD_LIMIT
from pfxab_flower.parameter import check_against
from pfxab_flower.schema.catalogue import COMMON, PARAMETERS, check
from pfxab_flower.schema.run_config import check_reward_range

if TYPE_CHECKING:
    from pfxab_flower.schema.run_config import RunConfig

PREFIX = "param-"
#: Keys a message carries besides the common keywords and the algorithm's own (an option may not take them).
namespace.reserve(("report_pulls", "reward_low", "reward_high", "reward_range", "options", "common"),
                  "a key of every message (AlgorithmSpec)")
#: The common keywords every message carries (``max_depth`` 0 for none); the later ones only when set (:func:`_later`).
ON_EVERY_WIRE = ("num_clients", "horizon", "alpha", "seed", "nu1", "rho", "max_depth")
#: The widest reward range (the default): a server accepts local means anywhere in it.
FULL_RANGE = (-REWARD_LIMIT, REWARD_LIMIT)


def _key(name: str) -> str:
    return PREFIX + name.replace("_", "-")


@dataclass(frozen=True)
class AlgorithmSpec:
    """One run's algorithm and its parameters, checked; build it with :meth:`build` or :meth:`from_config`.

    ``max_depth`` ``None`` is no depth limit. ``reward_range`` is where rewards lie (the
    server refuses a local mean outside it; a bound whose widths use it gets it on the
    wire). ``report_pulls`` belongs to the simulation harness, not to the algorithm: the
    clients attach their pull logs to their replies so the server can score the exact regret.
    """

    algorithm: str
    num_clients: int
    horizon: int
    alpha: float
    seed: int
    nu1: float
    rho: float
    max_depth: int | None
    confidence: str
    max_evaluations: int | None = None  # most distinct points a client evaluates (None: no limit)
    reward_range: tuple[float, float] = FULL_RANGE
    report_pulls: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    #: The common parameters that have no field above (a parameter declared ``every_algorithm`` in the catalogue
    #: and nowhere else), by name: read as attributes (``spec.name``) like the fields.
    common: Mapping[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        """A common parameter without a field of its own (:attr:`common`), as an attribute."""
        common = self.__dict__.get("common", {})  # not self.common: absent while a copy is unpickled
        if name in common:
            return common[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- building (the one check) -----------------------------------------------------
    @classmethod
    def build(
        cls, algorithm: str, *, num_clients: int, reward_range: Any = None, report_pulls: bool = False,
        dimensions: int | None = None, **keywords: Any,
    ) -> AlgorithmSpec:
        """The spec of Python keywords: the common ones (:data:`COMMON`, declared defaults for those not
        given) and the algorithm's own; a one-line :class:`ConfigError` naming the first bad keyword.

        ``dimensions`` (the search space's, when known) lets the algorithm resolve options that follow
        from it (:meth:`~pfxab_flower.algorithms.phased.Policy.resolve`, e.g. PF-SH's candidate count)."""
        algorithm = check("algorithm", algorithm, label="algorithm")
        check_keywords(algorithm, keywords)
        common = {name: check(name, keywords[name] if name in keywords else _default(name), label=name)
                  for name in COMMON if name != "num_clients"}
        num_clients = check("num_clients", num_clients, label="num_clients")
        options = {name: check_against(p, keywords.get(name, p.default), label=name)
                   for name, p in options_of(algorithm).items()}
        span = check_reward_range(common["confidence"], FULL_RANGE if reward_range is None else reward_range)
        return _resolved(cls(algorithm=algorithm, num_clients=num_clients, reward_range=span,
                             report_pulls=bool(report_pulls), options=options, **_fielded(common)), dimensions)

    @classmethod
    def from_config(cls, config: RunConfig, reward_range: tuple[float, float] = FULL_RANGE,
                    dimensions: int | None = None) -> AlgorithmSpec:
        """The spec of a checked :class:`RunConfig`: its fields are trusted; only the reward range is checked
        (against the confidence bound: ``bernstein`` needs a real one). The algorithm's options are read
        from the config's (``config.options``); ``dimensions`` as in :meth:`build`."""
        options = {name: config.options.get(name, p.default) for name, p in options_of(config.algorithm).items()}
        common = {name: getattr(config, name) for name in COMMON}
        spec = cls(algorithm=config.algorithm, reward_range=check_reward_range(config.confidence, reward_range),
                   options=options, **_fielded(common))
        return _resolved(spec, dimensions)

    def replace(self, **changes: Any) -> AlgorithmSpec:
        """A copy with ``changes`` (trusted: for values that were checked, e.g. ``report_pulls``)."""
        unfielded = {name: changes.pop(name) for name in list(changes) if name in self.common}
        if unfielded:
            changes["common"] = {**self.common, **unfielded}
        return replace(self, **changes)

    def keywords(self) -> dict[str, Any]:
        """The common and the algorithm's own keywords (what :meth:`build` takes, but ``algorithm``)."""
        return {**{name: getattr(self, name) for name in COMMON}, **self.options}

    def summary(self) -> dict[str, Any]:
        """The parameters as a run's summary lists them (after ``algorithm``, ``problem``, ``engine``)."""
        first = {"alpha": self.alpha, "num_clients": self.num_clients, "horizon": self.horizon, "seed": self.seed,
                 "nu1": self.nu1, "rho": self.rho, "max_depth": self.max_depth, **self.options,
                 "confidence": self.confidence}
        later = {name: getattr(self, name) for name in _later() if name != "confidence"}
        return {**first, **{name: value for name, value in later.items() if value is not None}}

    # -- the wire -----------------------------------------------------------------------
    def for_clients(self, report_pulls: bool) -> AlgorithmSpec:
        """What the server sends: the reward range only if the bound's widths use it (else the full range)."""
        uses = bound_named(self.confidence).uses_reward_range
        return replace(self, report_pulls=report_pulls, reward_range=self.reward_range if uses else FULL_RANGE)

    def to_wire(self) -> dict[str, str | int | float]:
        """Flat scalars with ``param-`` keys, for a Flower config record.

        In the order and with the keys of earlier versions: optional parts (a confidence
        other than ``hoeffding``, a reward range narrower than the full one) only when set.
        """
        own = options_of(self.algorithm)  # and those every message carries (``on_every_wire``), at their default
        shared = {name: p.default for name, p in declared_options().items() if p.on_every_wire}
        options = {**{n: v for n, v in shared.items() if n not in own}, **self.options}
        values: dict[str, Any] = {
            "algorithm": self.algorithm, "num_clients": self.num_clients, "horizon": self.horizon,
            "alpha": self.alpha, "seed": self.seed, "nu1": self.nu1, "rho": self.rho,
            "max_depth": self.max_depth or 0, **options, "report_pulls": self.report_pulls,
        }
        values.update({name: getattr(self, name) for name in _later()
                       if getattr(self, name) != _default(name)})
        if self.reward_range != FULL_RANGE:
            values["reward_low"], values["reward_high"] = self.reward_range
        return {_key(name): value for name, value in values.items()}

    @classmethod
    def from_wire(cls, values: Mapping[str, object]) -> AlgorithmSpec:
        """The spec in a received config, checked: the client's one check of what a server sent.

        ``KeyError``/``TypeError`` if a key is absent or mistyped (another version), a one-line
        :class:`ConfigError` if a value is out of range or the algorithm unknown (a server of
        another version, or a hostile one).
        """
        algorithm = check("algorithm", _typed(values, "algorithm", str))
        optional = _later()  # on the wire only when not at their default
        common = {name: _typed(values, name, PARAMETERS[name].kind) if name not in optional or _key(name) in values
                  else _default(name) for name in COMMON}
        for name in COMMON:
            value = common[name]
            if name == "max_depth" and value == 0:
                value = None
            common[name] = check(name, value)
        options = {name: check_against(p, _typed(values, name, p.kind)) for name, p in options_of(algorithm).items()}
        span = (_typed(values, "reward_low", float), _typed(values, "reward_high", float)) \
            if _key("reward_low") in values or _key("reward_high") in values else FULL_RANGE
        return cls(algorithm=algorithm, reward_range=check_reward_range(common["confidence"], span),
                   report_pulls=_typed(values, "report_pulls", bool), options=options, **_fielded(common))


def check_keywords(algorithm: str, keywords: Mapping[str, Any]) -> None:
    """A one-line :class:`ConfigError` for a keyword ``algorithm`` does not take (e.g. ``candidates`` for pf-xab)."""
    own = options_of(algorithm)
    for name in keywords:
        if name not in COMMON and name not in own:
            allowed = ", ".join([*COMMON, *own])
            raise ConfigError(f"unknown keyword {name!r} for algorithm {algorithm!r}; allowed: {allowed}")


def _typed(values: Mapping[str, object], name: str, kind: type) -> Any:
    """The value of ``param-<name>`` as ``kind`` (an int counts as a float; a bool is never a number)."""
    value = values[_key(name)]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise TypeError(f"parameter {name} is {value!r}, not {kind.__name__}")
    return value


def _fielded(common: dict[str, Any]) -> dict[str, Any]:
    """The keywords of :class:`AlgorithmSpec` for the common values ``common``: its fields' by name, the rest as
    ``common`` (a common parameter declared in the catalogue only)."""
    named = {f.name for f in fields(AlgorithmSpec)}
    return {**{n: v for n, v in common.items() if n in named},
            "common": {n: v for n, v in common.items() if n not in named}}


def _default(name: str) -> Any:
    return PARAMETERS[name].default


def _later() -> list[str]:
    """The common keywords added after the first wire format: sent only when not at their default (``confidence``
    first, then in :data:`COMMON`'s order: the keys and their order of earlier versions)."""
    return sorted((name for name in COMMON if name not in ON_EVERY_WIRE), key=lambda name: name != "confidence")


def _resolved(spec: AlgorithmSpec, dimensions: int | None) -> AlgorithmSpec:
    """``spec`` with the options its algorithm derives from the run (e.g. PF-SH's candidate count)."""
    return policy_class(spec.algorithm)().resolve(spec, dimensions)
