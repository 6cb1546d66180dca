"""The messages that cross the network: small dataclasses of numpy arrays.

A message holds only what a real deployment would send: node ids, means,
counts, a few integers. A transport (the in-process engine or Flower) moves
them and nothing else; :mod:`pfxab_flower.strategies.serde` converts them to Flower types.

One phase is two exchanges::

    server --PhaseInstruction--> clients --LocalReport-->      server   (Flower: fit)
    server --GlobalUpdate------> clients --ActiveSetReport-->  server   (Flower: evaluate)

and the run ends with one more::

    server --FinishInstruction-> clients --FinishReport-->     server   (Flower: last fit)

Every message from the server carries the run's :class:`AlgorithmParameters`: the server
is the one source of truth for them, so a client needs nothing but its objective, and a
server/client mismatch cannot happen (nor can a client that joins late miss them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

import numpy as np

from pfxab_flower.config import REWARD_LIMIT

#: Parameters added with the ``confidence`` option: sent only when they differ from their default, so a
#: ``hoeffding`` run's messages are the very bytes of earlier versions (and their readers still read them).
OPTIONAL_ON_WIRE = ("confidence", "reward_low", "reward_high")


@dataclass(frozen=True)
class AlgorithmParameters:
    """What every client needs to run its machine, sent by the server with every message.

    ``max_depth = 0`` means no depth limit (a wire format has no ``None``). ``report_pulls``
    belongs to the simulation harness, not to the algorithm: it asks every client to attach
    its pull log to its replies, from which the server scores the exact regret.
    ``confidence`` names the run's confidence bound (:data:`~pfxab_flower.algorithms.bounds.BOUNDS`:
    ``hoeffding``, the paper's widths, or ``bernstein``); a bound whose widths use the rewards'
    range gets it as ``[reward_low, reward_high]``.
    """

    algorithm: str
    num_clients: int
    horizon: int
    alpha: float
    seed: int
    nu1: float = 1.0
    rho: float = 0.5
    max_depth: int = 0
    pf_pne_eps: float = 0.1
    report_pulls: bool = False
    confidence: str = "hoeffding"
    reward_low: float = -REWARD_LIMIT
    reward_high: float = REWARD_LIMIT

    def sent(self) -> list[str]:
        """The fields that go on the wire: every one but the optional ones left at their default."""
        return [f.name for f in fields(self) if f.name not in OPTIONAL_ON_WIRE or getattr(self, f.name) != f.default]

    def to_wire(self) -> dict[str, str | int | float]:
        """The parameters as flat scalars (kebab-case keys), for a Flower config record."""
        return {f"param-{name.replace('_', '-')}": getattr(self, name) for name in self.sent()}

    @classmethod
    def from_wire(cls, values: Mapping[str, object]) -> AlgorithmParameters:
        """The parameters in a received config; ``KeyError``/``TypeError``/``ValueError`` if absent or mistyped."""
        kwargs = {}
        for f in fields(cls):
            key = f"param-{f.name.replace('_', '-')}"
            if f.name in OPTIONAL_ON_WIRE and key not in values:
                continue
            value = values[key]
            kind = {"str": str, "int": int, "float": float, "bool": bool}[str(f.type)]
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
                raise TypeError(f"parameter {f.name} is {value!r}, not {kind.__name__}")
            kwargs[f.name] = value
        return cls(**kwargs)


@dataclass(frozen=True)
class PhaseInstruction:
    """Start phase ``phase``: the union ``A(p)`` and how often to pull its nodes."""

    phase: int
    node_ids: np.ndarray  # A(p), sorted int64
    global_pulls: int  # pulls of every node of A(p)
    local_pulls: int  # further pulls of every node of the client's own A^m(p)
    parameters: AlgorithmParameters


@dataclass(frozen=True)
class LocalReport:
    """A client's local means over ``A(p)``; ``counts == 0`` marks a node it did not sample.

    ``statistics`` holds the per-node statistics the run's confidence bound declares, by
    name, in its declared order (Bernstein: each node's sample ``variance``; Hoeffding: none).
    """

    client: int
    node_ids: np.ndarray
    means: np.ndarray
    counts: np.ndarray
    statistics: Mapping[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class GlobalUpdate:
    """The server's means over ``A(p)``, the phase length, and any nodes it eliminated itself."""

    phase: int
    node_ids: np.ndarray
    global_means: np.ndarray
    phase_length: int
    eliminated: np.ndarray  # bool, one per node of A(p): dropped for everyone by the server
    parameters: AlgorithmParameters
    #: the pooled statistics the bound declares (mean over the holders, NaN where none), in its declared order
    statistics: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: how many clients' means each global mean averages: sent with pooled statistics, else ``None``
    holders: np.ndarray | None = None


@dataclass(frozen=True)
class ActiveSetReport:
    """A client's next active set ``A^m(p + 1)``."""

    client: int
    node_ids: np.ndarray


@dataclass(frozen=True)
class FinishInstruction:
    """No further phase fits: exploit until the horizon."""

    phases: int  # completed phases
    parameters: AlgorithmParameters


@dataclass(frozen=True)
class FinishReport:
    """The node a client exploits until the horizon, and its centre in the user's units."""

    client: int
    node_id: int
    point: np.ndarray  # (d,) float: the node's cell centre, in the domain's units


Message = PhaseInstruction | LocalReport | GlobalUpdate | ActiveSetReport | FinishInstruction | FinishReport


def payload_size(message: Message) -> tuple[int, int]:
    """``(values, bytes)`` of a message's payload: array elements and scalars (8 bytes each)."""
    values = 0
    nbytes = 0
    for part in fields(message):
        value = getattr(message, part.name)
        if value is None:  # an optional part that is not sent
            continue
        if isinstance(value, Mapping):  # named statistics: each array counts (none sent: nothing)
            values += sum(int(np.asarray(v).size) for v in value.values())
            nbytes += sum(int(np.asarray(v).nbytes) for v in value.values())
        elif isinstance(value, AlgorithmParameters):
            values += len(value.sent())
            nbytes += 8 * len(value.sent())
        elif isinstance(value, np.ndarray):
            values += value.size
            nbytes += value.nbytes
        else:
            values += 1
            nbytes += 8
    return values, nbytes
