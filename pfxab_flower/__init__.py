"""pfxab-flower: personalised federated X-armed bandits (PF-XAB) on Flower.

PF-XAB is from Arabzadeh, Grant and Leslie, *Federated X-armed Bandit with Flexible
Personalisation*, TMLR 2024 (arXiv:2409.07251); the baselines Fed-PNE and PF-PNE are
from Li et al. (AAAI 2024, AISTATS 2024).

The flat API::

    from pfxab_flower import Domain, Federation, RunConfig, compare, run, run_config

Flower strategies and client apps: :mod:`pfxab_flower.strategies` (``PFXAB``, ``FedPNE``,
``PFPNE``) and :mod:`pfxab_flower.client_apps` (``objective_client_app``). Names are
imported on first use, so ``import pfxab_flower`` stays cheap for a Flower app.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("pfxab-flower")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

#: Public name -> the module that defines it.
_EXPORTS = {
    "Domain": "pfxab_flower.domain",
    "Federation": "pfxab_flower.problems.federation",
    "RunConfig": "pfxab_flower.config",
    "ConfigError": "pfxab_flower.errors",
    "RunResult": "pfxab_flower.results",
    "run": "pfxab_flower.engine",
    "run_config": "pfxab_flower.engine",
    "compare": "pfxab_flower.compare",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pfxab_flower' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
