"""Flower strategies for PF-XAB, Fed-PNE and PF-PNE: codecs over the core's :class:`~pfxab_flower.driver.ServerDriver`.

Message API (Flower's recommended one): :class:`PFXAB`, :class:`FedPNE`, :class:`PFPNE`.
Legacy API (existing deployments): :class:`PFXABStrategy`, :class:`FedPNEStrategy`, :class:`PFPNEStrategy`.
"""

from pfxab_flower.strategies.legacy import (
    LEGACY_STRATEGIES,
    FedPNEStrategy,
    LegacyPhasedEliminationStrategy,
    PFPNEStrategy,
    PFXABStrategy,
)
from pfxab_flower.strategies.message import PFPNE, PFXAB, STRATEGIES, FedPNE, PhasedEliminationStrategy

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
