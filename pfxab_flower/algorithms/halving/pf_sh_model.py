"""PF-SH's model of a run: what ``K`` candidates cost and buy, for a peak whose exponent is not assumed.

The modelled regret of ``K`` candidates for a reservoir exponent ``b``, each round costing the union's
pulls; the count the run screens (the most any exponent asks for) and the exponent a client estimates
from its first round. The derivation: docs/algorithms/pf-sh.md.
"""

from __future__ import annotations

import math
from functools import cache, lru_cache
from typing import TYPE_CHECKING

import numpy as np

from pfxab_flower.algorithms.halving.successive_halving import round_split, rounds

if TYPE_CHECKING:
    from statistics import NormalDist

#: The counts the model chooses among: ``2**(k/8)``, rounded (steps of 9%).
COUNT_GRID = tuple(sorted({round(2 ** (k / 8)) for k in range(8, 8 * 20 + 1)}))
#: The exponents the screen is taken over (:func:`screen_count`): from nearly flat tops to needle-like peaks.
EXPONENTS = tuple(float(b) for b in np.exp(np.linspace(math.log(0.1), math.log(1000.0), 81)))
#: The rank levels ``n / 2**j`` of a first round's estimates the exponent is estimated at (:func:`tail_exponent`).
TAIL_LEVELS = (64, 32, 16, 8)


@cache
def _standard_normal() -> tuple[NormalDist, np.ndarray, np.ndarray]:
    """The standard normal, and its 48-node Gauss-Hermite rule (nodes, weights summing to 1).

    Built on first use: ``statistics`` and ``numpy.polynomial`` would otherwise be imported by every
    start of ``pfxab`` (each algorithm's module is imported to register it), whatever the algorithm.
    """
    from statistics import NormalDist

    nodes, weights = np.polynomial.hermite_e.hermegauss(48)
    return NormalDist(), nodes, weights / weights.sum()


def score_correlation(alpha: float, num_clients: int) -> float:
    """The correlation of two clients' personalised values at a uniform candidate when their own objectives are
    independent with equal spread: ``(2 a s + (M - 2) s^2) / (a^2 + (M - 1) s^2)``, ``a = alpha + s``,
    ``s = (1 - alpha) / M`` (the least the shared global part makes them agree)."""
    M = num_clients
    if M == 1:
        return 1.0
    s = (1.0 - alpha) / M
    a = alpha + s
    return (2 * a * s + (M - 2) * s * s) / (a * a + (M - 1) * s * s)


@lru_cache(maxsize=4096)
def union_share(share: float, alpha: float, num_clients: int) -> float:
    """The share of the candidates in at least one client's top ``share``: the union a round pulls.

    Each client keeps its top ``share``; the clients' values are Gaussian with :func:`score_correlation`
    ``r`` (``X_m = sqrt(r) Z + sqrt(1 - r) E_m``), so the union's share is ``1 - E_Z[Phi((t - sqrt(r) Z) /
    sqrt(1 - r))**M]`` with ``t`` the ``1 - share`` quantile (Gauss-Hermite over ``Z``). It is ``share`` at
    ``alpha = 0`` (every client keeps the same) and grows to ``1 - (1 - share)**M`` as ``alpha`` nears 1.
    """
    if share >= 1.0:
        return 1.0
    r = score_correlation(alpha, num_clients)
    if r >= 1.0 - 1e-12:
        return share
    normal, nodes, weights = _standard_normal()
    t = normal.inv_cdf(1.0 - share)
    below = np.array([normal.cdf((t - math.sqrt(r) * z) / math.sqrt(1.0 - r)) for z in nodes])
    return float(1.0 - (weights * below**num_clients).sum())


def mean_gap(share: float | np.ndarray, exponent: float | np.ndarray) -> np.ndarray:
    """The mean gap of the top ``share`` of the candidates: ``b / (b + 1) share**(1/b)``."""
    b = np.asarray(exponent, dtype=float)
    gap: np.ndarray = b / (b + 1.0) * np.asarray(share, dtype=float) ** (1.0 / b)
    return gap


def best_gap(count: int, exponent: np.ndarray) -> np.ndarray:
    """The expected gap of the best of ``count`` candidates: ``Gamma(K+1) Gamma(1+1/b) / Gamma(K+1+1/b)``."""
    from scipy.special import gammaln  # here: scipy costs ~0.2 s to import, only pf-sh's count needs it

    b = np.asarray(exponent, dtype=float)
    gap: np.ndarray = np.exp(gammaln(count + 1) + gammaln(1 + 1 / b) - gammaln(count + 1 + 1 / b))
    return gap


#: What one round charges: ``(pulls, the share of the candidates they fall on)``.
Charge = tuple[int, float]


