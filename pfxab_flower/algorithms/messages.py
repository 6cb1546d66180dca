"""The messages that cross the network: small dataclasses of numpy arrays.

A message holds only what a deployment would send (node ids, means, counts, a few integers); a
phase is two exchanges and the run ends with a third (docs/flower.md, "How a phase maps onto Flower
rounds"). Every server message carries the run's :class:`~pfxab_flower.schema.spec.AlgorithmSpec`, so a
client needs nothing but its objective. :mod:`pfxab_flower.running.wire.codec` converts them to Flower types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from pfxab_flower.algorithms.run_spec import RunSpec


@dataclass(frozen=True)
class PhaseInstruction:
    """Start phase ``phase``: the union ``A(p)`` and how often to pull its nodes."""

    phase: int
    node_ids: np.ndarray  # A(p), sorted int64
    global_pulls: int  # pulls of every node of A(p)
    local_pulls: int  # further pulls of every node of the client's own A^m(p)
    parameters: RunSpec


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
    parameters: RunSpec
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
    parameters: RunSpec


@dataclass(frozen=True)
class FinishReport:
    """The node a client exploits until the horizon and its centre in the user's units; and its best observed point.

    The best observed point is the node of highest mean of the client's own rewards among those it
    pulled in its search (:mod:`pfxab_flower.algorithms.phased.observed`), with that mean and its
    pulls: all four ``best_*`` parts are ``None`` if it drew no reward (no phase, no search).
    """

    client: int
    node_id: int
    point: np.ndarray  # (d,) float: the node's cell centre, in the domain's units
    best_node_id: int | None = None
    best_point: np.ndarray | None = None  # (d,) float: the best observed node's cell centre
    best_mean: float | None = None  # the mean of the client's own rewards there
    best_pulls: int | None = None  # how many rewards that mean is of


Message = PhaseInstruction | LocalReport | GlobalUpdate | ActiveSetReport | FinishInstruction | FinishReport
