"""What the machines carry: where every run starts, a client's state between messages, the server's phase plan.

A client's state is saved in Flower's ``context.state`` between messages (:meth:`ClientState.to_arrays`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ROOT = 1
FIRST_ACTIVE_SET = np.array([2, 3], dtype=np.int64)
#: Key prefix of a reported statistic in a saved client state (``statistic:variance``).
STATISTIC_PREFIX = "statistic:"
#: Key prefix of an array of the policy's own memory in a saved client state (``memory:points``).
MEMORY_PREFIX = "memory:"


class ProtocolError(RuntimeError):
    """A message does not fit the machine's state (a transport or peer bug)."""


@dataclass
class ClientState:
    """Everything a client carries between messages, as named arrays (:meth:`to_arrays`) for any store."""

    completed: int = 0  # completed phases
    pulls: int = 0  # pulls made so far (the time t at the end of the last phase)
    active: np.ndarray = field(default_factory=lambda: FIRST_ACTIVE_SET.copy())
    choice: int = ROOT  # node to exploit after the last phase
    union: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    means: np.ndarray = field(default_factory=lambda: np.zeros(0))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: the statistics of the last report over A(p), as the run's bound declares them (e.g. sample variances)
    statistics: dict[str, np.ndarray] = field(default_factory=dict)
    explored: int = 0  # own exploration pulls in the current phase
    finished: bool = False
    explored_phase: int = 0  # the last phase this client explored (it may have missed later messages)
    solo_phases: int = 0  # a solo baseline's client: the phases it ran alone (local-only's own PF-XAB)
    #: every node the client drew rewards from in its search (sorted), with their sums and counts
    #: (:mod:`.observed`; after the final exchange only its best observed node is kept)
    observed_nodes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    observed_sums: np.ndarray = field(default_factory=lambda: np.zeros(0))
    observed_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: its noise as measured from consecutive rounds (``estimates_noise`` policies): ``[sum of squared
    #: standardised differences, their number]``
    noise: np.ndarray = field(default_factory=lambda: np.zeros(2))
    #: what a policy keeps across phases beyond the sets (a proposal policy's history), as named arrays
    memory: dict[str, np.ndarray] = field(default_factory=dict)

    _SCALARS = ("completed", "pulls", "choice", "explored", "finished", "explored_phase", "solo_phases")

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = {k: np.array([int(getattr(self, k))], dtype=np.int64) for k in self._SCALARS}
        arrays.update(active=self.active, union=self.union, means=self.means, counts=self.counts,
                      observed_nodes=self.observed_nodes, observed_sums=self.observed_sums,
                      observed_counts=self.observed_counts)
        if self.noise.any():  # only a policy that measures its noise fills it
            arrays["noise"] = self.noise
        arrays.update({STATISTIC_PREFIX + name: values for name, values in self.statistics.items()})
        arrays.update({MEMORY_PREFIX + name: values for name, values in self.memory.items()})
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> ClientState:
        scalars: dict[str, Any] = {k: int(arrays[k][0]) for k in cls._SCALARS if k in arrays}
        scalars["finished"] = bool(scalars["finished"])
        return cls(
            **scalars,
            active=np.asarray(arrays["active"], dtype=np.int64),
            union=np.asarray(arrays["union"], dtype=np.int64),
            means=np.asarray(arrays["means"], dtype=float),
            counts=np.asarray(arrays["counts"], dtype=np.int64),
            # a state saved before the client kept its observations has none
            observed_nodes=np.asarray(arrays.get("observed_nodes", np.zeros(0)), dtype=np.int64),
            observed_sums=np.asarray(arrays.get("observed_sums", np.zeros(0)), dtype=float),
            observed_counts=np.asarray(arrays.get("observed_counts", np.zeros(0)), dtype=np.int64),
            noise=np.asarray(arrays["noise"], dtype=float) if "noise" in arrays else np.zeros(2),
            statistics={key[len(STATISTIC_PREFIX):]: np.asarray(values, dtype=float)
                        for key, values in arrays.items() if key.startswith(STATISTIC_PREFIX)},
            memory={key[len(MEMORY_PREFIX):]: np.asarray(values)
                    for key, values in arrays.items() if key.startswith(MEMORY_PREFIX)},
        )


@dataclass(frozen=True)
class PhasePlan:
    """The server's view of the phase under way."""

    phase: int
    union: np.ndarray
    global_pulls: int
    local_pulls: int
    length: int
    eliminated: np.ndarray | None = None
    failed_local_means: int = 0  # clients whose local report was missing or rejected
    mean_reward: float = math.nan  # mean of every reward the valid reports observed (NaN: not seen, e.g. SecAgg+)
