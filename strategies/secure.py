"""Secure aggregation of the local means with Flower's SecAgg+: the server learns only sums.

With ``secure-aggregation = true`` a client's explore reply is one vector over the
broadcast union, laid out by :mod:`pfxab_flower.wire.summed` (its local means, its
sampled flags and its statistics, masked where it did not sample); Flower's
``secaggplus_mod`` (client) quantises and masks it, and ``SecAggPlusWorkflow`` (server)
reveals only the average over the clients that took part, from which the server forms
the same pooled means as in the clear (up to the quantisation error). Holders are summed
securely too, so the server never learns which client sampled which node.

What the server still sees in the clear: each client's new active set (it needs
them to form the next union) and, in the final round, each client's final node and
point, carried in the reply's metrics (SecAgg+ sums every fit reply's tensors), and, in
simulation only, its pull log, to score regret.
"""

from __future__ import annotations

from typing import Any

from flwr.app import Context
from flwr.server import History, LegacyContext, ServerConfig
from flwr.server.workflow import SecAggPlusWorkflow
from flwr.serverapp import Grid

from pfxab_flower.strategies.workflow import PhasedWorkflow
from pfxab_flower.wire.summed import QUANTIZATION_RANGE, SECURE_CLIP


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
