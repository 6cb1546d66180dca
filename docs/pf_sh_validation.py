"""``pf-sh`` against random search on smooth federations written for issue 46, not the practice map's.

Run ``python docs/pf_sh_validation.py`` (about 5 minutes on 2 cores). Four federations of our own, none of
them a map problem: the issue's (3-D, 4 sites, one Gaussian bump each), a 2-D one (6 sites, three bumps
each), a 4-D one (8 sites, one anisotropic bump each) and a non-smooth 2-D check (5 sites, square-root
cusps). Each at T = 1e5 and 1e6, alpha 0.1, 0.5, 0.9, uniform noise sigma 0.1 and 1.0, seeds 0-2: the
ratio of pf-sh's mean regret to random search's, and pf-sh's count. Prints a Markdown table
(docs/algorithms/pf-sh.md, "Checked on federations of our own").
"""

from __future__ import annotations

import itertools
import logging
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the clone's code: the numbers of its docs
if not Path(sys.path[0], "pfxab_flower", "__init__.py").is_file():
    print(f"{Path(__file__).name}: error: {sys.path[0]} is not a clone of pfxab-flower; allowed: run this script from "
          "the docs/ folder of a clone (it is not installed with the package)", file=sys.stderr)
    raise SystemExit(2)

import numpy as np

from pfxab_flower import Federation, run

SEEDS = (0, 1, 2)


def bumps(centres: np.ndarray, widths: np.ndarray, heights: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``sum_j h_j exp(-|(x - c_j) / w_j|^2 / 2)`` (per-axis widths) at points ``x`` of shape ``(n, d)``."""
    z = ((x[:, None, :] - centres[None]) / widths[None]) ** 2
    values: np.ndarray = (heights[None] * np.exp(-0.5 * z.sum(axis=2))).sum(axis=1)
    return values


def cusp(centre: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``1 - sqrt(|x - c|_inf)``: a square-root cusp at ``c``."""
    values: np.ndarray = 1.0 - np.sqrt(np.abs(x - centre).max(axis=1))
    return values


def federation(objectives: list, d: int, sigma: float) -> Federation:
    return Federation.from_callables(objectives, {f"x{i + 1}": (0.0, 1.0) for i in range(d)}, noise_sigma=sigma,
                                     value_range=(0.0, 1.0))


def issue_3d(sigma: float) -> Federation:
    """The issue's: 4 sites, one Gaussian bump each (width 0.15, height 1), centres uniform in [0.2, 0.8]^3."""
    rng = np.random.default_rng(3)
    return federation([partial(bumps, rng.uniform(0.2, 0.8, (1, 3)), np.full((1, 3), 0.15), np.ones(1))
                       for _ in range(4)], 3, sigma)


def mix_2d(sigma: float) -> Federation:
    """6 sites, each three bumps (heights 0.5, 0.3, 0.2; widths 0.2, 0.1, 0.05) near three shared centres."""
    rng = np.random.default_rng(2)
    shared = rng.uniform(0.15, 0.85, (3, 2))
    widths, heights = np.array([[0.2] * 2, [0.1] * 2, [0.05] * 2]), np.array([0.5, 0.3, 0.2])
    return federation([partial(bumps, np.clip(shared + rng.normal(0, 0.06, (3, 2)), 0, 1), widths, heights)
                       for _ in range(6)], 2, sigma)


def aniso_4d(sigma: float) -> Federation:
    """8 sites, one anisotropic bump each (widths per axis in [0.1, 0.4]), centres near a shared one."""
    rng = np.random.default_rng(4)
    shared = rng.uniform(0.3, 0.7, 4)
    objectives = []
    for _ in range(8):
        centre = np.clip(shared + rng.normal(0, 0.1, 4), 0, 1)[None]
        objectives.append(partial(bumps, centre, rng.uniform(0.1, 0.4, (1, 4)), np.ones(1)))
    return federation(objectives, 4, sigma)


def cusp_2d(sigma: float) -> Federation:
    """5 sites, each a square-root cusp, centres near a shared one: the non-smooth check."""
    rng = np.random.default_rng(5)
    shared = rng.uniform(0.3, 0.7, 2)
    return federation([partial(cusp, np.clip(shared + rng.normal(0, 0.1, 2), 0, 1)) for _ in range(5)], 2, sigma)


FEDERATIONS = {"issue 3-D, 4 sites": issue_3d, "2-D, 6 sites": mix_2d, "4-D, 8 sites": aniso_4d,
               "cusps 2-D, 5 sites": cusp_2d}


def main() -> None:
    logging.disable(logging.WARNING)
    print("| federation | T | noise sigma | alpha 0.1 | alpha 0.5 | alpha 0.9 | pf-sh's count |")
    print("|---|---|---|---|---|---|---|")
    for (name, build), horizon, sigma in itertools.product(FEDERATIONS.items(), (10**5, 10**6), (0.1, 1.0)):
        fed, cells, counts = build(sigma), [], set()
        for alpha in (0.1, 0.5, 0.9):
            regret = {algorithm: [] for algorithm in ("pf-sh", "random-search")}
            for seed, algorithm in itertools.product(SEEDS, regret):
                result = run(fed, algorithm, alpha=alpha, horizon=horizon, seed=seed)
                regret[algorithm].append(result.summary["regret"])
                counts.add(result.summary.get("candidates"))
            cells.append(f"{np.mean(regret['pf-sh']) / np.mean(regret['random-search']):.2f}")
        count = ", ".join(f"{c:,}" for c in sorted(c for c in counts if c is not None))
        print(f"| {name} | {horizon:.0e} | {sigma:g} | {' | '.join(cells)} | {count} |")


if __name__ == "__main__":
    main()
