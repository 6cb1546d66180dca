"""Exact regret, reward and communication ledgers of a run, from the clients' pull logs.

A pull log is segments of ``count`` pulls of one node, over which the personalised gap is
constant, so the regret curve is exact at every integer ``t``. A federation with no reference
(:meth:`Federation.truth <pfxab_flower.problems.federation.Federation.truth>` is ``None``) is
not scored: its ledger holds the pulls and NaN for regret.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.sampling import PullLog

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ClientLedger:
    """One client's exact totals and its cumulative regret at every segment end."""

    ends: np.ndarray  # time t at each segment end
    cumulative_regret: np.ndarray
    regret: float
    pulls: int  # pulls scored: the horizon, or fewer for a client lost before the end
    reward_personalised: float
    reward_global: float
    reward_local: float


@dataclass(frozen=True)
class Ledger:
    """Every client's ledger for one run, scored against ``federation.optimum(alpha)``."""

    clients: list[ClientLedger]
    optimum: np.ndarray
    horizon: int
    scored: bool = True  # False: no ground truth (real evaluations, no reference); regret and rewards are NaN
    #: each client's simple regret at the nodes :func:`score` was given (``optimum - personalised value``), by name
    #: (``final``, ``best``): NaN where a client has no such node, or the run is not scored
    simple: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def regret(self) -> float:
        return float(sum(c.regret for c in self.clients))

    def curve(self) -> pd.DataFrame:
        """Total cumulative regret at every client's segment end (and t = 0)."""
        import pandas as pd  # here: pandas costs ~0.2 s to import, and a run that only prints needs none

        times = np.unique(np.concatenate([[0]] + [c.ends for c in self.clients]))
        return pd.DataFrame({"t": times, "regret": self.curve_at(times)})

    def curve_at(self, times: np.ndarray) -> np.ndarray:
        """Total cumulative regret at arbitrary times ``0 <= t <= T`` (NaN for an unscored run)."""
        times = np.asarray(times, dtype=float)
        if not self.scored:
            return np.full(times.shape, np.nan)
        total = np.zeros(times.shape)
        for c in self.clients:
            total += np.interp(times, np.concatenate([[0], c.ends]), np.concatenate([[0.0], c.cumulative_regret]))
        return total


def score(
    federation: Federation, alpha: float, horizon: int, logs: list[PullLog], lost: frozenset[int] = frozenset(),
    points: Mapping[str, np.ndarray] | None = None,
) -> Ledger:
    """Score every client's pull log exactly against the true personalised optimum.

    A client in ``lost`` (its node died before the end) is scored on the pulls it reported,
    at most ``horizon``; every other client must have pulled exactly ``horizon`` times.
    ``points`` names nodes, one per client (0: none), whose simple regret the ledger gives
    (:attr:`Ledger.simple`): the final and the best observed nodes. They are evaluated with the
    pulled ones, before the optimum (an optimum estimated from evaluated points counts them).
    """
    if len(logs) != federation.num_clients:
        raise ValueError(f"{len(logs)} pull logs for {federation.num_clients} clients")
    for m, log in enumerate(logs):
        if log.total != horizon and not (m in lost and log.total <= horizon):
            raise ValueError(f"client {m} pulled {log.total} times, expected the horizon {horizon}")
    named = {name: np.asarray(ids, dtype=np.int64) for name, ids in (points or {}).items()}
    pulled = np.concatenate([log.node_ids for log in logs])
    nodes, inverse = np.unique(np.concatenate([pulled, *(ids[ids > 0] for ids in named.values())]),
                               return_inverse=True)
    truth = federation.truth()
    if truth is None:  # nothing to score against: NaN values, never an extra call of the objectives
        local = np.full((federation.num_clients, len(nodes)), np.nan)
        optimum = np.full(federation.num_clients, np.nan)
    else:
        truth.start_scoring()  # an optimum estimated from evaluated points: this run's points only
        local = truth.local_values(truth.partition.midpoints(nodes))  # (M, nodes)
        optimum = truth.optimum(alpha).values
    global_ = local.mean(axis=0)
    personalised = alpha * local + (1.0 - alpha) * global_
    simple = {name: _gaps_at(ids, nodes, personalised, optimum) for name, ids in named.items()}
    ledgers = []
    offset = 0
    for m, log in enumerate(logs):
        idx = inverse[offset : offset + len(log.node_ids)]
        offset += len(log.node_ids)
        counts = log.counts.astype(float)
        gaps = optimum[m] - personalised[m, idx]
        cumulative = np.cumsum(counts * gaps)
        ledgers.append(
            ClientLedger(
                ends=np.cumsum(log.counts),
                cumulative_regret=cumulative,
                regret=float(cumulative[-1]) if len(cumulative) else 0.0,
                pulls=int(log.total),
                reward_personalised=float(counts @ personalised[m, idx]),
                reward_global=float(counts @ global_[idx]),
                reward_local=float(counts @ local[m, idx]),
            )
        )
    return Ledger(ledgers, optimum, horizon, scored=truth is not None, simple=simple)


def _gaps_at(ids: np.ndarray, nodes: np.ndarray, personalised: np.ndarray, optimum: np.ndarray) -> np.ndarray:
    """Each client's ``optimum - personalised value`` at its node ``ids[m]`` (among ``nodes``); NaN where it is 0."""
    gaps = np.full(len(ids), np.nan)
    rows = np.flatnonzero(ids > 0)
    gaps[rows] = optimum[rows] - personalised[rows, np.searchsorted(nodes, ids[rows])]
    return gaps


@dataclass
class CommunicationLog:
    """What crossed the network, one row per exchange (server broadcast + client replies)."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    def record(self, phase: int, kind: str, values_down: int, bytes_down: int, values_up: int, bytes_up: int) -> None:
        self.rows.append(
            {
                "round": len(self.rows) + 1,
                "phase": phase,
                "kind": kind,
                "values_down": int(values_down),
                "bytes_down": int(bytes_down),
                "values_up": int(values_up),
                "bytes_up": int(bytes_up),
            }
        )

    def total(self, column: str) -> int:
        """The sum of one count column (``values_down``, ``bytes_up``, ...) over every exchange."""
        return sum(int(row[column]) for row in self.rows)

    def frame(self) -> pd.DataFrame:
        import pandas as pd  # here: see Ledger.curve

        columns = ["round", "phase", "kind", "values_down", "bytes_down", "values_up", "bytes_up"]
        return pd.DataFrame(self.rows, columns=columns)
