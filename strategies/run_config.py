"""Flower run-config keys <-> :class:`RunConfig`, shared by the server and client apps.

The keys are the ``RunConfig`` fields in kebab-case (``noise-sigma``), as in
``[tool.flwr.app.config]`` and ``flwr run --run-config``, plus the few options
that only concern the Flower app (:data:`APP_DEFAULTS`). Everything is validated
by ``RunConfig.from_mapping`` (one-line ``ConfigError``), before any work starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pfxab_flower.config import RunConfig
from pfxab_flower.errors import ConfigError
from pfxab_flower.faults import (
    DEFAULT_ROUND_TIMEOUT,
    FaultPlan,
    parse_fail_clients,
    parse_fail_rate,
    parse_min_fraction,
    parse_straggle_seconds,
)

#: Keys of a Flower run config that are not RunConfig fields, with their defaults.
APP_DEFAULTS: dict[str, Any] = {
    "out-dir": "results/latest",
    "round-timeout": DEFAULT_ROUND_TIMEOUT,
    "fail-rate": 0.0,
    "fail-clients": "",
    "straggle-seconds": 0.0,
    "min-fraction": 0.5,
    "secure-aggregation": False,
    "api": "message",
}

#: Flower APIs the app runs on: the Message API (``pfxab_flower.strategies.message_strategy``, the default:
#: several times cheaper per round, see docs/performance.md) or the legacy Strategy/NumPyClient one.
APIS = ("message", "legacy")


@dataclass(frozen=True)
class AppOptions:
    """Options of the Flower app itself (where results go, how long a round may take)."""

    out_dir: str = APP_DEFAULTS["out-dir"]
    round_timeout: float = APP_DEFAULTS["round-timeout"]
    fail_rate: float = APP_DEFAULTS["fail-rate"]  # injected failures (see pfxab_flower.faults)
    fail_clients: tuple[int, ...] | None = None  # clients that may fail (None: all)
    straggle_seconds: float = APP_DEFAULTS["straggle-seconds"]  # > 0: selected clients answer late instead
    min_fraction: float = APP_DEFAULTS["min-fraction"]  # share of clients an exchange needs
    secure_aggregation: bool = APP_DEFAULTS["secure-aggregation"]  # SecAgg+ sums of local means (legacy API)
    api: str = APP_DEFAULTS["api"]  # Flower API: "message" or "legacy" (see APIS)

    def faults(self, seed: int) -> FaultPlan:
        """The run's failure plan (drawn from ``(seed, client, phase)``; stragglers too)."""
        return FaultPlan(seed=seed, rate=self.fail_rate, clients=self.fail_clients,
                         straggle_seconds=self.straggle_seconds, round_timeout=self.round_timeout)


def parse_run_config(values: Mapping[str, Any]) -> tuple[RunConfig, AppOptions]:
    """Split a Flower run config into the validated run and the app options."""
    run = {k: v for k, v in values.items() if k not in APP_DEFAULTS}
    app = {**APP_DEFAULTS, **{k: v for k, v in values.items() if k in APP_DEFAULTS}}
    try:
        timeout = float(app["round-timeout"])
    except (TypeError, ValueError):
        timeout = math.nan
    if not (math.isfinite(timeout) and timeout > 0):
        raise ConfigError(f"round-timeout={app['round-timeout']!r} is invalid; allowed: a number of seconds > 0")
    if not isinstance(app["out-dir"], str) or not app["out-dir"].strip():
        raise ConfigError(f"out-dir={app['out-dir']!r} is invalid; allowed: a directory path")
    config = RunConfig.from_mapping(run)
    options = AppOptions(
        out_dir=app["out-dir"],
        round_timeout=timeout,
        fail_rate=parse_fail_rate(app["fail-rate"]),
        fail_clients=parse_fail_clients(app["fail-clients"], config.clients),
        straggle_seconds=parse_straggle_seconds(app["straggle-seconds"]),
        min_fraction=parse_min_fraction(app["min-fraction"]),
        secure_aggregation=parse_flag("secure-aggregation", app["secure-aggregation"]),
        api=parse_api(app["api"]),
    )
    return config, options


def parse_flag(name: str, value: object) -> bool:
    """A boolean key: ``true``/``false`` (TOML booleans, or those words as strings)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{name}={value!r} is invalid; allowed: true, false")


def parse_api(value: object) -> str:
    """The Flower API of a run (``api`` key, ``--api`` flag): one of :data:`APIS`."""
    if value not in APIS:
        raise ConfigError(f"api={value!r} is invalid; allowed: {', '.join(APIS)}")
    return str(value)


def to_run_config(config: RunConfig, options: AppOptions | None = None) -> dict[str, Any]:
    """The Flower run config of a :class:`RunConfig` (unset optional fields left out)."""
    values: dict[str, Any] = {k.replace("_", "-"): v for k, v in config.to_dict().items() if v is not None}
    if options is not None:
        values.update({
            "out-dir": options.out_dir,
            "round-timeout": options.round_timeout,
            "fail-rate": options.fail_rate,
            "fail-clients": ",".join(map(str, options.fail_clients)) if options.fail_clients is not None else "",
            "straggle-seconds": options.straggle_seconds,
            "min-fraction": options.min_fraction,
            "secure-aggregation": options.secure_aggregation,
            "api": options.api,
        })
    return values
