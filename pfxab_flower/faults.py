"""Dropouts and stragglers: injected client failures, and the quorum a phase needs.

A :class:`FaultPlan` drops each chosen client from each phase with probability ``rate``, drawn from
``(seed, client, phase)`` only, so every engine drops the same clients; with ``straggle_seconds`` the
same draws make late replies instead. ``min_fraction`` is the share of clients a phase needs.
The options and their meaning: docs/deployment.md ("Dropouts and stragglers").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Seconds a Flower round waits for replies unless told otherwise (``round_timeout``): a later reply is dropped.
DEFAULT_ROUND_TIMEOUT = 600.0
#: The share of the ``M`` clients an exchange needs unless told otherwise (``min_fraction``).
DEFAULT_MIN_FRACTION = 0.5

#: Keeps the failure stream apart from the noise stream, which is seeded by (seed, client, phase) too.
_STREAM = 0xFA17


class InjectedFailureError(RuntimeError):
    """A failure the run asked for (``fail-rate``): the client behaves as if it were unreachable."""


@dataclass(frozen=True)
class FaultPlan:
    """Which clients miss which phases: a deterministic function of ``(seed, client, phase)``.

    ``rate`` and ``clients`` select (client, phase) pairs; ``straggle_seconds`` says how
    a selected client misses its phase: at once (0) or by answering that late, which
    misses the phase only if it is at least ``round_timeout``.
    """

    seed: int = 0
    rate: float = 0.0
    clients: tuple[int, ...] | None = None  # the clients that may fail (None: all)
    straggle_seconds: float = 0.0  # 0: selected clients fail; > 0: they answer this late
    round_timeout: float = DEFAULT_ROUND_TIMEOUT  # a later reply is dropped by Flower

    def selects(self, client: int, phase: int) -> bool:
        """Whether the draw picks ``client`` in phase ``phase`` (to fail, or to straggle)."""
        if self.rate <= 0.0 or (self.clients is not None and client not in self.clients):
            return False
        return bool(np.random.default_rng([self.seed, client, phase, _STREAM]).random() < self.rate)

    @property
    def late(self) -> bool:
        """Whether a straggler's replies arrive after the round timeout (and are dropped)."""
        return self.straggle_seconds >= self.round_timeout

    def misses(self, client: int, phase: int) -> bool:
        """Whether ``client`` misses phase ``phase`` (both its replies): it fails, or straggles too late."""
        return self.selects(client, phase) and (self.straggle_seconds <= 0.0 or self.late)

    def check(self, client: int, phase: int) -> None:
        """Raise :class:`InjectedFailureError` if ``client`` fails in ``phase`` (what a Flower client calls)."""
        if self.straggle_seconds <= 0.0 and self.selects(client, phase):
            raise InjectedFailureError(f"client {client}: injected failure in phase {phase} (fail-rate={self.rate})")

    def straggle(self, client: int, phase: int, sleep: Callable[[float], None] = time.sleep) -> bool:
        """Wait ``straggle_seconds`` if ``client`` straggles in ``phase``; whether its reply will be dropped.

        A Flower client calls it before its work on a phase message and keeps that
        work only if it returns ``False``: a reply Flower drops must leave the client
        where the server believes it is (it then catches up from the next broadcast).
        Keeping it would also be unsafe in Flower's simulation engine, which runs a
        node's next message on another actor while the late one still sleeps, so the
        late message's state would overwrite the newer one when it ends.
        """
        if self.straggle_seconds <= 0.0 or not self.selects(client, phase):
            return False
        sleep(self.straggle_seconds)
        return self.late


NO_FAULTS = FaultPlan()


def required_replies(min_fraction: float, num_clients: int) -> int:
    """The fewest usable replies an exchange needs: ``ceil(min_fraction * M)`` (0 only if ``min_fraction`` is 0)."""
    return math.ceil(min_fraction * num_clients - 1e-9)
