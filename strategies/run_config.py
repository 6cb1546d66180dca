"""Moved to :mod:`pfxab_flower.config` (one declaration of every parameter); re-exported for old imports."""

from pfxab_flower.config import APIS, APP_DEFAULTS, AppOptions, parse_api, parse_flag, parse_run_config, to_run_config

__all__ = ["APIS", "APP_DEFAULTS", "AppOptions", "parse_api", "parse_flag", "parse_run_config", "to_run_config"]
