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

#: Keys of a Flower run config that are not RunConfig fields, with their defaults.
APP_DEFAULTS: dict[str, Any] = {"out-dir": "results/latest", "round-timeout": 600.0}


@dataclass(frozen=True)
class AppOptions:
    """Options of the Flower app itself (where results go, how long a round may take)."""

    out_dir: str = APP_DEFAULTS["out-dir"]
    round_timeout: float = APP_DEFAULTS["round-timeout"]


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
    return RunConfig.from_mapping(run), AppOptions(out_dir=app["out-dir"], round_timeout=timeout)


def to_run_config(config: RunConfig, options: AppOptions | None = None) -> dict[str, Any]:
    """The Flower run config of a :class:`RunConfig` (unset optional fields left out)."""
    values: dict[str, Any] = {k.replace("_", "-"): v for k, v in config.to_dict().items() if v is not None}
    if options is not None:
        values.update({"out-dir": options.out_dir, "round-timeout": options.round_timeout})
    return values
