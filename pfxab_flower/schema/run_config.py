"""One run's parameters (:class:`RunConfig`), the Flower app's options (:class:`AppOptions`) and their run config.

Both are built from the declarations (:func:`pfxab_flower.schema.catalogue.scoped`): every value is checked the
same way from Python, a flag, a Flower run config (``noise-sigma``) or a sweep's TOML row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from pfxab_flower import namespace
from pfxab_flower.algorithms.registry import policy_class
from pfxab_flower.errors import ConfigError, spelled, spelled_as
from pfxab_flower.faults import FaultPlan
from pfxab_flower.limits import MAX_PULLS, REWARD_LIMIT
from pfxab_flower.parameter import from_text, refuse
from pfxab_flower.problems.registry import check_run
from pfxab_flower.schema.catalogue import PARAMETERS, check, declared, refuse_renamed, run_config_value, scoped
from pfxab_flower.schema.own_options import away_from_default, refuse_foreign


def check_reward_range(confidence: str, reward_range: Any, label: str = "reward_range") -> tuple[float, float]:
    """The ``(low, high)`` rewards lie in, as floats; a one-line :class:`ConfigError` if it is not one.

    ``confidence = "bernstein"`` needs a real range (its width has a term in the span
    ``high - low``): the default, the widest a server accepts, is refused for it.
    """
    valid = (isinstance(reward_range, tuple | list) and len(reward_range) == 2
             and all(isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
                     for v in reward_range)
             and -REWARD_LIMIT <= reward_range[0] < reward_range[1] <= REWARD_LIMIT)
    if not valid:
        raise ConfigError(f"{label}={reward_range!r} is invalid; allowed: (low, high) with "
                          f"{-REWARD_LIMIT:g} <= low < high <= {REWARD_LIMIT:g}")
    low, high = float(reward_range[0]), float(reward_range[1])
    if confidence == "bernstein" and (low, high) == (-REWARD_LIMIT, REWARD_LIMIT):
        raise ConfigError(f"{label}={reward_range!r} is invalid with confidence='bernstein'; allowed: the range "
                          "(low, high) the rewards lie in (the Bernstein width grows with high - low)")
    return low, high


def _default(name: str) -> Any:
    return PARAMETERS[name].default


@dataclass(frozen=True, init=False, eq=False)
class RunConfig:
    """Parameters of one run, each checked against its declaration; keywords are the flags in snake case.

    Every common parameter (:data:`PARAMETERS`, scope ``run``) is an attribute; those below are typed
    for mypy (a new one may be added here too). The algorithms' and problems' own (``candidates``,
    ``spread``) are ``options``, read as attributes too (``config.spread``). Every registered one is
    present (its declared default if not given); equality and hash are :meth:`to_dict`'s.
    """

    problem: str
    algorithm: str
    num_clients: int
    alpha: float
    horizon: int
    seed: int
    nu1: float
    rho: float
    noise: str
    noise_sigma: float
    evaluation: str
    max_depth: int | None
    max_evaluations: int | None
    confidence: str
    #: The algorithms' and problems' own parameters, by name (``None`` given: the declared default).
    options: Mapping[str, Any]

    def __init__(self, **values: Any) -> None:
        listing = scoped("run")
        names = [p.name for p in listing]
        unknown = [name for name in values if name not in names]
        for name in unknown:
            refuse_renamed(name)
        if unknown:
            raise ConfigError(f"unknown parameter {unknown[0].replace('_', '-')!r}; allowed: "
                              f"{', '.join(sorted(name.replace('_', '-') for name in names))}")
        options: dict[str, Any] = {}
        for p in listing:  # in listing order: the first bad value is the one reported
            value = values.get(p.name, p.default)
            if p.name in PARAMETERS:
                object.__setattr__(self, p.name, check(p.name, value))
            else:
                options[p.name] = check(p.name, p.default if value is None else value)
        object.__setattr__(self, "options", options)
        if self.num_clients * self.horizon > MAX_PULLS:
            allowed = (f"an integer in [1, {MAX_PULLS // self.num_clients:,}] with {spelled('num_clients')}="
                       f"{self.num_clients} (clients x horizon at most {MAX_PULLS:,}, which takes minutes; see "
                       "docs/scaling.md)")
            refuse("horizon", self.horizon, allowed)
        check_run(self)
        policy_class(self.algorithm).check_options(self.num_clients, options)  # e.g. pf-sh's candidates x clients
        check_evaluation_budget(self.evaluation, self.max_evaluations, self.horizon)

    def __getattr__(self, name: str) -> Any:
        """An own parameter's value (``config.spread``); only names that are no field come here."""
        options = self.__dict__.get("options", {})
        if name not in options:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return options[name]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunConfig) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(tuple(self.to_dict().items()))

    def __repr__(self) -> str:
        return f"RunConfig({', '.join(f'{name}={value!r}' for name, value in self.to_dict().items())})"

    @staticmethod
    def names() -> list[str]:
        """Every parameter a run takes (keywords, flags, CSV columns), in listing order."""
        return [p.name for p in scoped("run")]

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> RunConfig:
        """Build from Flower-style (``noise-sigma``) or Python-style (``noise_sigma``) keys.

        Strings are converted to the field's type (:func:`parse`), so a run config or
        a CSV row can be passed as is; unknown keys are an error.
        """
        if not isinstance(values, Mapping):
            raise ConfigError(f"values={values!r} is invalid; allowed: a mapping of parameter names to values")
        known = cls.names()
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            name = key.replace("-", "_")
            if name not in known:
                refuse_renamed(key)
                allowed = ", ".join(sorted(k.replace("_", "-") for k in known))
                raise ConfigError(f"unknown parameter {key!r}; allowed: {allowed}")
            kwargs[name] = from_text(declared(name), value)
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """Every parameter's value by name, flat (own parameters beside the common ones), in listing order."""
        own = dict(self.options)
        listed = {name: own.pop(name) if name in own else getattr(self, name)
                  for name in self.names() if name in PARAMETERS or name in own}
        return {**listed, **own}

    def replace(self, **changes: Any) -> RunConfig:
        return RunConfig(**{**self.to_dict(), **changes})


