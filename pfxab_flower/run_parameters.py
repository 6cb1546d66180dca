"""One run's parameters (:class:`RunConfig`), the Flower app's options (:class:`AppOptions`) and their run config.

Both are built from :mod:`pfxab_flower.config`'s declarations: every field's default and check are
the declared parameter's, so a value is checked the same way whether it comes from Python, a flag, a
Flower run config (``noise-sigma``) or a sweep's TOML row. :func:`parse_run_config` splits a Flower
run config into the two, :func:`to_run_config` writes one back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from pfxab_flower.config import (
    DEFAULT_LANDMINE_FIELDS,
    LANDMINE_FIELD_COUNT,
    OPTION_FIELDS,
    PARAMETERS,
    check,
    declared,
    run_config_value,
    scoped,
)
from pfxab_flower.errors import ConfigError, spelled, spelled_as
from pfxab_flower.faults import FaultPlan
from pfxab_flower.limits import MAX_PULLS, REWARD_LIMIT, index_list
from pfxab_flower.parameter import from_text, refuse


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


@dataclass(frozen=True)
class RunConfig:
    """Parameters of one run. Field names are the CLI flags (``--noise-sigma``) in snake case.

    Defaults and checks are :data:`PARAMETERS`' (``tests/test_config.py`` checks the fields match it).
    """

    problem: str = _default("problem")
    algorithm: str = _default("algorithm")
    clients: int = _default("clients")
    alpha: float = _default("alpha")
    horizon: int = _default("horizon")
    seed: int = _default("seed")
    nu1: float = _default("nu1")
    rho: float = _default("rho")
    noise: str = _default("noise")
    noise_sigma: float = _default("noise_sigma")
    evaluation: str = _default("evaluation")
    spread: float = _default("spread")
    max_depth: int | None = _default("max_depth")
    max_evaluations: int | None = _default("max_evaluations")
    #: PF-PNE's own parameter, kept as a field (and ``--pf-pne-eps`` flag) for compatibility: declared, default
    #: and checked by PF-PNE's policy (``None`` here: its declared default). Other algorithms ignore it.
    pf_pne_eps: float = None  # type: ignore[assignment]
    #: Random search's own parameter, a field (``--random-fraction``) the same way (``None``: its declared default).
    random_fraction: float = None  # type: ignore[assignment]
    #: PF-SH's own parameter, a field (``--candidates``) the same way (``None``: its declared default, the rule).
    candidates: int = None  # type: ignore[assignment]
    confidence: str = _default("confidence")
    landmine_data: str | None = _default("landmine_data")
    fields: str | None = _default("fields")

    def __post_init__(self) -> None:
        for f in fields(self):  # in declaration order: the first bad value is the one reported
            value = getattr(self, f.name)
            if f.name in OPTION_FIELDS and value is None:
                value = declared(f.name).default
            object.__setattr__(self, f.name, check(f.name, value))
        if self.clients * self.horizon > MAX_PULLS:
            allowed = (f"an integer in [1, {MAX_PULLS // self.clients:,}] with {spelled('clients')}={self.clients} "
                       f"(clients x horizon at most {MAX_PULLS:,}, which takes minutes; see docs/scaling.md)")
            refuse("horizon", self.horizon, allowed)
        chosen = self._chosen_fields()
        if self.problem == "landmine" and self.clients > len(chosen):
            fields_ = spelled("fields")
            allowed = (f"at most {len(chosen)}, the number of landmine fields in {fields_}={self.fields!r}"
                       if self.fields is not None else
                       f"at most {len(chosen)} with the default landmine fields ({PARAMETERS['fields'].unset}); "
                       f"{fields_} can name up to {LANDMINE_FIELD_COUNT}")
            refuse("clients", self.clients, allowed)
        check_evaluation_budget(self.evaluation, self.max_evaluations, self.horizon)

    def _chosen_fields(self) -> tuple[int, ...]:
        if self.fields is None:
            return DEFAULT_LANDMINE_FIELDS
        return index_list(self.fields, LANDMINE_FIELD_COUNT) or ()

    @property
    def landmine_fields(self) -> tuple[int, ...]:
        """The landmine fields of the clients: the first ``clients`` of ``fields`` (default 0, 3, ..., 27)."""
        return self._chosen_fields()[: self.clients]

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> RunConfig:
        """Build from Flower-style (``noise-sigma``) or Python-style (``noise_sigma``) keys.

        Strings are converted to the field's type (:func:`parse`), so a run config or
        a CSV row can be passed as is; unknown keys are an error.
        """
        if not isinstance(values, Mapping):
            raise ConfigError(f"values={values!r} is invalid; allowed: a mapping of parameter names to values")
        known = {f.name for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            name = key.replace("-", "_")
            if name not in known:
                allowed = ", ".join(sorted(k.replace("_", "-") for k in known))
                raise ConfigError(f"unknown parameter {key!r}; allowed: {allowed}")
            kwargs[name] = from_text(declared(name), value)
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def replace(self, **changes: Any) -> RunConfig:
        return RunConfig(**{**asdict(self), **changes})


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
    options.check_clients(config.clients)
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
