"""The messages that cross the network: small dataclasses of numpy arrays.

A message holds only what a real deployment would send: node ids, means,
counts, a few integers. A transport (the in-process engine or Flower) moves
them and nothing else; :mod:`pfxab_flower.strategies.serde` converts them to Flower types.

One phase is two exchanges::

    server --PhaseInstruction--> clients --LocalReport-->      server   (Flower: fit)
    server --GlobalUpdate------> clients --ActiveSetReport-->  server   (Flower: evaluate)

and the run ends with one more::

    server --FinishInstruction-> clients --FinishReport-->     server   (Flower: last fit)
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np


@dataclass(frozen=True)
class PhaseInstruction:
    """Start phase ``phase``: the union ``A(p)`` and how often to pull its nodes."""

    phase: int
    node_ids: np.ndarray  # A(p), sorted int64
    global_pulls: int  # pulls of every node of A(p)
    local_pulls: int  # further pulls of every node of the client's own A^m(p)


@dataclass(frozen=True)
class LocalReport:
    """A client's local means over ``A(p)``; ``counts == 0`` marks a node it did not sample."""

    client: int
    node_ids: np.ndarray
    means: np.ndarray
    counts: np.ndarray


@dataclass(frozen=True)
class GlobalUpdate:
    """The server's means over ``A(p)``, the phase length, and any nodes it eliminated itself."""

    phase: int
    node_ids: np.ndarray
    global_means: np.ndarray
    phase_length: int
    eliminated: np.ndarray  # bool, one per node of A(p): dropped for everyone by the server


@dataclass(frozen=True)
class ActiveSetReport:
    """A client's next active set ``A^m(p + 1)``."""

    client: int
    node_ids: np.ndarray


@dataclass(frozen=True)
class FinishInstruction:
    """No further phase fits: exploit until the horizon."""

    phases: int  # completed phases


@dataclass(frozen=True)
class FinishReport:
    """The node a client exploits until the horizon."""

    client: int
    node_id: int


Message = PhaseInstruction | LocalReport | GlobalUpdate | ActiveSetReport | FinishInstruction | FinishReport


def payload_size(message: Message) -> tuple[int, int]:
    """``(values, bytes)`` of a message's payload: array elements and scalars (8 bytes each)."""
    values = 0
    nbytes = 0
    for field in fields(message):
        value = getattr(message, field.name)
        if isinstance(value, np.ndarray):
            values += value.size
            nbytes += value.nbytes
        else:
            values += 1
            nbytes += 8
    return values, nbytes
