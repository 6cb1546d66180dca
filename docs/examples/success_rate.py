"""A 0/1 black box (docs/flower.md, "A success rate per site"): each call is one trial that succeeds or fails.

Three sites tune the same two knobs; at each site a trial at setting ``x`` succeeds with a
probability that is a smooth bump around the site's own best setting (0.2 far from it, 0.8 at
it). The objective returns 1 or 0 per row, so it is ``evaluation="stochastic"`` with
``value_range=(0, 1)``. Run it with ``python docs/examples/success_rate.py [horizon]``: it prints
what :func:`pfxab_flower.calibrate` measures at its default samples (``nu1``, ``rho``, the noise,
the verdict), then PF-XAB with the defaults and with the proposal, scored against the success
probabilities (the ``reference``).
"""

from __future__ import annotations

import sys

import numpy as np

from pfxab_flower import Federation, calibrate, run

DOMAIN = {"dose": (0.0, 1.0), "rate": (0.0, 1.0)}
BEST = np.array([[0.3, 0.4], [0.5, 0.6], [0.7, 0.5]])  # each site's best setting


def success_probability(points: np.ndarray, site: int) -> np.ndarray:
    """Site ``site``'s chance that a trial at each of ``points`` (``(n, 2)``) succeeds: a smooth bump."""
    distance2 = ((points - BEST[site]) ** 2).sum(axis=1)
    return 0.2 + 0.6 * np.exp(-distance2 / (2 * 0.15**2))


def trials(site: int):
    """Site ``site``'s black box: one trial per row, 1.0 on success, 0.0 on failure."""
    rng = np.random.default_rng(2024 + site)  # the site's own luck (a real one is not seeded at all)
    return lambda points: (rng.random(len(points)) < success_probability(points, site)).astype(float)


def federation() -> Federation:
    """The three sites: 0/1 outcomes, scored against their success probabilities."""
    return Federation.from_callables(
        [trials(m) for m in range(len(BEST))], DOMAIN, evaluation="stochastic", value_range=(0.0, 1.0),
        reference=[lambda points, m=m: success_probability(points, m) for m in range(len(BEST))])


def main(horizon: int = 200_000) -> None:
    sites = federation()
    calibration = calibrate(sites, horizon=horizon, alpha=0.5)  # 384 trials per site, and no more
    print(calibration.report())
    for name, settings in (("defaults", {}), ("calibrated", calibration.settings())):
        result = run(sites, horizon=horizon, alpha=0.5, seed=0, **settings)
        phases = result.phases
        print(f"{name}: regret {result.summary['regret']:,.0f}, {result.summary['phases']} phases, "
              f"active nodes {phases['active_nodes'].tolist()}, eliminated {phases['eliminated'].tolist()}, "
              f"success rate {result.summary['mean_observed_reward']:.3f}")


if __name__ == "__main__":
    main(int(float(sys.argv[1])) if len(sys.argv) > 1 else 200_000)
