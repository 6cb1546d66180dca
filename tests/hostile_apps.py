"""Two hostile SuperNodes in a Flower simulation on Ray: ``python -m tests.hostile_apps``.

The node of partition 0 answers for client 1 from phase 2 on; the node of partition 2 sends a
final pull log one pull too long. Everything else is the bundled app, as ``pfxab run --engine
flower`` runs it. Run in a fresh process (its ClientApp reaches Ray's workers by value); the
last line printed is ``SUMMARY <json>``, the run's summary.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.simulations.flower import in_process_simulation as run_flower
from pfxab_flower.simulations.flower.in_process_simulation import run_flower_simulation
from tests import impostors
from tests.patience import patient

CONFIG = RunConfig(problem="garland", num_clients=4, horizon=20_000, seed=1)


def one_more(nodes: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return nodes, np.append(counts[:-1], counts[-1] + 1)


def hostile(message: Message, reply: Message, partition: int) -> Message:
    """What the two hostile nodes send instead of their honest reply."""
    if partition == 2 and impostors.is_final(message):
        return impostors.edit_pull_log(message, reply, one_more)
    if partition == 0 and impostors.phase_of(message) >= 2:
        return impostors.claim(1)(message, reply)
    return reply


def hostile_app(honest: ClientApp) -> ClientApp:
    """``honest``'s replies, rewritten on the nodes of partitions 0 and 2."""
    app = ClientApp()

    @app.train()
    def train(message: Message, context: Context) -> Message:
        return hostile(message, honest(message, context), int(context.node_config["partition-id"]))

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        return hostile(message, honest(message, context), int(context.node_config["partition-id"]))

    return app


def main() -> None:
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(impostors)  # Ray's workers need not import the tests package
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    honest_app = run_flower.client_app
    run_flower.client_app = lambda *args, **kwargs: hostile_app(honest_app(*args, **kwargs))
    result = run_flower_simulation(CONFIG, options=AppOptions(round_timeout=patient(60.0)))
    print("SUMMARY " + json.dumps(result.summary), flush=True)


if __name__ == "__main__":
    main()
