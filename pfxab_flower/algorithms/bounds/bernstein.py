"""Empirical-Bernstein widths: the ``confidence = "bernstein"`` option of every algorithm.

The width is the smaller of the empirical-Bernstein and the Hoeffding bounds, each at confidence
``delta / 2`` with the paper's ``delta = 2 T^-4``; it uses the observed variance that clients report
per node. The pure functions here are shared by :class:`Bernstein` and ``tests/test_bernstein.py``;
the derivation is in docs/algorithms/index.md.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from pfxab_flower.algorithms.bounds.base import ClientView, ConfidenceBound, Design, RunView, Samples

if TYPE_CHECKING:
    from pfxab_flower.problems.sampling import Environment

#: The statistic a client reports per node: its sample variance.
VARIANCE = "variance"
#: What a client keeps besides the sums: each node's sum of squared deviations from its own mean.
DEVIATIONS = "deviations"


def log_term(horizon: int) -> float:
    """Bernstein's ``L = log(3 / (delta / 2))`` with the paper's ``delta = 2 T^-4``: ``log 3 + 4 log T``."""
    return math.log(3.0) + 4.0 * math.log(horizon)


def hoeffding_log_term(horizon: int) -> float:
    """Hoeffding's ``log(2 / (delta / 2))`` with the paper's ``delta = 2 T^-4``: ``log 2 + 4 log T``."""
    return math.log(2.0) + 4.0 * math.log(horizon)


def hoeffding_width(spread: np.ndarray | float, span: float, log_4_delta: float) -> np.ndarray:
    """Hoeffding's width ``b sqrt(log(4 / delta) s / 2)`` of a weighted sum of rewards with ``s = sum w_i^2``.

    For a mean of ``n`` pulls ``s = 1 / n``; ``inf`` where ``s`` is (no evidence).
    """
    spread = np.asarray(spread, dtype=float)
    with np.errstate(invalid="ignore"):
        value = span * np.sqrt(log_4_delta * spread / 2.0)
    return np.where(np.isfinite(spread), value, np.inf)


def mean_spread(counts: np.ndarray | float) -> np.ndarray:
    """``sum w^2 = 1 / n`` of a mean of ``n`` pulls (``inf`` where there is none)."""
    with np.errstate(divide="ignore"):
        spread: np.ndarray = 1.0 / np.asarray(counts, dtype=float)
    return spread


def hoeffding_samples(target: float, span: float, log_4_delta: float) -> float:
    """The (real) ``n`` whose :func:`hoeffding_width` ``b sqrt(log(4 / delta) / (2 n))`` is ``target``."""
    denominator = 2.0 * target * target  # 0 where the target's square underflows: no finite n reaches it
    return span * span * log_4_delta / denominator if denominator > 0 else math.inf


def width(variance: np.ndarray | float, count: np.ndarray | float, span: float, log_3_delta: float) -> np.ndarray:
    """``sqrt(2 V L / n) + 3 b L / n`` element-wise; ``inf`` where ``n = 0`` (no evidence)."""
    variance = np.maximum(np.asarray(variance, dtype=float), 0.0)
    count = np.asarray(count, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.sqrt(2.0 * variance * log_3_delta / count) + 3.0 * span * log_3_delta / count
    return np.where(count > 0, value, np.inf)


def samples_for(target: float, variance: float, span: float, log_3_delta: float) -> float:
    """The smallest (real) ``n`` whose :func:`width` is ``target``.

    With ``u = 1 / sqrt(n)`` the width is ``3 b L u^2 + sqrt(2 V L) u``, so ``u`` is the
    positive root of that quadratic set equal to ``target``.
    """
    a, k = 3.0 * span * log_3_delta, math.sqrt(2.0 * max(variance, 0.0) * log_3_delta)
    if a == 0.0:  # span 0: every reward equal, the width is 0 from one sample on
        return 1.0
    u = (-k + math.sqrt(k * k + 4.0 * a * target)) / (2.0 * a)
    if u <= 0.0:  # 4 a target vanished next to k^2 (a tiny target): the same root, without the cancellation
        u = 2.0 * target / (k + math.sqrt(k * k + 4.0 * a * target))
    return 1.0 / (u * u) if u * u > 1.0 / sys.float_info.max else math.inf


def round_up(value: float, digits: int = 2) -> float:
    """``value`` rounded up to ``digits`` significant digits (0 stays 0).

    The next phase's length is designed for the largest pooled variance, rounded up: a
    little conservative. Through SecAgg+ the pooled variances are off by up to a quantisation
    step (about 1e-5), so a variance that close to a rounding boundary can round to the next
    value there and not in the clear: a phase about 1% longer or shorter.
    """
    if value <= 0 or not math.isfinite(value):
        return max(value, 0.0)
    scale = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return math.ceil(value / scale) * scale


def max_variance(span: float) -> float:
    """The largest variance a reward in a range of span ``b`` can have: ``b^2 / 4``."""
    return span * span / 4.0


def sample_variances(deviations: np.ndarray, counts: np.ndarray, span: float) -> np.ndarray:
    """Unbiased sample variances ``SS / (n - 1)``; ``b^2 / 4`` where one sample gives none; 0 where none was drawn."""
    deviations = np.asarray(deviations, dtype=float)
    counts = np.asarray(counts)
    with np.errstate(divide="ignore", invalid="ignore"):
        variances = np.where(counts >= 2, deviations / np.maximum(counts - 1, 1), 0.0)
    return np.where(counts == 1, max_variance(span), variances)


def variance_limit(counts: np.ndarray, span: float) -> np.ndarray:
    """The largest sample variance ``n`` rewards in a range of span ``b`` can have: ``b^2 n / (4 (n - 1))``."""
    counts = np.asarray(counts, dtype=float)
    return np.where(counts >= 2, max_variance(span) * counts / np.maximum(counts - 1.0, 1.0), max_variance(span))


Pair = tuple[np.ndarray, np.ndarray]


def global_widths(
    pooled_variances: np.ndarray, holders: np.ndarray, min_count: int, span: float, log_3_delta: float
) -> np.ndarray:
    """Width of each node's global mean (the mean of ``H`` clients' local means, each of ``>= min_count`` pulls).

    The global mean is a weighted sum of independent rewards, each with weight at most
    ``1 / (H min_count)`` and variance estimated by the clients' pooled sample variance,
    so Bernstein's inequality gives the width of ``H min_count`` pulls (see the docs).
    """
    holders = np.asarray(holders, dtype=float)
    variances = np.where(np.isfinite(pooled_variances), pooled_variances, max_variance(span))
    return width(variances, holders * min_count, span, log_3_delta)


def personalised_widths(
    alpha: float, pooled_variances: np.ndarray, holders: np.ndarray, own_counts: np.ndarray, min_count: int,
    span: float, log_3_delta: float,
) -> np.ndarray:
    """Width of each node's personalised estimate ``alpha L_m + (1 - alpha) G`` for client ``m``.

    ``G`` averages the ``H`` holders' local means, ``L_m`` among them, so the estimate
    is a weighted sum of independent rewards: each of the client's own ``n_m`` pulls
    has weight ``a / n_m`` with ``a = alpha + (1 - alpha) / H``, each other holder's
    pull ``c / n_j`` with ``c = (1 - alpha) / H`` and ``n_j >= min_count``. Bernstein's
    inequality for that sum, with the pooled variance ``V`` for every pull, gives::

        sqrt(2 L V (a^2 / n_m + c^2 (H - 1) / min_count)) + 3 b L max(a / n_m, c / min_count)

    With PF-XAB's pulls (``n_m = (1 - alpha) f + M alpha f``, others ``(1 - alpha) f``,
    ``H = M``) every weight is ``1 / (M f)``: the width of ``M f`` pooled pulls, the
    width the phase length is designed for. A node no other client sampled (``H = 0``)
    has only its local estimate: its width is ``inf`` here (the caller falls back).
    Hoeffding's width of the same sum is ``b sqrt(log(4 / delta) sum w^2 / 2)``
    (:func:`personalised_weights`, :func:`hoeffding_width`).
    """
    spread, largest = personalised_weights(alpha, holders, own_counts, min_count)
    variances = np.where(np.isfinite(pooled_variances), pooled_variances, max_variance(span))
    variances = np.maximum(variances, 0.0)
    with np.errstate(invalid="ignore"):
        value = np.sqrt(2.0 * log_3_delta * variances * spread) + 3.0 * span * log_3_delta * largest
    return np.where(np.isfinite(spread), value, np.inf)


def personalised_weights(alpha: float, holders: np.ndarray, own_counts: np.ndarray, min_count: int) -> Pair:
    """``sum w_i^2`` and ``max w_i`` of the personalised estimate's weights (see :func:`personalised_widths`).

    Both are ``inf`` where the estimate does not exist (no holder, or no pull of the client's own).
    """
    holders = np.asarray(holders, dtype=float)
    own = np.asarray(own_counts, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(holders > 0, (1.0 - alpha) / holders, 0.0)
        own_weight = alpha + share
        others = np.maximum(holders - 1.0, 0.0)
        spread = own_weight**2 / own + share**2 * others / min_count
        largest = np.maximum(own_weight / own, np.where(others > 0, share / min_count, 0.0))
    exists = (holders > 0) & (own > 0)
    return np.where(exists, spread, np.inf), np.where(exists, largest, np.inf)


def smaller_width(bernstein_width: np.ndarray, spread: np.ndarray | float, span: float, horizon: int) -> np.ndarray:
    """The width a run uses: the smaller of a Bernstein width (at ``delta / 2``) and Hoeffding's (at ``delta / 2``)
    for the same estimate, whose weights have ``sum w^2 = spread``."""
    value: np.ndarray = np.minimum(bernstein_width, hoeffding_width(spread, span, hoeffding_log_term(horizon)))
    return value


def combine_samples(sums: Pair, deviations: Pair, counts: Pair) -> Pair:
    """Sum and sum of squared deviations of two batches of pulls of the same nodes (Chan et al.'s update)."""
    (s1, s2), (d1, d2), (n1, n2) = sums, deviations, counts
    n1, n2 = np.asarray(n1, dtype=float), np.asarray(n2, dtype=float)
    n = n1 + n2
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.where((n1 > 0) & (n2 > 0), s1 / np.maximum(n1, 1) - s2 / np.maximum(n2, 1), 0.0)
        cross = np.where(n > 0, n1 * n2 / np.maximum(n, 1) * gap * gap, 0.0)
    return s1 + s2, d1 + d2 + cross


class Bernstein(ConfidenceBound):
    """Empirical-Bernstein widths from the variance the clients observe; phase lengths designed from it."""

    name = "bernstein"
    widths_known_in_advance = False
    statistics = (VARIANCE,)
    uses_reward_range = True

    # -- phase-length design ------------------------------------------------------------------
    def first_design(self, settings: RunView) -> Design:
        """Phase 1 is designed for the largest variance the reward range allows."""
        return {VARIANCE: max_variance(settings.reward_span)}

    def next_design(self, settings: RunView, design: Design, pooled: Mapping[str, np.ndarray]) -> Design:
        """The largest pooled variance seen, rounded up (:func:`round_up`); kept if nothing was pooled."""
        variances = pooled[VARIANCE]
        known = np.isfinite(variances)
        if not known.any():
            return design
        largest = round_up(float(variances[known].max()))
        return {VARIANCE: min(largest, max_variance(settings.reward_span))}

    def samples(self, settings: RunView, phase: int, design: Design) -> float:
        """Samples per client per node at which an ``M``-client pooled mean's width, the smaller of Bernstein's
        for rewards of the design's variance and Hoeffding's, is ``nu1 rho^h``."""
        target, span, horizon = settings.schedule.smoothness(phase), settings.reward_span, settings.horizon
        pooled = min(samples_for(target, design[VARIANCE], span, log_term(horizon)),
                     hoeffding_samples(target, span, hoeffding_log_term(horizon)))
        return pooled / settings.num_clients

    def fewest_samples(self, settings: RunView, phase: int) -> float:
        """No phase is shorter than for noiseless rewards."""
        return self.samples(settings, phase, {VARIANCE: 0.0})

    # -- what a client keeps and reports -----------------------------------------------------
    def empty(self, size: int) -> Samples:
        return Samples(np.zeros(size), np.zeros(size, dtype=np.int64), {DEVIATIONS: np.zeros(size)})

    def draw(self, env: Environment, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> Samples:
        counts = np.asarray(counts, dtype=np.int64).copy()
        sums, deviations = env.pull_with_deviations(node_ids, counts.copy(), rng)
        return Samples(sums, counts, {DEVIATIONS: deviations})

    def merge(self, first: Samples, second: Samples) -> Samples:
        sums, deviations = combine_samples((first.sums, second.sums),
                                           (first.extra[DEVIATIONS], second.extra[DEVIATIONS]),
                                           (first.counts, second.counts))
        return Samples(sums, first.counts + second.counts, {DEVIATIONS: deviations})

    def client_statistics(self, settings: RunView, samples: Samples) -> dict[str, np.ndarray]:
        return {VARIANCE: sample_variances(samples.extra[DEVIATIONS], samples.counts, settings.reward_span)}

    def check_statistic(self, settings: RunView, name: str, values: np.ndarray, counts: np.ndarray) -> str | None:
        """A sample variance of ``n`` rewards of span ``b`` is in ``[0, b^2 n / (4 (n - 1))]``."""
        sampled = counts > 0
        limit = variance_limit(counts, settings.reward_span) * (1.0 + 1e-9)
        if not np.all(np.isfinite(values[sampled])) or np.any(((values < 0) | (values > limit))[sampled]):
            return "variances are not in [0, b^2 n / (4 (n - 1))] for the reward range's span b"
        return None

    # -- widths: the smaller of Bernstein's and Hoeffding's, each at delta / 2 -----------------
    def global_widths(
        self, settings: RunView, phase: int, pooled: Mapping[str, np.ndarray], holders: np.ndarray, min_count: int
    ) -> np.ndarray:
        """:func:`global_widths` of the pooled variances, or Hoeffding's for ``H min_count`` pulls if smaller."""
        span, horizon = settings.reward_span, settings.horizon
        bernstein = global_widths(pooled[VARIANCE], holders, min_count, span, log_term(horizon))
        return smaller_width(bernstein, mean_spread(np.asarray(holders, dtype=float) * min_count), span, horizon)

    def local_widths(self, settings: RunView, view: ClientView) -> np.ndarray:
        """:func:`width` of the client's own sample variances and pulls, or Hoeffding's if smaller."""
        span, horizon = settings.reward_span, settings.horizon
        bernstein = width(view.own_statistics[VARIANCE], view.local_counts, span, log_term(horizon))
        return smaller_width(bernstein, mean_spread(view.local_counts), span, horizon)

    def personalised_widths(self, settings: RunView, view: ClientView) -> np.ndarray:
        """:func:`personalised_widths`, or Hoeffding's for the same weights if smaller; a node no other client
        reported has only its local estimate and width."""
        assert view.holders is not None  # a bound with statistics gets holder counts with the global means
        span, horizon = settings.reward_span, settings.horizon
        bernstein = personalised_widths(settings.alpha, view.pooled_statistics[VARIANCE], view.holders,
                                        view.local_counts, view.min_count, span, log_term(horizon))
        spread, _ = personalised_weights(settings.alpha, view.holders, view.local_counts, view.min_count)
        personalised = smaller_width(bernstein, spread, span, horizon)
        return np.where(np.isfinite(personalised), personalised, self.local_widths(settings, view))
