"""A fourth algorithm, written outside the package: PF-XAB whose clients eliminate with local estimates only.

With the project installed, run it from any directory::

    python docs/examples/custom_algorithm.py

It defines the algorithm (one class), registers it (one line), runs it in this process and
through a Flower simulation on the Message API (3 SuperNodes on Flower's Ray engine, about
15 s), and exits with status 1 unless both give the same final points and regret (0 if they
do). ``docs/extending.md`` walks through it; ``tests/test_custom_algorithm_example.py`` runs it.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np

from pfxab_flower import Federation, register_algorithm, run
from pfxab_flower.algorithms import PFXAB
from pfxab_flower.algorithms.phased import ClientView, Settings


# -- 1. the algorithm: a Policy; it departs from PF-XAB in `keep` only ------------------------------------
class LocalPFXAB(PFXAB):
    """PF-XAB's phases and score, but a client drops a node on its own local means and their widths alone.

    PF-XAB drops node ``k`` when ``alpha local_k + (1 - alpha) global_k`` is clearly below the best
    node's; here only ``local_k`` counts, with the width of a local mean (the ``M alpha f(p)`` local
    pulls behind it). The global means still pick, among the survivors, the node a client exploits.
    """

    name = "pf-xab-local"  # run(algorithm=...), STRATEGIES["pf-xab-local"], the wire's param-algorithm
    label = "PF-XAB-local"  # figures and tables; the strategy class is PFXABlocal
    description = "PF-XAB whose clients eliminate with their local estimates only"

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        bound = settings.bound  # the run's confidence bound: the same code holds for hoeffding and bernstein
        return bound.keep(view.local_means, bound.local_widths(settings, view),
                          slack=settings.schedule.smoothness(view.phase))


# -- 2. its registration: one line (in this process; the ClientApp carries it to Flower's workers) ------
register_algorithm(LocalPFXAB)

# -- 3. a federation and a run -------------------------------------------------------------------------
CLIENTS = 3
RUN = {"alpha": 0.5, "horizon": 100_000, "seed": 0}  # 4 phases: enough for eliminations (PF-XAB's regret differs)


def federation() -> Federation:
    """Three clients whose objectives are tents on [0, 1] peaking at 0.2, 0.5 and 0.7."""
    objectives = [lambda x, c=c: 1.0 - np.abs(x[:, 0] - c) for c in (0.2, 0.5, 0.7)]
    return Federation.from_callables(objectives, {"x": (0.0, 1.0)}, noise_sigma=0.1)


def in_process(fed: Federation) -> dict:
    """The in-process engine's summary of a run of the new algorithm."""
    return run(fed, algorithm=LocalPFXAB.name, **RUN).summary


def on_flower(fed: Federation) -> dict:
    """The same run through Flower: the Message-API strategy in a ServerApp, one ClientApp per simulated node.

    Flower's ``run_simulation`` runs the ServerApp in this process and the ClientApp in Ray's
    workers, which get it by pickling (``LocalPFXAB``, defined in a script, travels by value and is
    registered there before the first message is read). ``ray_environment`` and ``backend_config``
    make the simulation quiet, offline and private: telemetry off, a Ray of its own in a temporary
    directory (whatever ``RAY_ADDRESS`` says), stopped and removed afterwards.
    """
    from flwr.app import Context
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    from pfxab_flower.client_apps import federation_sessions, message_client_app
    from pfxab_flower.simulations.flower.simulation_environment import backend_config, ray_environment
    from pfxab_flower.strategies import STRATEGIES

    summaries: list[dict] = []
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        # round_timeout: generous, nothing here is about late clients (a first reply took over 120 s on a busy machine)
        strategy = STRATEGIES[LocalPFXAB.name](num_clients=CLIENTS, federation=fed, round_timeout=600.0, **RUN)
        strategy.start(grid=grid)
        summaries.append(strategy.run_result().summary)

    client = message_client_app(federation_sessions(fed))  # simulated clients of `fed`, keyed by partition-id
    flwr_logger = logging.getLogger("flwr")
    flwr_logger.setLevel(logging.WARNING)  # Flower logs every round at INFO
    flwr_logger.addFilter(lambda record: "run_simulation" not in record.getMessage())  # its deprecation notice
    with ray_environment() as ray_dir, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # run_simulation's own deprecation notice
        run_simulation(server, client, num_supernodes=CLIENTS, backend_config=backend_config(1.0, ray_dir))
    if not summaries:
        raise SystemExit("custom_algorithm.py: error: the Flower simulation ended without a result (see the log above)")
    return summaries[0]


def main() -> int:
    fed = federation()
    mine, paper = in_process(fed), run(fed, algorithm="pf-xab", **RUN).summary
    flower = on_flower(fed)
    print(f"pf-xab (for reference), in-process: regret {paper['regret']!r}")
    for engine, summary in (("in-process", mine), ("Flower", flower)):
        print(f"{summary['algorithm']}, {engine}: regret {summary['regret']!r}, final points {summary['final_points']}")
    same = (flower["algorithm"] == mine["algorithm"] == LocalPFXAB.name and flower["regret"] == mine["regret"]
            and np.array_equal(flower["final_points"], mine["final_points"]))
    if not same:
        print("custom_algorithm.py: error: the Flower run differs from the in-process one")
        return 1
    print("same final points and regret in-process and on Flower")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
