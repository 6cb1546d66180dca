"""A Gaussian process over the unit cube: Matérn-5/2 with one length scale per axis, noise of known relative size.

Each observation ``y_i`` is a personalised estimate of known relative variance ``w_i`` (from its pulls): the
noise is ``s_n^2 w_i`` with ``s_n^2`` learned. scikit-learn's regressor takes a fixed noise per point, not a
learned scale of given weights, hence this small one (derivation and priors: docs/algorithms/pf-smbo.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SQRT5 = math.sqrt(5.0)
#: The Matérn smoothness: 2 nu is 1, 3 or 5.
TWICE_NU = 1
#: Bounds of the log hyperparameters: length scale per axis, signal variance, noise scale (on standardised values).
LOG_LENGTH = (math.log(1e-3), math.log(20.0))
LOG_SIGNAL = (math.log(1e-3), math.log(1e3))
LOG_NOISE = (math.log(1e-8), math.log(1e2))
#: Gamma priors (shape, rate) of a length scale, the signal variance and the noise scale (MAP, not ML-II).
LENGTH_PRIOR, SIGNAL_PRIOR, NOISE_PRIOR = (3.0, 6.0), (2.0, 0.15), (1.1, 0.05)
#: Most iterations of one fit (L-BFGS-B); a fit that starts from the last round's values needs few.
FIT_ITERATIONS = 60
JITTER = 1e-8


def _distances(a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scaled squared differences per axis ``(n, m, d)`` and the scaled distance ``(n, m)``."""
    diff = (a[:, None, :] - b[None, :, :]) / lengths
    squares = diff * diff
    return squares, np.sqrt(squares.sum(axis=2))


