"""Secure aggregation of the local means with Flower's SecAgg+: the server learns only sums.

With ``secure-aggregation = true`` a client does not send its local means in the
clear: its explore reply is one vector over the broadcast union ``A(p)`` (the same
length for every client, which SecAgg+ needs)::

    [ means * sampled  |  sampled ]        (sampled = 1 where the client pulled the node)

Flower's ``secaggplus_mod`` (client) quantises and masks it, and ``SecAggPlusWorkflow``
(server) reveals only the average over the ``n`` clients that took part (every
client is given the same weight: ``num_examples = max_weight = 1``). ``n`` times that
average is the per-node sum of local means and the number of holders, from which
``ServerMachine.aggregate_sums`` forms the same pooled means as ``aggregate`` (up to
the quantisation error: values are clipped to ``[-SECURE_CLIP, SECURE_CLIP]`` and
rounded stochastically to ``2 * SECURE_CLIP / 2**22``). Holders are summed securely
too, so the server never learns which client sampled which node.

What the server still sees in the clear: each client's new active set (it needs
them to form the next union) and, in the final round, each client's final node
(and, in simulation only, its pull log, to score regret).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from flwr.app import Context
from flwr.client import ClientApp
from flwr.client.mod import secaggplus_mod
from flwr.server import LegacyContext, ServerApp, ServerAppComponents
from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow
from flwr.serverapp import Grid

from pfxab_flower.algorithms.messages import LocalReport
from pfxab_flower.errors import ObjectiveError

SECURE_CLIP = 8.0  # SecAgg+ clipping range (Flower's default): local means must lie in [-8, 8]
QUANTIZATION_RANGE = 2**22  # Flower's default: the quantisation step is 2 * SECURE_CLIP / 2**22
FINAL_NODE = "final-node"
LOG_NODES = "pull-log-nodes"
LOG_COUNTS = "pull-log-counts"


def local_vector(report: LocalReport) -> np.ndarray:
    """The vector a client hands to SecAgg+: its masked local means, then its sampled flags."""
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
    return np.concatenate([means, sampled.astype(float)])


def split_aggregate(average: np.ndarray, reporters: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``(sums, holders)`` from SecAgg+'s average over ``reporters`` clients (wrong lengths are passed on)."""
    vector = np.asarray(average, dtype=float).reshape(-1)
    if vector.size != 2 * size:
        return vector, np.zeros(0)
    return vector[:size] * reporters, np.rint(vector[size:] * reporters)


def finish_metrics(final_node: int, harness: list[np.ndarray]) -> dict:
    """The final reply's content in metrics (SecAgg+ replaces every fit reply's tensors by the sum)."""
    metrics: dict = {FINAL_NODE: int(final_node)}
    if len(harness) == 2:
        metrics[LOG_NODES] = np.asarray(harness[0], dtype="<i8").tobytes()
        metrics[LOG_COUNTS] = np.asarray(harness[1], dtype="<i8").tobytes()
    return metrics


def finish_from_metrics(metrics: dict) -> tuple[int, list[np.ndarray]]:
    node = metrics.get(FINAL_NODE)
    if isinstance(node, bool) or not isinstance(node, int):
        raise ValueError(f"{FINAL_NODE!r} is {node!r}, not an integer")
    nodes, counts = metrics.get(LOG_NODES), metrics.get(LOG_COUNTS)
    if isinstance(nodes, bytes) and isinstance(counts, bytes) and len(nodes) % 8 == 0 and len(counts) % 8 == 0:
        return node, [np.frombuffer(nodes, dtype="<i8").astype(np.int64),
                      np.frombuffer(counts, dtype="<i8").astype(np.int64)]
    return node, []


def secure_server_app(server_fn: Callable[[Context], ServerAppComponents]) -> ServerApp:
    """A ServerApp running ``server_fn``'s strategy with every fit round through SecAgg+.

    SecAgg+ can unmask the sum when ``max(0.5, min-fraction)`` of the clients took part.
    """
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        components = server_fn(context)
        strategy = components.strategy
        strategy.secure_aggregation = True  # type: ignore[union-attr]
        legacy = LegacyContext(context=context, config=components.config, strategy=strategy)
        fit = SecAggPlusWorkflow(
            num_shares=1.0,  # every client shares its mask keys with every other
            reconstruction_threshold=max(0.5, min(1.0, strategy.settings.min_fraction)),  # type: ignore[union-attr]
            max_weight=1.0, clipping_range=SECURE_CLIP, quantization_range=QUANTIZATION_RANGE,
            timeout=components.config.round_timeout,
        )
        DefaultWorkflow(fit_workflow=fit)(grid, legacy)

    return app


def secure_client_app(client_fn: Callable) -> ClientApp:
    """A ClientApp whose fit replies go through Flower's ``secaggplus_mod``."""
    return ClientApp(client_fn=client_fn, mods=[secaggplus_mod])

