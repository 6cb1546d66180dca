"""Confidence bounds: one :class:`ConfidenceBound` per file, registered here by its ``confidence`` name.

The machines, policies and codecs use a run's bound only through the interface of
:mod:`.base`, so adding a bound is its file plus one entry in :data:`BOUNDS` (and, until
the run parameters are declared by the algorithms themselves, its name in
``config.CONFIDENCES``; a test fails if the two differ). See ``docs/extending.md``.
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