def _shape(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Matérn correlation at scaled distance ``r`` and ``-(dk/dr) / r`` (finite at 0)."""
    if TWICE_NU == 1:
        e = np.exp(-r)
        return e, np.divide(e, r, out=np.zeros_like(r), where=r > 0)
    if TWICE_NU == 3:
        s3 = math.sqrt(3.0)
        e = np.exp(-s3 * r)
        return (1.0 + s3 * r) * e, 3.0 * e
    e = np.exp(-SQRT5 * r)
    return (1.0 + SQRT5 * r + 5.0 / 3.0 * r * r) * e, 5.0 / 3.0 * (1.0 + SQRT5 * r) * e


def matern52(a: np.ndarray, b: np.ndarray, lengths: np.ndarray, signal: float) -> np.ndarray:
    """``signal (1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r)`` between the rows of ``a`` and ``b``."""
    _, r = _distances(a, b, lengths)
    kernel: np.ndarray = signal * _shape(r)[0]
    return kernel


def _log_gamma_prior(value: np.ndarray | float, shape: float, rate: float) -> float:
    """Log density of Gamma(shape, rate) at ``value``, up to its constant, and its derivative in ``log value``."""
    return float(np.sum((shape - 1.0) * np.log(value) - rate * np.asarray(value)))


@dataclass(frozen=True)
class Hyper:
    """Log length scales (one per axis), log signal variance, log noise scale: what a fit learns."""

    log_lengths: np.ndarray
    log_signal: float
    log_noise: float

    def vector(self) -> np.ndarray:
        return np.concatenate([self.log_lengths, [self.log_signal, self.log_noise]])

    @classmethod
    def of(cls, vector: np.ndarray) -> Hyper:
        return cls(np.array(vector[:-2], dtype=float), float(vector[-2]), float(vector[-1]))

    @classmethod
    def default(cls, dimensions: int, length: float = 0.2) -> Hyper:
        return cls(np.full(dimensions, math.log(length)), 0.0, math.log(0.1))


def _objective(vector: np.ndarray, x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> tuple[float, np.ndarray]:
    """Negative log posterior of the hyperparameters (marginal likelihood and Gamma priors) and its gradient."""
    from scipy.linalg import cho_solve  # here: scipy costs every command ~0.3 s

    d = x.shape[1]
    lengths, signal, noise = np.exp(vector[:d]), math.exp(vector[d]), math.exp(vector[d + 1])
    squares, r = _distances(x, x, lengths)
    base, slope = _shape(r)
    cov = signal * base + np.diag(noise * weights + JITTER * signal)
    try:
        chol = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        return 1e25, np.zeros_like(vector)
    alpha = cho_solve((chol, True), y)
    value = 0.5 * float(y @ alpha) + float(np.log(np.diag(chol)).sum())
    inverse = cho_solve((chol, True), np.eye(len(y)))
    outer = np.outer(alpha, alpha) - inverse  # d(-value)/dK = outer / 2
    grad = np.empty_like(vector)
    radial = signal * slope  # dK/dlog(length_i) = radial * squares_i
    for i in range(d):
        grad[i] = -0.5 * float(np.sum(outer * radial * squares[:, :, i]))
    grad[d] = -0.5 * float(np.sum(outer * (signal * base)))
    grad[d + 1] = -0.5 * float(np.sum(np.diag(outer) * noise * weights))
    # priors on the values (MAP in log space): -log p and its derivative in log value
    for index, (shape, rate) in ((slice(0, d), LENGTH_PRIOR), (slice(d, d + 1), SIGNAL_PRIOR),
                                 (slice(d + 1, d + 2), NOISE_PRIOR)):
        values = np.exp(vector[index])
        value -= _log_gamma_prior(values, shape, rate)
        grad[index] -= (shape - 1.0) - rate * values
    return value, grad


@dataclass(frozen=True)
class Posterior:
    """A fitted process: what a client predicts and samples from (values in the estimates' own units)."""

    x: np.ndarray
    hyper: Hyper
    offset: float
    scale: float
    chol: np.ndarray
    alpha: np.ndarray
    weights: np.ndarray
    standard: np.ndarray  # the standardised observations

    @property
    def lengths(self) -> np.ndarray:
        lengths: np.ndarray = np.exp(self.hyper.log_lengths)
        return lengths

    @property
    def signal(self) -> float:
        return math.exp(self.hyper.log_signal)

    @property
    def noise(self) -> float:
        return math.exp(self.hyper.log_noise)

    def cross(self, points: np.ndarray) -> np.ndarray:
        return matern52(points, self.x, self.lengths, self.signal)

    def mean(self, points: np.ndarray) -> np.ndarray:
        """Posterior mean at ``points``."""
        standard: np.ndarray = self.cross(points) @ self.alpha
        return self.offset + self.scale * standard

    def variance(self, points: np.ndarray) -> np.ndarray:
        """Posterior variance of the function (not of an observation) at ``points``."""
        from scipy.linalg import solve_triangular  # here: scipy costs every command ~0.3 s

        v = solve_triangular(self.chol, self.cross(points).T, lower=True)
        spread: np.ndarray = np.maximum(self.signal - np.sum(v * v, axis=0), 0.0)
        return self.scale**2 * spread

    def samples(self, points: np.ndarray, count: int, rng: np.random.Generator, features: int) -> np.ndarray:
        """``count`` joint draws of the function at ``points`` (shape ``(count, n)``), by pathwise conditioning.

        A prior draw from ``features`` random Fourier features of the Matérn-5/2 kernel is moved to the
        posterior through the exact kernel (Wilson et al., ICML 2020): ``f + k(., X) K^-1 (y - f(X) - e)``.
        """
        from scipy.linalg import cho_solve  # here: scipy costs every command ~0.3 s

        d = self.x.shape[1]
        # Matérn-5/2's spectral density: a Student t with 5 degrees of freedom over the scaled frequencies
        normal = rng.standard_normal((features, d))
        chi = rng.chisquare(float(TWICE_NU), size=(features, 1))
        freqs = normal * np.sqrt(TWICE_NU / chi) / self.lengths
        phases = rng.uniform(0.0, 2.0 * math.pi, size=features)
        weights = rng.standard_normal((features, count))
        amplitude = math.sqrt(2.0 * self.signal / features)
        prior_at_x = amplitude * np.cos(self.x @ freqs.T + phases) @ weights
        prior_at_points = amplitude * np.cos(points @ freqs.T + phases) @ weights
        observed = self.standard[:, None] - prior_at_x
        observed -= rng.standard_normal(observed.shape) * np.sqrt(self.noise * self.weights)[:, None]
        update = self.cross(points) @ cho_solve((self.chol, True), observed)
        draws: np.ndarray = (prior_at_points + update).T
        return self.offset + self.scale * draws



def fit(x: np.ndarray, y: np.ndarray, weights: np.ndarray, start: Hyper | None = None) -> Posterior:
    """The process of ``y`` at ``x`` (unit cube) with noise ``s_n^2 weights``, hyperparameters by MAP.

    ``start`` (the last round's hyperparameters) is tried beside the default start; the better optimum wins.
    Deterministic given its inputs (run it under one BLAS thread: the caller does).
    """
    from scipy.linalg import cho_solve  # here: scipy costs every command ~0.3 s
    from scipy.optimize import minimize

    x, y, weights = np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(weights, dtype=float)
    d = x.shape[1]
    offset = float(y.mean())
    scale = float(y.std()) or 1.0
    standard = (y - offset) / scale
    bounds = [LOG_LENGTH] * d + [LOG_SIGNAL, LOG_NOISE]
    starts = [Hyper.default(d)] + ([start] if start is not None and start.log_lengths.size == d else [])
    best: tuple[float, np.ndarray] | None = None
    for begin in starts:
        result = minimize(_objective, np.clip(begin.vector(), *np.array(bounds).T), args=(x, standard, weights),
                          jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": FIT_ITERATIONS})
        if best is None or result.fun < best[0]:
            best = (float(result.fun), np.asarray(result.x))
    assert best is not None
    hyper = Hyper.of(best[1])
    lengths, signal, noise = np.exp(hyper.log_lengths), math.exp(hyper.log_signal), math.exp(hyper.log_noise)
    cov = matern52(x, x, lengths, signal)
    cov[np.diag_indices_from(cov)] += noise * weights + JITTER * signal
    chol = np.linalg.cholesky(cov)
    return Posterior(x, hyper, offset, scale, chol, cho_solve((chol, True), standard), weights, standard)
