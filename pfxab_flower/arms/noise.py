"""Noise models, and exact draws of the sum of ``n`` noisy pulls of one point.

The algorithms only use the sum of a node's rewards in a phase, so ``n`` pulls are one draw:
``gaussian`` and ``bernoulli`` sums are drawn exactly in O(1), ``uniform`` ones by adding the ``n``
draws in chunks, and ``none`` returns the mean itself (a deterministic black box).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pfxab_flower.errors import ObjectiveError
from pfxab_flower.parameter import Parameter, between, check_against, choice

#: Reward noise models (a run's ``noise``).
NOISE_KINDS = ("uniform", "gaussian", "bernoulli", "none")
NOISE = choice("noise", "uniform", "noise model", NOISE_KINDS)
NOISE_SIGMA = Parameter("noise_sigma", float, 0.1, "a number >= 0", "noise scale sigma >= 0", between(0, math.inf))

# Largest block of uniforms drawn at once: bounds memory at 32 MiB per block.
_CHUNK = 1 << 22


@dataclass(frozen=True)
class NoiseModel:
    """Zero-mean reward noise (or Bernoulli rewards) with scale ``sigma``."""

    kind: str = "uniform"
    sigma: float = 0.1

    def __post_init__(self) -> None:
        check_against(NOISE, self.kind)
        object.__setattr__(self, "sigma", check_against(NOISE_SIGMA, self.sigma))

    def reward_range(self, values: tuple[float, float]) -> tuple[float, float]:
        """Where a reward (so a local mean) can lie for objective values in ``values``.

        Gaussian noise is unbounded: a mean leaves ``8 sigma`` with probability below 1e-15.
        """
        low, high = values
        if self.kind == "bernoulli":
            return 0.0, 1.0
        margin = {"uniform": self.sigma, "gaussian": 8.0 * self.sigma}.get(self.kind, 0.0)
        return low - margin, high + margin

    @property
    def deterministic(self) -> bool:
        """Whether a pull's reward is exactly the objective's value (so one evaluation per point suffices)."""
        return self.kind == "none"

    def sample_sums(self, means: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Sum of ``counts[i]`` noisy rewards at true mean ``means[i]``, for every ``i``."""
        means = np.asarray(means, dtype=float)
        counts = np.asarray(counts, dtype=np.int64)
        if self.kind == "bernoulli":
            if means.size and (means.min() < 0 or means.max() > 1):
                raise ObjectiveError("bernoulli noise needs objective values in [0, 1]")
            return rng.binomial(counts, means).astype(float)
        sums: np.ndarray = counts * means
        if self.sigma == 0 or self.deterministic:
            return sums
        if self.kind == "gaussian":
            noisy: np.ndarray = sums + self.sigma * np.sqrt(counts) * rng.standard_normal(means.shape)
        else:
            noisy = sums + self.sigma * (2.0 * _uniform_sums(counts, rng)[0] - counts)
        return noisy

    def sample_sums_and_deviations(
        self, means: np.ndarray, counts: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Sums of ``counts[i]`` noisy rewards and their sums of squared deviations from their own mean.

        What the empirical-Bernstein width needs (``confidence = "bernstein"``), drawn
        exactly: uniform from the very draws; gaussian as ``sigma^2 chi^2_(n-1)``
        (independent of the sum, Cochran's theorem); bernoulli as ``k - k^2 / n`` for
        ``k`` successes; ``none`` (or ``sigma = 0``) as 0.
        """
        means = np.asarray(means, dtype=float)
        counts = np.asarray(counts, dtype=np.int64)
        if self.kind == "bernoulli":
            sums = self.sample_sums(means, counts, rng)
            with np.errstate(divide="ignore", invalid="ignore"):
                return sums, np.where(counts > 0, sums - sums * sums / np.maximum(counts, 1), 0.0)
        if self.sigma == 0 or self.deterministic:
            return counts * means, np.zeros(means.shape)
        if self.kind == "gaussian":
            sums = self.sample_sums(means, counts, rng)
            degrees = np.maximum(counts - 1, 1)
            return sums, np.where(counts >= 2, self.sigma**2 * rng.chisquare(degrees), 0.0)
        uniform_sums, uniform_squares = _uniform_sums(counts, rng, squares=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            spread = np.where(counts > 0, uniform_squares - uniform_sums**2 / np.maximum(counts, 1), 0.0)
        # a reward is mu + sigma (2 u - 1): its deviations are 2 sigma times those of u
        sums = counts * means + self.sigma * (2.0 * uniform_sums - counts)
        return sums, 4.0 * self.sigma**2 * np.maximum(spread, 0.0)


def _uniform_sums(counts: np.ndarray, rng: np.random.Generator, squares: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Sum (and with ``squares`` the sum of squares) of ``counts[i]`` draws of U[0, 1] for every ``i``.

    Drawn in order, in bounded blocks; the same draws whether or not squares are asked
    for. The sum of ``n`` draws of ``U[-s, s]`` is then ``s * (2 * sum(U[0, 1]) - n)``.
    """
    totals, squared = np.zeros(counts.shape), np.zeros(counts.shape)
    if counts.sum() <= _CHUNK:  # the common case: one draw for every node, split by reduceat
        nonzero = np.flatnonzero(counts > 0)
        if nonzero.size:
            draws = rng.random(int(counts.sum()))
            starts = np.concatenate([[0], np.cumsum(counts[nonzero])[:-1]])
            totals[nonzero] = np.add.reduceat(draws, starts)
            if squares:
                squared[nonzero] = np.add.reduceat(draws * draws, starts)
        return totals, squared
    for i, n in enumerate(counts.tolist()):
        while n > 0:
            block = min(n, _CHUNK)
            draws = rng.random(block)
            totals[i] += draws.sum()
            if squares:
                squared[i] += (draws * draws).sum()
            n -= block
    return totals, squared
