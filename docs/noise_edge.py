"""Where random search beats ``pf-sh`` on the practice map at alpha 0.9, and the noise's edge behind it.

Run ``python docs/noise_edge.py`` (about a minute on 2 cores). Random search recommends the point of its highest
*single* reward. The map's noise is uniform on ``[-sigma, sigma]`` (the spec's default: bounded, as the paper
assumes), and with a hard upper edge a single reward above ``mu* + sigma - e`` can only come from a point within
``e`` of the best value: the highest of many single rewards is then a far better pick than its noise's variance
suggests. The same runs with Gaussian noise of the same variance (``sigma / sqrt 3``) show what the rule is worth
without an edge. The problems are the map's own (``bumps``, ``bumps-2d``: the smooth family; ``garland``,
``doublesine``: cusps), at ``alpha = 0.9`` (where the map's losses to random search are), ``M = 10``,
``T = 1e4, 1e5, 1e6``, seeds 0-2. Prints a Markdown table (docs/algorithms/pf-sh.md, "Random search and the
noise's edge").
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the clone's code: the numbers of its docs
if not Path(sys.path[0], "pfxab_flower", "__init__.py").is_file():
    print(f"{Path(__file__).name}: error: {sys.path[0]} is not a clone of pfxab-flower; allowed: run this script from "
          "the docs/ folder of a clone (it is not installed with the package)", file=sys.stderr)
    raise SystemExit(2)

import numpy as np

from pfxab_flower import RunConfig, run_config

SEEDS = (0, 1, 2)
PROBLEMS = ("bumps", "bumps-2d", "garland", "doublesine")
HORIZONS = (10_000, 100_000, 1_000_000)
SIGMAS = (0.1, 1.0)
#: Each uniform noise beside the Gaussian noise of the same variance (uniform on [-s, s] has variance s^2 / 3).
NOISES = (("uniform", 1.0), ("gaussian", 1.0 / math.sqrt(3.0)))


def mean_of(problem: str, algorithm: str, horizon: int, noise: str, sigma: float) -> tuple[float, float]:
    """Mean cumulative and mean simple regret over :data:`SEEDS`."""
    runs = [run_config(RunConfig(problem=problem, algorithm=algorithm, num_clients=10, alpha=0.9, horizon=horizon,
                                 noise=noise, noise_sigma=sigma, seed=seed)).summary for seed in SEEDS]
    return float(np.mean([r["regret"] for r in runs])), float(np.mean([r["simple_regret"] for r in runs]))


def main() -> None:
    print("| problem | T | uniform sigma | noise | random search: regret (simple) | pf-sh: regret (simple) "
          "| pf-sh / random search |")
    print("|---|---|---|---|---|---|---|")
    settings = list(itertools.product(PROBLEMS, HORIZONS, SIGMAS, NOISES))
    for done, (problem, horizon, sigma, (noise, scale)) in enumerate(settings, start=1):
        searched = mean_of(problem, "random-search", horizon, noise, sigma * scale)
        halved = mean_of(problem, "pf-sh", horizon, noise, sigma * scale)
        noise_text = "uniform" if noise == "uniform" else "Gaussian, same variance"
        print(f"| {problem} | {horizon:.0e} | {sigma:g} | {noise_text} | {searched[0]:,.0f} ({searched[1]:.4f}) | "
              f"{halved[0]:,.0f} ({halved[1]:.4f}) | {halved[0] / searched[0]:.2f} |", flush=True)
        print(f"{done}/{len(settings)} settings", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