@lru_cache(maxsize=65536)
def round_plan(count: int, horizon: int, alpha: float, num_clients: int) -> tuple[tuple[Charge, ...], int, float]:
    """What :func:`modelled_regret` charges ``count`` candidates, whatever the exponent: the rounds that fit as
    ``(pulls, share of the candidates they fall on)`` pairs, the pulls they take, and the share of the candidates
    the client exploits among (``1 / K`` once every round ran: the best; else the survivors of the last round).

    Round ``r`` keeps the top ``q = 2**-(r-1)`` of the candidates per client; it pulls the union (its share
    :func:`union_share`) ``g`` times and its own ``l`` more, as :func:`round_split` asks for successive halving's
    budget of ``K`` pulls. A round starts only if it fits.
    """
    parts: list[Charge] = []
    used, kept = 0, 1.0
    for r in range(1, rounds(count) + 1):
        share = 2.0 ** -(r - 1)
        own = max(1, math.ceil(count * share))
        union = max(own, round(count * union_share(share, alpha, num_clients)))
        g, loc = round_split(alpha, num_clients, own * 2 ** (r - 1), union, own)
        if used + union * g + own * loc > horizon:
            return tuple(parts), used, kept
        parts += [(union * g, union / count), (own * loc, own / count)]
        used += union * g + own * loc
        kept = share / 2
    return tuple(parts), used, 1.0 / count


def modelled_regret(count: int, horizon: int, exponent: float | np.ndarray, alpha: float,
                    num_clients: int) -> np.ndarray:
    """One client's regret, in units of its objective's span, of ``count`` candidates for exponent(s) ``b``.

    Each pull of a round costs the mean gap of what it falls on (:func:`mean_gap`, :func:`round_plan`); the
    rest of the horizon exploits the best candidate (:func:`best_gap`) if every round ran, else a survivor of
    the last one (the mean gap of their share). Noise and halving errors are left out.
    """
    parts, used, kept = round_plan(count, horizon, alpha, num_clients)
    b = np.asarray(exponent, dtype=float)
    cost = sum((pulls * mean_gap(share, b) for pulls, share in parts if pulls), np.zeros(b.shape))
    exploit = best_gap(count, b) if kept * count <= 1.0 else mean_gap(kept, b)
    regret: np.ndarray = cost + (horizon - used) * exploit
    return regret


def _counts(horizon: int, most: int) -> list[int]:
    return [c for c in COUNT_GRID if c <= min(horizon, most)] or [max(1, min(2, horizon, most))]


def best_count(horizon: int, exponent: float, alpha: float, num_clients: int, most: int) -> int:
    """The count of :data:`COUNT_GRID` (at most ``most`` and ``T``) with the least :func:`modelled_regret`."""
    counts = _counts(horizon, most)
    return min(counts, key=lambda c: float(modelled_regret(c, horizon, exponent, alpha, num_clients)))


@lru_cache(maxsize=256)
def screen_count(horizon: int, alpha: float, num_clients: int, most: int) -> int:
    """The candidates a run draws: the most :func:`best_count` asks for over every exponent of :data:`EXPONENTS`.

    No exponent is assumed: whatever the peak, the first round screens at least as many candidates as the
    model wants for it, and each client keeps fewer if its first round says so (:func:`tail_exponent`).
    """
    counts = _counts(horizon, most)
    b = np.array(EXPONENTS)
    table = np.stack([modelled_regret(c, horizon, b, alpha, num_clients) for c in counts])  # (count, exponent)
    return int(max(counts[int(i)] for i in np.argmin(table, axis=0)))


def tail_exponent(values: np.ndarray) -> float | None:
    """The reservoir exponent ``b`` the top of ``values`` shows (Pickands' estimator), or ``None`` if too few.

    If the ``i``-th best of ``n`` is ``v* - e (i / n)**(1/b)``, the spacings of ranks ``k, 2k, 4k`` have the
    ratio ``(y(2k) - y(4k)) / (y(k) - y(2k)) = 2**(1/b)``, whatever ``v*`` and ``e``; the estimate is the
    median of ``1/b`` over ``k = n/64, n/32, n/16, n/8`` (those with ``k >= 2`` and both spacings positive),
    kept within ``b`` in [0.1, 1000] (:data:`EXPONENTS`' range).
    """
    y = np.sort(np.asarray(values, dtype=float))[::-1]
    n = y.size
    inverse = []
    for level in TAIL_LEVELS:
        k = n // level
        if k < 2:
            continue
        near, far = y[k - 1] - y[2 * k - 1], y[2 * k - 1] - y[4 * k - 1]
        if near > 0 and far > 0:
            inverse.append(min(max(math.log2(far / near), 1e-3), 10.0))
    return 1.0 / float(np.median(inverse)) if inverse else None
