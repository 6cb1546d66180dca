"""Flower strategies for every registered algorithm: codecs over the core's
:class:`~pfxab_flower.running.driver.ServerDriver`.

Message API: ``STRATEGIES[name]`` (:class:`PFXAB`, :class:`FedPNE`, :class:`PFPNE` by name); legacy API:
``LEGACY_STRATEGIES[name]`` (:class:`PFXABStrategy`, ...). A class is made per algorithm from the registry.
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
