"""Apps that are not ours, against ours, on Flower's Ray simulation engine: ``python -m tests.foreign_apps CASE``.

* ``fedavg``: Flower's ``FedAvg`` (Message API) sends one round to ``objective_client_app`` on 2 nodes;
* ``foreign-client``: our ``PFXAB`` strategy faces a ClientApp that is not ours (it echoes
  the arrays with a ``MetricRecord``, as Flower's example apps reply) on 2 nodes.

Run in a fresh process so that a test sees the whole log, the Ray workers' lines included.
The ServerApp prints ``OUTCOME: ...`` last.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.simulation import run_simulation

from pfxab_flower.client_apps import objective_client_app
from pfxab_flower.errors import RunStoppedError
from pfxab_flower.simulations.flower.simulation_environment import backend_config, ray_environment
from pfxab_flower.strategies import PFXAB
from pfxab_flower.strategies.base import show_phase_log
from tests.patience import patient


def tent(points: np.ndarray, partition_id: int) -> np.ndarray:
    return 1.0 - np.abs(points[:, 0] - 0.2 - 0.1 * partition_id)


def fedavg_server() -> ServerApp:
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        result = FedAvg(fraction_evaluate=1.0).start(grid=grid, initial_arrays=ArrayRecord({"w": Array(np.zeros(3))}),
                                                     num_rounds=1)
        print(f"OUTCOME: FedAvg finished, train metrics {dict(result.train_metrics_clientapp)}", flush=True)

    return app


def echo_client() -> ClientApp:
    """A ClientApp in the style of Flower's examples: it returns the arrays it got and a MetricRecord."""
    app = ClientApp()

    @app.train()
    def train(message: Message, context: Context) -> Message:
        content = RecordDict({"arrays": message.content.array_records["arrays"],
                              "metrics": MetricRecord({"num-examples": 1})})
        return Message(content, reply_to=message)

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        return Message(RecordDict({"metrics": MetricRecord({"num-examples": 1, "loss": 0.5})}), reply_to=message)

    return app


def pfxab_server() -> ServerApp:
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        show_phase_log(sys.stdout)
        try:
            PFXAB(num_clients=2, horizon=20_000, round_timeout=patient(60.0)).start(grid=grid)
        except RunStoppedError as exc:
            print(f"OUTCOME: RunStoppedError: {exc}", flush=True)

    return app


CASES = {
    "fedavg": lambda: (fedavg_server(), objective_client_app(tent, {"x": (0.0, 1.0)})),
    "foreign-client": lambda: (pfxab_server(), echo_client()),
}


def main(case: str) -> None:
    server, client = CASES[case]()
    with ray_environment() as ray_dir, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        run_simulation(server, client, num_supernodes=2, backend_config=backend_config(1.0, ray_dir))


if __name__ == "__main__":
    main(sys.argv[1])
