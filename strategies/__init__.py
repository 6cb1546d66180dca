"""Flower strategies for every registered algorithm: codecs over the core's
:class:`~pfxab_flower.running.driver.ServerDriver`.

Message API: :class:`PhasedEliminationStrategy` (``algorithm=...``) and one class per algorithm, :class:`PFXAB`,
:class:`FedPNE`, ... (``strategies/named.py``); legacy API: :class:`PFXABStrategy`, .... By name: ``STRATEGIES[name]``,
``LEGACY_STRATEGIES[name]``.
"""

from pfxab_flower.strategies.by_name import LEGACY_STRATEGIES, STRATEGIES
from pfxab_flower.strategies.legacy import LegacyPhasedEliminationStrategy
from pfxab_flower.strategies.message import PhasedEliminationStrategy
from pfxab_flower.strategies.named import (
    PFPNE,
    PFXAB,
    FedPNE,
    FedPNEStrategy,
    PFPNEStrategy,
    PFXABStrategy,
)

__all__ = [
    "LEGACY_STRATEGIES",
    "PFPNE",
    "PFXAB",
    "STRATEGIES",
    "FedPNE",
    "FedPNEStrategy",
    "LegacyPhasedEliminationStrategy",
    "PFPNEStrategy",
    "PFXABStrategy",
    "PhasedEliminationStrategy",
]
