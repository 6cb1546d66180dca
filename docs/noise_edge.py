"""Where random search beats ``pf-sh``, and per-site TPE beats ``pf-smbo``, and the noise's edge behind both.

Run ``python docs/noise_edge.py`` (about a minute on 2 cores) or ``python docs/noise_edge.py --small-budget``
(about 15 minutes; the ``optuna`` extra). Random search and per-site TPE recommend the point of their highest
*single* reward. The maps' noise is uniform on ``[-sigma, sigma]`` (the spec's default: bounded, as the paper
assumes), and with a hard upper edge a single reward above ``mu* + sigma - e`` can only come from a point within
``e`` of the best value: the highest of many single rewards is then a far better pick than its noise's variance
suggests. The same runs with Gaussian noise of the same variance (``sigma / sqrt 3``) show what the rule is worth
without an edge. Seeds 0-2, ``M = 10``; the problems are the maps' own:

- default: ``pf-sh`` against random search at ``alpha = 0.9`` (where the practice map's losses to random search
  are), ``T = 1e4, 1e5, 1e6``, on ``bumps``, ``bumps-2d`` (the smooth family), ``garland`` and ``doublesine``;
- ``--small-budget``: ``pf-smbo`` against ``optuna-tpe`` and ``optuna-tpe-fed`` at ``T = 200``, alpha 0.1, 0.5,
  0.9, on ``garland-shifted`` and ``doublesine-shifted-2d``.

Prints a Markdown table (docs/algorithms/pf-sh.md, section "Random search and the noise's edge";
docs/algorithms/pf-smbo.md, paragraph "Per-site TPE's final point and the noise's edge").
"""

from __future__ import annotations

import argparse
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

from pfxab_flower import ConfigError, RunConfig, run_config

SEEDS = (0, 1, 2)
SIGMAS = (0.1, 1.0)
#: Each uniform noise beside the Gaussian noise of the same variance (uniform on [-s, s] has variance s^2 / 3).
NOISES = (("uniform", 1.0), ("gaussian", 1.0 / math.sqrt(3.0)))
#: The practice map's losing settings: (problems, horizons, alphas, algorithms, the reference last).
PRACTICE = (("bumps", "bumps-2d", "garland", "doublesine"), (10_000, 100_000, 1_000_000), (0.9,),
            ("pf-sh", "random-search"))
SMALL_BUDGET = (("garland-shifted", "doublesine-shifted-2d"), (200,), (0.1, 0.5, 0.9),
                ("pf-smbo", "optuna-tpe-fed", "optuna-tpe"))


def seed_configs(problem: str, algorithm: str, horizon: int, alpha: float, noise: str, sigma: float
                 ) -> list[RunConfig]:
    """One setting's runs, one a seed of :data:`SEEDS`: building them checks them (an Optuna baseline needs its
    extra), so every setting's are built before the table starts."""
    return [RunConfig(problem=problem, algorithm=algorithm, num_clients=10, alpha=alpha, horizon=horizon, noise=noise,
                      noise_sigma=sigma, seed=seed) for seed in SEEDS]


def mean_of(configs: list[RunConfig]) -> tuple[float, float]:
    """Mean cumulative and mean simple regret over the runs."""
    runs = [run_config(config).summary for config in configs]
    return float(np.mean([r["regret"] for r in runs])), float(np.mean([r["simple_regret"] for r in runs]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=Path(__file__).name, description=__doc__.splitlines()[0])
    parser.add_argument("--small-budget", action="store_true", help="pf-smbo against the two Optuna baselines")
    args = parser.parse_args(argv)
    problems, horizons, alphas, algorithms = SMALL_BUDGET if args.small_budget else PRACTICE
    settings = []  # (the table's setting, each algorithm's runs), all built before the first row
    for problem, horizon, alpha, sigma, (noise, scale) in itertools.product(problems, horizons, alphas, SIGMAS, NOISES):
        runs = [seed_configs(problem, name, horizon, alpha, noise, sigma * scale) for name in algorithms]
        settings.append(((problem, horizon, alpha, sigma, noise), runs))
    first, reference = algorithms[0], algorithms[-1]
    print("| problem | T | alpha | uniform sigma | noise | "
          + " | ".join(f"{name}: regret (simple)" for name in algorithms)
          + f" | {first} / {reference}, regret | simple |")
    print("|---" * (len(algorithms) + 7) + "|")
    for done, ((problem, horizon, alpha, sigma, noise), runs) in enumerate(settings, start=1):
        means = [mean_of(configs) for configs in runs]
        noise_text = "uniform" if noise == "uniform" else "Gaussian, same variance"
        cells = " | ".join(f"{regret:,.0f} ({simple:.4f})" for regret, simple in means)
        print(f"| {problem} | {horizon:.0e} | {alpha:g} | {sigma:g} | {noise_text} | {cells} | "
              f"{means[0][0] / means[-1][0]:.2f} | {means[0][1] / means[-1][1]:.2f} |", flush=True)
        print(f"{done}/{len(settings)} settings", file=sys.stderr, flush=True)


if __name__ == "__main__":
    try:
        main()
    except ConfigError as exc:  # e.g. --small-budget without the optuna extra: one line, before any table
        print(f"{Path(__file__).name}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
