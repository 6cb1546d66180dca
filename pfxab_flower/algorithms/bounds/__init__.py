"""Confidence bounds: one :class:`ConfidenceBound` per file, registered here by its ``confidence`` name.

The machines use a run's bound only through :mod:`.base`'s interface, so a new bound is its file
plus one entry in :data:`BOUNDS` (and its name in ``config.CONFIDENCES``; a test checks both agree).
"""

from pfxab_flower.algorithms.bounds.base import (
    ClientView,
    ConfidenceBound,
    Design,
    RunView,
    Samples,
    Widths,
    eliminate_with_widths,
)
from pfxab_flower.algorithms.bounds.bernstein import Bernstein
from pfxab_flower.algorithms.bounds.hoeffding import Hoeffding, eliminate_below

#: ``confidence`` name -> its bound (stateless: one instance serves every run).
BOUNDS: dict[str, ConfidenceBound] = {bound.name: bound for bound in (Hoeffding(), Bernstein())}


def bound_named(name: str) -> ConfidenceBound:
    """The bound of ``confidence = name``; ``KeyError`` for a name that is not registered (validated earlier)."""
    return BOUNDS[name]


__all__ = [
    "BOUNDS", "Bernstein", "ClientView", "ConfidenceBound", "Design", "Hoeffding", "RunView", "Samples", "Widths",
    "bound_named", "eliminate_below", "eliminate_with_widths",
]
