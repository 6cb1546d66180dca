"""The strategy class of every registered algorithm, by name: :data:`STRATEGIES` (Message API) and
:data:`LEGACY_STRATEGIES` (legacy API).

The package's algorithms map to their classes in ``strategies/named.py``; an algorithm registered at run time gets
one made on first use (:class:`~pfxab_flower.strategies.common.StrategyClasses`). An unknown name: one line.
"""

from __future__ import annotations

from collections.abc import Mapping

from pfxab_flower.strategies import named
from pfxab_flower.strategies.common import StrategyClasses
from pfxab_flower.strategies.legacy import LegacyPhasedEliminationStrategy
from pfxab_flower.strategies.message import PhasedEliminationStrategy

#: The Message-API strategy class of every registered algorithm (``STRATEGIES["pf-xab"]`` is ``PFXAB``).
STRATEGIES: Mapping[str, type[PhasedEliminationStrategy]] = StrategyClasses(
    PhasedEliminationStrategy, named.MESSAGE_API)
#: The legacy-API strategy class of every registered algorithm (``LEGACY_STRATEGIES["pf-xab"]`` is ``PFXABStrategy``).
LEGACY_STRATEGIES: Mapping[str, type[LegacyPhasedEliminationStrategy]] = StrategyClasses(
    LegacyPhasedEliminationStrategy, named.LEGACY_API, "Strategy")
