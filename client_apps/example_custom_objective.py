"""Plug your own objective into the Flower clients: a runnable example.

Four clients each tune two hyper-parameters (a learning rate on a log scale and a
momentum) of their own model; each client's score surface peaks somewhere else.
PF-XAB finds, for every client, a setting that is good for it *and* for the
federation (``alpha`` weighs the two).

Run it (Flower's Ray simulation engine, ~30 s)::

    python -m pfxab_flower.client_apps.example_custom_objective

The same objective in a real deployment: this module's ``app`` is a ``ClientApp``;
start each SuperNode with ``--node-config "partition-id=<m>"`` and point the app's
``clientapp`` at ``pfxab_flower.client_apps.example_custom_objective:app`` (see docs/flower.md).
"""

from __future__ import annotations

import numpy as np
from flwr.client import ClientApp

from pfxab_flower.client_apps.factory import objective_client_fn
from pfxab_flower.config import RunConfig
from pfxab_flower.problems.federation import Federation

#: The search space: name -> (low, high[, scale]).
DOMAIN = {"learning_rate": (1e-4, 1e-1, "log"), "momentum": (0.0, 0.99)}

#: Where each client's own score peaks (log10 learning rate, momentum).
PEAKS = [(-2.0, 0.90), (-2.5, 0.80), (-1.5, 0.95), (-3.0, 0.60)]


def score_of(client: int):
    """Client ``client``'s objective: points ``(n, 2)`` in user units -> ``n`` mean rewards in [0, 1]."""
    peak_lr, peak_momentum = PEAKS[client]

    def score(points: np.ndarray) -> np.ndarray:
        log_lr = np.log10(points[:, 0])
        return np.exp(-((log_lr - peak_lr) ** 2) / 2.0 - (points[:, 1] - peak_momentum) ** 2 / 0.5)

    return score


#: Deployment: the ClientApp of a SuperNode started with --node-config "partition-id=m".
app = ClientApp(client_fn=objective_client_fn(score_of, DOMAIN, per_client=True, noise_sigma=0.05))


def main() -> None:
    """Simulate the four clients on Flower's Ray engine and score them against the true optima."""
    from pfxab_flower.simulations.run_flower import run_flower

    config = RunConfig(clients=len(PEAKS), alpha=0.5, horizon=200_000, seed=0)
    federation = Federation.from_callables([score_of(m) for m in range(len(PEAKS))], DOMAIN, noise_sigma=0.05)
    client_fn = objective_client_fn(score_of, DOMAIN, config, per_client=True, noise_sigma=0.05, send_pull_log=True)
    result = run_flower(federation, config, client_fn=client_fn, round_timeout=120.0)
    print(f"regret {result.summary['regret']:.1f} after {result.summary['phases']} phases")
    for m, (lr, momentum) in enumerate(result.summary["final_points"]):
        print(f"client {m}: learning_rate={lr:.2e} momentum={momentum:.3f}")


if __name__ == "__main__":
    main()
