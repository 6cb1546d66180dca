"""The 3-D example of docs/flower.md ("Scale, resolution and horizon"): five sites tune three knobs.

``dose`` and ``temp`` are plain, ``rate`` is log-scaled; each site has its own optimum, and its
score (a validation score, say) lies between about 0.6 and 0.9: a range far below the
defaults' ``nu1 = 1``. Run it with ``python docs/examples/three_knobs.py [horizon]``: it prints
what :func:`pfxab_flower.calibrate` proposes, then PF-XAB with the defaults and with the
proposal, side by side.
"""

from __future__ import annotations

import functools
import sys

import numpy as np

from pfxab_flower import Federation, calibrate, run

DOMAIN = {"dose": (0.0, 1.0), "rate": (1e-4, 1e-1, "log"), "temp": (0.0, 1.0)}
SITES = 5


def objective(points: np.ndarray, partition_id: int) -> np.ndarray:
    """Site ``partition_id``'s mean score at an ``(n, 3)`` array of settings."""
    dose, log_rate, temp = points[:, 0], np.log10(points[:, 1]), points[:, 2]
    best_dose, best_log_rate, best_temp = 0.2 + 0.15 * partition_id, -3.5 + 0.5 * partition_id, 0.5
    return (0.9 - 0.3 * (dose - best_dose) ** 2 - 0.1 * (log_rate - best_log_rate) ** 2 / 9
            - 0.3 * (temp - best_temp) ** 2)


def federation() -> Federation:
    """The five sites, observed with uniform noise of scale 0.1 (values declared in [0, 1])."""
    objectives = [functools.partial(objective, partition_id=m) for m in range(SITES)]
    return Federation.from_callables(objectives, DOMAIN, noise_sigma=0.1, value_range=(0.0, 1.0))


def main(horizon: int = 2_000_000) -> None:
    sites = federation()
    calibration = calibrate(sites, horizon=horizon, alpha=0.5)
    print(calibration.report())
    for name, settings in (("defaults", {}), ("calibrated", calibration.settings())):
        result = run(sites, horizon=horizon, alpha=0.5, seed=0, **settings)
        phases = result.phases
        print(f"{name}: regret {result.summary['regret']:,.0f}, {result.summary['phases']} phases, "
              f"active nodes {phases['active_nodes'].tolist()}, eliminated {phases['eliminated'].tolist()}")


if __name__ == "__main__":
    main(int(float(sys.argv[1])) if len(sys.argv) > 1 else 2_000_000)
