"""Flower's legacy round loop (``DefaultWorkflow``) for our legacy strategies, ending when the run is over.

Flower runs a fixed number of rounds and would log every remaining one empty; ours are known only
as the run goes, so the loop is rebuilt from Flower's parts
(:mod:`pfxab_flower.flower_shared.flower_internals`): the fit workflow (plain or SecAgg+),
centralised evaluation, then the evaluate workflow while needed.
"""

from __future__ import annotations

import io
import timeit
from logging import INFO

from flwr.app import Context
from flwr.common import log
from flwr.server import LegacyContext
from flwr.server.workflow import DefaultWorkflow
from flwr.serverapp import Grid

from pfxab_flower.flower_shared import flower_internals
from pfxab_flower.strategies.legacy import LegacyPhasedEliminationStrategy


class PhasedWorkflow(DefaultWorkflow):
    """``DefaultWorkflow`` whose loop stops once the strategy's run is over (``strategy.running`` is false)."""

    def __call__(self, grid: Grid, context: Context) -> None:
        if not isinstance(context, LegacyContext):
            raise TypeError(f"Expect a LegacyContext, but get {type(context).__name__}.")
        strategy = context.strategy
        if not isinstance(strategy, LegacyPhasedEliminationStrategy):
            raise TypeError(f"PhasedWorkflow runs pfxab-flower's legacy strategies, not {type(strategy).__name__}")
        with flower_internals.nodes_registered(grid, context.client_manager):
            log(INFO, "[INIT]")
            flower_internals.initial_parameters(grid, context)
            started = timeit.default_timer()
            flower_internals.start_rounds(context, started)
            flower_round = 0
            while flower_round < context.config.num_rounds and strategy.running:
                flower_round += 1
                log(INFO, "")
                log(INFO, "[ROUND %s]", flower_round)
                flower_internals.set_round(context, flower_round)
                self.fit_workflow(grid, context)
                strategy.fit_round_ended(getattr(self.fit_workflow, "participants", None))
                flower_internals.centralized_evaluation(grid, context)
                if strategy.running:  # the final exchange has no evaluate half; a stopped run sends nothing more
                    self.evaluate_workflow(grid, context)
            log(INFO, "")
            log(INFO, "[SUMMARY]")
            log(INFO, "Run finished %s Flower round(s) in %.2fs", flower_round, timeit.default_timer() - started)
            for index, line in enumerate(io.StringIO(str(context.history))):
                log(INFO, "%s%s", "" if index == 0 else "\t", line.strip("\n"))
            log(INFO, "")
