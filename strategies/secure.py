"""Secure aggregation of the local means with Flower's SecAgg+: the server learns only sums.

With ``secure-aggregation = true`` a client does not send its local means in the
clear: its explore reply is one vector over the broadcast union ``A(p)`` (the same
length for every client, which SecAgg+ needs)::

    [ means * sampled  |  sampled ]        (sampled = 1 where the client pulled the node)

and then one block per statistic the run's confidence bound declares (``bernstein``: the
sample variances), scaled into the clipping range, ``values * sampled / STATISTIC_SCALE``
(a variance of rewards in ``[-8, 8]`` is at most ``64 n / (n - 1) <= 128``), so the server
learns only their sums too.

Flower's ``secaggplus_mod`` (client) quantises and masks it, and ``SecAggPlusWorkflow``
(server) reveals only the average over the ``n`` clients that took part (every
client is given the same weight: ``num_examples = max_weight = 1``). ``n`` times that
average is the per-node sum of local means and the number of holders, from which
``ServerMachine.aggregate_sums`` forms the same pooled means as ``aggregate`` (up to
the quantisation error: values are clipped to ``[-SECURE_CLIP, SECURE_CLIP]`` and
rounded stochastically to ``2 * SECURE_CLIP / 2**22``). Holders are summed securely
too, so the server never learns which client sampled which node.

What the server still sees in the clear: each client's new active set (it needs
them to form the next union) and, in the final round, each client's final node and
point (and, in simulation only, its pull log, to score regret).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from flwr.app import Context
from flwr.server import History, LegacyContext, ServerConfig
from flwr.server.workflow import SecAggPlusWorkflow
from flwr.serverapp import Grid

from pfxab_flower.algorithms.messages import LocalReport
from pfxab_flower.errors import ObjectiveError
from pfxab_flower.strategies.workflow import PhasedWorkflow

SECURE_CLIP = 8.0  # SecAgg+ clipping range (Flower's default): local means must lie in [-8, 8]
QUANTIZATION_RANGE = 2**22  # Flower's default: the quantisation step is 2 * SECURE_CLIP / 2**22
STATISTIC_SCALE = 2 * SECURE_CLIP  # statistics are sent divided by this (a variance into [0, SECURE_CLIP])
FINAL_NODE = "final-node"
FINAL_POINT = "final-point"


def local_vector(report: LocalReport) -> np.ndarray:
    """The vector a client hands to SecAgg+: its masked local means, its sampled flags, its masked statistics."""
    counts = np.asarray(report.counts)
    sampled = counts > 0
    means = np.where(sampled, np.asarray(report.means, dtype=float), 0.0)
    outside = np.flatnonzero(np.abs(means) > SECURE_CLIP)
    if outside.size:
        k = int(outside[0])
        raise ObjectiveError(
            f"client {report.client}: local mean {means[k]:.6g} of node {int(report.node_ids[k])} is outside "
            f"[-{SECURE_CLIP:g}, {SECURE_CLIP:g}], the range secure aggregation quantises; allowed: rewards "
            f"in that range (rescale the objective) or secure-aggregation=false"
        )
    blocks = [means, sampled.astype(float)]
    blocks += [np.where(sampled, np.asarray(values, dtype=float), 0.0) / STATISTIC_SCALE
               for values in report.statistics.values()]
    return np.concatenate(blocks)


def split_aggregate(
    average: np.ndarray, reporters: int, size: int, statistics: Sequence[str] = ()
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """``(sums, holders, statistic sums by name)`` from SecAgg+'s average over ``reporters`` clients.

    ``statistics`` names the blocks after the holders (the run's ``bound.statistics``).
    Wrong lengths are passed on for the core to reject.
    """
    vector = np.asarray(average, dtype=float).reshape(-1)
    if vector.size != (2 + len(statistics)) * size:
        return vector, np.zeros(0), {name: np.zeros(0) for name in statistics}
    sums, holders = vector[:size] * reporters, np.rint(vector[size:2 * size] * reporters)
    blocks = {name: vector[(2 + i) * size:(3 + i) * size] * reporters * STATISTIC_SCALE
              for i, name in enumerate(statistics)}
    return sums, holders, blocks


def finish_payload(arrays: list[np.ndarray], config: dict) -> tuple[list[np.ndarray], dict]:
    """A final reply's payload with its tensors moved into the config (SecAgg+ sums every fit reply's tensors)."""
    node, point = arrays
    moved = {FINAL_NODE: int(np.asarray(node).reshape(-1)[0]), FINAL_POINT: np.asarray(point, dtype="<f8").tobytes()}
    return [np.zeros(1)], {**config, **moved}


def unpack_finish(config: dict) -> tuple[list[np.ndarray], dict]:
    """The ordinary final-reply payload of :func:`finish_payload`'s config (unreadable parts passed on as empty)."""
    node, point = config.get(FINAL_NODE), config.get(FINAL_POINT)
    rest = {k: v for k, v in config.items() if k not in (FINAL_NODE, FINAL_POINT)}
    if isinstance(node, bool) or not isinstance(node, int) or not isinstance(point, bytes) or len(point) % 8:
        return [], rest
    return [np.array([node], dtype=np.int64), np.frombuffer(point, dtype="<f8").copy()], rest


def run_legacy_workflow(
    grid: Grid, context: Context, strategy: Any, num_rounds: int, round_timeout: float
) -> History:
    """Flower's legacy round loop for a legacy strategy, every fit round through SecAgg+ if the strategy is secure.

    At most ``num_rounds`` Flower rounds; the loop ends when the run is over
    (:class:`~.workflow.PhasedWorkflow`). SecAgg+ can unmask the sum when
    ``max(0.5, min-fraction)`` of the clients took part. Returns Flower's ``History``.
    """
    legacy = LegacyContext(context=context, config=ServerConfig(num_rounds=num_rounds, round_timeout=round_timeout),
                           strategy=strategy)
    fit = None
    if strategy.secure_aggregation:
        fit = SecAggPlusWorkflow(
            num_shares=1.0,  # every client shares its mask keys with every other
            reconstruction_threshold=max(0.5, min(1.0, strategy.driver.settings.min_fraction)),
            max_weight=1.0, clipping_range=SECURE_CLIP, quantization_range=QUANTIZATION_RANGE,
            timeout=round_timeout,
        )
    PhasedWorkflow(fit_workflow=fit)(grid, legacy)
    return legacy.history
