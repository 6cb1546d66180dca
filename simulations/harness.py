"""The simulation harness of a Flower run: score the clients' pull logs exactly, like ``engine.run``.

The strategy only transports messages; once it has the clients' final reports
and pull logs (simulation data, not part of the algorithm), this module builds
the same :class:`RunResult` as the in-process engine, from the same pieces and
with the same calls (``score`` then ``build_result``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pfxab_flower.engine import scored_result
from pfxab_flower.problems.federation import Federation
from pfxab_flower.results import RunResult
from pfxab_flower.sampling import PullLog
from pfxab_flower.strategies.strategy import PhasedStrategy


class IncompleteRunError(RuntimeError):
    """The Flower run ended without every client's final report and pull log."""


def pull_logs(strategy: PhasedStrategy) -> list[PullLog]:
    """Each client's pull log, from the harness tensors of its final reply."""
    logs = []
    for m in range(strategy.settings.num_clients):
        tensors = strategy.harness.get(m)
        if tensors is None or len(tensors) != 2:
            raise IncompleteRunError(f"client {m} sent no pull log with its final report")
        logs.append(PullLog(np.asarray(tensors[0], dtype=np.int64), np.asarray(tensors[1], dtype=np.int64)))
    return logs


def flower_result(
    strategy: PhasedStrategy, federation: Federation, describe: dict[str, Any], wall_seconds: float
) -> RunResult:
    """The run's result, identical to the in-process engine's except ``engine``, bytes and wall time."""
    if not strategy.finished:
        raise IncompleteRunError(f"the run stopped after {strategy.server.completed} phases, before the final round")
    describe = {**(describe or {}), "secure_aggregation": bool(strategy.secure_aggregation)}
    return scored_result(
        federation, strategy.algorithm, "flower", strategy.server, pull_logs(strategy), strategy.communication,
        describe, wall_seconds,
    )
