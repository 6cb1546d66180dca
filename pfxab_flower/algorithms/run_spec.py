"""What the algorithms read of a run's spec: :class:`RunSpec`, a typing protocol.

The spec itself (:class:`pfxab_flower.schema.spec.AlgorithmSpec`) is checked against the algorithms' registry,
so it sits above them; they name this protocol instead and import nothing above them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, Self, TypeVar


class RunSpec(Protocol):
    """What an algorithm reads of one run's checked spec (:class:`pfxab_flower.schema.spec.AlgorithmSpec`)."""

    @property
    def algorithm(self) -> str: ...
    @property
    def num_clients(self) -> int: ...
    @property
    def horizon(self) -> int: ...
    @property
    def alpha(self) -> float: ...
    @property
    def seed(self) -> int: ...
    @property
    def nu1(self) -> float: ...
    @property
    def rho(self) -> float: ...
    @property
    def max_depth(self) -> int | None: ...
    @property
    def confidence(self) -> str: ...
    @property
    def max_evaluations(self) -> int | None: ...
    @property
    def reward_range(self) -> tuple[float, float]: ...
    @property
    def report_pulls(self) -> bool: ...
    @property
    def options(self) -> Mapping[str, Any]:
        """The algorithm's own parameters, by name."""
        ...

    def __getattr__(self, name: str) -> Any:
        """A common parameter declared in the catalogue without a typed property here (``spec.<name>``)."""
        ...

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (values already checked)."""
        ...

    def for_clients(self, report_pulls: bool) -> Self:
        """What the server sends its clients."""
        ...

    def to_wire(self) -> dict[str, str | int | float]:
        """Flat scalars for a message (what a client decodes)."""
        ...

    def summary(self) -> dict[str, Any]:
        """The parameters as a run's summary lists them."""
        ...


#: A spec of whichever class the caller holds (what :meth:`~pfxab_flower.algorithms.phased.Policy.resolve` returns).
SpecT = TypeVar("SpecT", bound=RunSpec)
