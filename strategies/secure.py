"""Secure aggregation of the local means with Flower's SecAgg+: the server learns only sums.

A client's explore reply is the vector of :mod:`pfxab_flower.running.wire.summed`, masked by
``secaggplus_mod``; ``SecAggPlusWorkflow`` reveals only its sum, from which the server pools the
means. What stays in the clear: docs/deployment.md ("Secure aggregation").
"""

from __future__ import annotations

from logging import INFO
from typing import Any

from flwr.app import Context
from flwr.common import log
from flwr.server import History, LegacyContext, ServerConfig
from flwr.server.workflow import SecAggPlusWorkflow
from flwr.serverapp import Grid

from pfxab_flower.flower_shared import flower_internals
from pfxab_flower.running.wire.summed import QUANTIZATION_RANGE, SECURE_CLIP
from pfxab_flower.strategies.workflow import PhasedWorkflow


class SecAggPlusRound(SecAggPlusWorkflow):
    """Flower's ``SecAggPlusWorkflow``, keeping the protocol's state of its last round (:attr:`state`).

    When too few clients remain to unmask the sum (fewer than its reconstruction threshold), Flower's
    workflow halts the round without calling the strategy's ``aggregate_fit``; the loop
    (:class:`~.workflow.PhasedWorkflow`) then tells the strategy how many clients were still taking part.
    """

    state: Any = None  # Flower's WorkflowState of the last round (flower_internals.secure_round_state)

    def __call__(self, grid: Grid, context: Context) -> None:
        if not isinstance(context, LegacyContext):
            raise TypeError(f"Expect a LegacyContext, but get {type(context).__name__}.")
        self.state = state = flower_internals.secure_round_state()
        log(INFO, "Secure aggregation commencing.")
        for step in (self.setup_stage, self.share_keys_stage, self.collect_masked_vectors_stage, self.unmask_stage):
            if not step(grid, context, state):
                log(INFO, "Secure aggregation halted.")
                return
        log(INFO, "Secure aggregation completed.")

    @property
    def participants(self) -> int:
        """How many clients were still taking part when the last round ended (or halted)."""
        return len(self.state.active_node_ids) if self.state is not None else 0


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
    fit: SecAggPlusRound | None = None
    if strategy.secure_aggregation:
        fit = SecAggPlusRound(
            num_shares=1.0,  # every client shares its mask keys with every other
            reconstruction_threshold=max(0.5, min(1.0, strategy.driver.settings.min_fraction)),
            max_weight=1.0, clipping_range=SECURE_CLIP, quantization_range=QUANTIZATION_RANGE,
            timeout=round_timeout,
        )
    PhasedWorkflow(fit_workflow=fit)(grid, legacy)
    return legacy.history
