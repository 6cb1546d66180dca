"""What crosses between the driver and a transport: the exchange the driver asks for, and its replies.

An :class:`Outgoing` says what to broadcast and which reply is expected; the transport hands the
decoded replies back as an :class:`Exchange`, so no transport keeps state of the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pfxab_flower.algorithms.messages import (
    ActiveSetReport,
    FinishInstruction,
    FinishReport,
    GlobalUpdate,
    LocalReport,
    PhaseInstruction,
)
from pfxab_flower.printable import printable

#: The kinds of exchange, as the communication log names them, and the reply each expects.
EXPECTED_REPLY: Mapping[str, type] = {"explore": LocalReport, "eliminate": ActiveSetReport, "finish": FinishReport}


@dataclass(frozen=True)
class Outgoing:
    """One exchange the driver asks for: the message to broadcast, its phase and kind (``explore``,
    ``eliminate`` or ``finish``; the final exchange's phase is the number of phases + 1)."""

    message: PhaseInstruction | GlobalUpdate | FinishInstruction
    phase: int
    kind: str

    @property
    def expects(self) -> type:
        """The core message each client's reply must decode to."""
        return EXPECTED_REPLY[self.kind]

    @property
    def first(self) -> bool:
        """Whether it opens a Flower round (Flower's train / fit); the elimination is the round's second."""
        return self.kind != "eliminate"


@dataclass
class Unreadable:
    """A reply no core message could be read from: who claimed to send it (if known) and why.

    The reason and a claim that is not a number are a peer's text: made printable (:func:`printable`).
    """

    client: object
    reason: str
    node: int | None = None  # the Flower node it came from, where the transport knows it

    def __post_init__(self) -> None:
        self.reason = printable(self.reason)
        if isinstance(self.client, str | bytes):
            self.client = printable(repr(self.client), 80)


@dataclass
class Failure:
    """A client that sent an error, or nothing, in an exchange: why, and who where the transport knows it."""

    reason: str
    node: int | None = None  # the Flower node the message went to
    client: int | None = None  # the client index, if the transport knows it without the node

    def __post_init__(self) -> None:
        self.reason = printable(self.reason)  # a client's own text: one printable line


@dataclass
class Exchange:
    """The replies of one exchange, decoded by a transport.

    ``senders``, ``harnesses`` and ``sites`` run beside ``reports`` (see :meth:`add`): the
    Flower node each report came from, where the transport knows it, the harness data it
    carried, and the ``site`` label its node's config declares, if any.
    """

    reports: list[Any] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)  # clients that sent an error or nothing
    senders: list[int | None] = field(default_factory=list)
    harnesses: list[Mapping[str, np.ndarray] | None] = field(default_factory=list)
    sites: list[str | None] = field(default_factory=list)

    def add(self, report: Any, node: int | None = None, harness: Mapping[str, np.ndarray] | None = None,
            site: str | None = None) -> None:
        """One readable report, the node it came from, the harness data it carried and the site its node names."""
        self.reports.append(report)
        self.senders.append(node)
        self.harnesses.append(harness or None)
        self.sites.append(None if site is None else printable(site))

    def sources(self) -> list[tuple[Any, int | None, Mapping[str, np.ndarray] | None, str | None]]:
        """Each report with its sender, harness data and site (``None`` where the transport gave none)."""
        missing = len(self.reports)
        senders = self.senders + [None] * (missing - len(self.senders))
        harnesses = self.harnesses + [None] * (missing - len(self.harnesses))
        sites = self.sites + [None] * (missing - len(self.sites))
        return list(zip(self.reports, senders, harnesses, sites, strict=True))


__all__ = ["EXPECTED_REPLY", "Exchange", "Failure", "Outgoing", "Unreadable"]