#: An own parameter is an attribute of a RunConfig too (``config.spread``): none may be named like its methods.
namespace.reserve([*(name for name in dir(RunConfig) if not name.startswith("_")), *RunConfig.__dataclass_fields__],
                  "an attribute of RunConfig")


@dataclass(frozen=True)
class AppOptions:
    """Options of the Flower app itself (where results go, how long a round may take, injected faults).

    Defaults and checks are :data:`PARAMETERS`' (scope ``app``); see :mod:`pfxab_flower.faults`.
    """

    out_dir: str = _default("out_dir")
    round_timeout: float = _default("round_timeout")
    fail_rate: float = _default("fail_rate")
    fail_clients: tuple[int, ...] | None = _default("fail_clients")  # clients that may fail (None: all)
    straggle_seconds: float = _default("straggle_seconds")  # > 0: selected clients answer late instead
    min_fraction: float = _default("min_fraction")  # share of clients an exchange needs
    secure_aggregation: bool = _default("secure_aggregation")  # SecAgg+ sums of local means (legacy API)
    api: str = _default("api")  # Flower API: "message" or "legacy" (see APIS)

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, check(f.name, getattr(self, f.name)))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> AppOptions:
        """From run-config keys (``fail-rate``) or field names; text is converted, then each value checked once."""
        return cls(**{key.replace("-", "_"): from_text(declared(key.replace("-", "_")), value)
                      for key, value in values.items()})

    def check_clients(self, num_clients: int) -> None:
        """``fail_clients`` must name clients of the run: indices in ``[0, num_clients)``."""
        if self.fail_clients is not None and max(self.fail_clients) >= num_clients:
            refuse("fail_clients", run_config_value("fail_clients", self.fail_clients),
                  f"distinct comma-separated client indices in [0, {num_clients}), or \"\" for every client")

    def faults(self, seed: int) -> FaultPlan:
        """The run's failure plan (drawn from ``(seed, client, phase)``; stragglers too)."""
        return FaultPlan(seed=seed, rate=self.fail_rate, clients=self.fail_clients,
                         straggle_seconds=self.straggle_seconds, round_timeout=self.round_timeout)


#: Keys of a Flower run config that are not RunConfig fields, with their run-config defaults.
APP_DEFAULTS: dict[str, Any] = {p.key: run_config_value(p.name, p.default) for p in scoped("app")}


def parse_run_config(values: Mapping[str, Any]) -> tuple[RunConfig, AppOptions]:
    """Split a Flower run config into the validated run and the app options.

    Errors name its keys (``noise-sigma``), unless an outer entry point chose a spelling.
    """
    with spelled_as("key", unless_set=True):
        return _parse_run_config(values)


def _parse_run_config(values: Mapping[str, Any]) -> tuple[RunConfig, AppOptions]:
    run = {k: v for k, v in values.items() if k not in APP_DEFAULTS}
    options = AppOptions.from_mapping({k: v for k, v in values.items() if k in APP_DEFAULTS})
    config = RunConfig.from_mapping(run)
    options.check_clients(config.num_clients)  # a run config is one run: another algorithm's or problem's option set
    refuse_foreign(config.algorithm, config.problem, config.options, away_from_default(config.options))  # is refused
    return config, options


def to_run_config(config: RunConfig, options: AppOptions | None = None) -> dict[str, Any]:
    """The Flower run config of a :class:`RunConfig` (unset optional fields left out)."""
    values: dict[str, Any] = {k.replace("_", "-"): v for k, v in config.to_dict().items() if v is not None}
    if options is not None:
        values.update({p.key: run_config_value(p.name, getattr(options, p.name)) for p in scoped("app")})
    return values


def check_evaluation_budget(evaluation: str, max_evaluations: int | None, horizon: int) -> None:
    """A one-line :class:`ConfigError` for a budget a stochastic objective cannot keep.

    Every pull of a stochastic objective is one call, exploitation included, so a client makes
    exactly ``horizon`` evaluations: a smaller budget could only be kept by a shorter horizon.
    """
    if evaluation == "stochastic" and max_evaluations is not None and max_evaluations < horizon:
        raise ConfigError(f"{spelled('max_evaluations')}={max_evaluations!r} is invalid; allowed: at least "
                          f"{spelled('horizon')}={horizon} with evaluation='stochastic' (every pull is one call; "
                          "lower the horizon instead), or unset")
