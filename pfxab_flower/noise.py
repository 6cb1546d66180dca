"""Noise models, and exact draws of the sum of ``n`` noisy pulls of one point.

The algorithms only ever use the *sum* of the rewards of a node's pulls in a
phase, so a node pulled ``n`` times is one draw of that sum:

* ``uniform``: reward ``mu + U[-sigma, sigma]``. The sum of ``n`` uniforms has no
  cheap exact sampler, so the ``n`` uniforms are drawn (vectorised, in bounded
  chunks) and added: exact, O(n) time, O(1) Python steps per node.
* ``gaussian``: reward ``mu + N(0, sigma^2)``; the sum is ``N(n mu, n sigma^2)``,
  drawn exactly in O(1).
* ``bernoulli``: the reward is Bernoulli(``mu``); the sum is Binomial(``n, mu``),
  drawn exactly in O(1). Needs ``mu`` in ``[0, 1]``.
* ``none``: the reward is ``mu`` itself (``sigma`` is ignored): a deterministic
  black box, like a training run scored on a fixed validation set. A client then
  evaluates each point once and reuses the value (see
  :class:`~pfxab_flower.sampling.SimulatedEnvironment`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pfxab_flower.errors import ObjectiveError

NOISE_KINDS = ("uniform", "gaussian", "bernoulli", "none")

# Largest block of uniforms drawn at once: bounds memory at 32 MiB per block.
_CHUNK = 1 << 22


@dataclass(frozen=True)
class NoiseModel:
    """Zero-mean reward noise (or Bernoulli rewards) with scale ``sigma``."""

    kind: str = "uniform"
    sigma: float = 0.1

    def __post_init__(self) -> None:
        from pfxab_flower.config import check  # the one check of every parameter; config imports NOISE_KINDS

        check("noise", self.kind)
        object.__setattr__(self, "sigma", check("noise_sigma", self.sigma))

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
        sums = counts * means
        if self.sigma == 0 or self.deterministic:
            return sums
        if self.kind == "gaussian":
            return sums + self.sigma * np.sqrt(counts) * rng.standard_normal(means.shape)
        return sums + self.sigma * (2.0 * _uniform_sums(counts, rng) - counts)


def _uniform_sums(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Sum of ``counts[i]`` draws of U[0, 1] for every ``i``, drawn in order, in bounded blocks.

    The sum of ``n`` draws of ``U[-s, s]`` is then ``s * (2 * sum(U[0, 1]) - n)``.
    """
    totals = np.zeros(counts.shape)
    if counts.sum() <= _CHUNK:  # the common case: one draw for every node, split by reduceat
        nonzero = np.flatnonzero(counts > 0)
        if nonzero.size:
            draws = rng.random(int(counts.sum()))
            starts = np.concatenate([[0], np.cumsum(counts[nonzero])[:-1]])
            totals[nonzero] = np.add.reduceat(draws, starts)
        return totals
    for i, n in enumerate(counts.tolist()):
        while n > 0:
            block = min(n, _CHUNK)
            totals[i] += rng.random(block).sum()
            n -= block
    return totals
