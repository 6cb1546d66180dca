"""The interface every confidence bound implements (:class:`ConfidenceBound`), and the rewards a client keeps for it.

The machines ask a bound, never by its name, for the widths of the three estimates they eliminate
with and the rule that keeps survivors (:meth:`ConfidenceBound.keep`), the pulls a phase needs, and
the per-node statistics a client reports (:attr:`ConfidenceBound.statistics`), which the server
pools by name. How to add one: docs/extending.md.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

from pfxab_flower.algorithms.schedule import Schedule

if TYPE_CHECKING:
    from pfxab_flower.problems.sampling import Environment

#: A width per node, or one width for every node (a bound whose width does not depend on the node).
Widths = np.ndarray | float
#: What a bound designs the next phase's length from (e.g. Bernstein's ``{"variance": V}``); empty if nothing.
Design = Mapping[str, float]


@dataclass(frozen=True)
class Samples:
    """The rewards a client drew from some nodes, as a bound keeps them: sums, counts and its own extras."""

    sums: np.ndarray
    counts: np.ndarray
    #: what the bound keeps besides (Bernstein: each node's sum of squared deviations); same length as ``sums``
    extra: Mapping[str, np.ndarray] = field(default_factory=dict)

    def take(self, index: np.ndarray) -> Samples:
        """The samples of the nodes at ``index``."""
        return Samples(self.sums[index], self.counts[index], {k: v[index] for k, v in self.extra.items()})

    def put(self, index: np.ndarray, part: Samples) -> Samples:
        """These samples with those of the nodes at ``index`` replaced by ``part``."""
        sums, counts = self.sums.copy(), self.counts.copy()
        sums[index], counts[index] = part.sums, part.counts
        extra = {}
        for key, values in self.extra.items():
            extra[key] = values.copy()
            extra[key][index] = part.extra[key]
        return Samples(sums, counts, extra)


@dataclass(frozen=True)
class ClientView:
    """What a client knows at elimination time about the nodes of its own ``A^m(p)``.

    The statistics are those the run's confidence bound declares (none for Hoeffding);
    its widths are computed from this view (:meth:`ConfidenceBound.local_widths`, ...).
    """

    phase: int
    node_ids: np.ndarray
    local_means: np.ndarray
    local_counts: np.ndarray
    global_means: np.ndarray
    server_eliminated: np.ndarray
    #: the client's own statistics of its nodes (e.g. its sample variances), by name
    own_statistics: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: the server's pooled statistics of its nodes, by name (NaN where nobody reported)
    pooled_statistics: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: how many clients' means each global mean averages (0 where nobody reported); sent with pooled statistics
    holders: np.ndarray | None = None
    #: the fewest pulls any node of ``A(p)`` had from this client in the phase
    min_count: int = 0
    #: the variance of one of the client's rewards around its mean, as it measured it (NaN: not measured;
    #: only a policy that ``estimates_noise`` gets it)
    noise_variance: float = math.nan


class RunView(Protocol):
    """What a bound reads of its run: the skeleton's :class:`~pfxab_flower.algorithms.phased.Settings` is one.

    Declared here, so that the bounds need nothing of the skeleton that uses them.
    """

    @property
    def alpha(self) -> float: ...

    @property
    def horizon(self) -> int: ...

    @property
    def num_clients(self) -> int: ...

    @property
    def reward_span(self) -> float: ...

    @property
    def schedule(self) -> Schedule: ...


def eliminate_with_widths(estimates: np.ndarray, widths: Widths, slack: float) -> np.ndarray:
    """Keep mask of ``drop k if estimate_k + width_k + slack <= max_j (estimate_j - width_j)``.

    Each node's upper bound against the best lower bound. A NaN estimate (a node no valid
    report sampled) is no evidence: it is kept and is not the reference; with no finite
    estimate at all (or no finite lower bound), every node is kept.
    """
    estimates = np.asarray(estimates, dtype=float)
    widths = np.asarray(widths, dtype=float)
    known = np.isfinite(estimates)
    lower = np.where(known, estimates - widths, -np.inf)
    if not known.any() or not np.isfinite(lower.max()):
        return np.ones(estimates.shape, dtype=bool)
    keep: np.ndarray = ~(estimates + widths + slack <= lower.max())
    return keep


class ConfidenceBound(ABC):
    """One confidence bound: its widths, its phase lengths, and what its clients report.

    Bounds are stateless (one instance serves every run); what they need of a run comes
    in a :class:`RunView` (the run's :class:`~pfxab_flower.algorithms.phased.settings.Settings`). The defaults are
    those of a bound that needs only the means: no statistics, no reward range, a fixed
    design, and the per-node elimination rule of :func:`eliminate_with_widths`.
    """

    #: The ``confidence`` option's value that selects this bound.
    name: ClassVar[str]
    #: Per-node statistics a client reports over ``A(p)`` besides its means; the server pools each by name.
    statistics: ClassVar[tuple[str, ...]] = ()
    #: Whether the widths use the rewards' range: then the server sends it to the clients with the parameters.
    uses_reward_range: ClassVar[bool] = False
    #: Whether a phase's widths follow from the settings alone (``nu1 rho^h``), so that what a run can
    #: eliminate is known before it starts (:mod:`pfxab_flower.running.resolution`); not when they come from the data.
    widths_known_in_advance: ClassVar[bool] = True

    # -- phase-length design (server) ----------------------------------------------------
    def first_design(self, settings: RunView) -> Design:
        """What phase 1's length is designed from (nothing has been observed yet)."""
        return {}

    def next_design(self, settings: RunView, design: Design, pooled: Mapping[str, np.ndarray]) -> Design:
        """What the next phase's length is designed from, given this phase's pooled statistics."""
        return design

    @abstractmethod
    def samples(self, settings: RunView, phase: int, design: Design) -> float:
        """``f(p)``: pulls per client per node at which an ``M``-client pooled mean has width ``nu1 rho^h``."""

    def fewest_samples(self, settings: RunView, phase: int) -> float:
        """A lower bound on :meth:`samples` of ``phase`` whatever is observed (bounds the number of rounds)."""
        return self.samples(settings, phase, self.first_design(settings))

    # -- what a client keeps of its rewards and reports ------------------------------------
    def empty(self, size: int) -> Samples:
        """No rewards yet from ``size`` nodes."""
        return Samples(np.zeros(size), np.zeros(size, dtype=np.int64))

    def draw(self, env: Environment, node_ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> Samples:
        """Pull ``node_ids[i]`` ``counts[i]`` times and keep what this bound needs of the rewards."""
        return Samples(env.pull(node_ids, counts, rng), np.asarray(counts, dtype=np.int64).copy())

    def merge(self, first: Samples, second: Samples) -> Samples:
        """Two batches of rewards of the same nodes as one."""
        return Samples(first.sums + second.sums, first.counts + second.counts)

    def client_statistics(self, settings: RunView, samples: Samples) -> dict[str, np.ndarray]:
        """The per-node statistics a client reports (one array per name in :attr:`statistics`)."""
        return {}

    def check_statistic(self, settings: RunView, name: str, values: np.ndarray, counts: np.ndarray) -> str | None:
        """Why a reported statistic (already one finite-typed value per node) cannot be true, or ``None``."""
        return None

    # -- widths ------------------------------------------------------------------------------
    @abstractmethod
    def global_widths(
        self, settings: RunView, phase: int, pooled: Mapping[str, np.ndarray], holders: np.ndarray, min_count: int
    ) -> Widths:
        """Each global mean's width (server side): ``pooled`` statistics (NaN where nobody reported) over
        ``holders`` clients, each of at least ``min_count`` pulls per node."""

    @abstractmethod
    def local_widths(self, settings: RunView, view: ClientView) -> Widths:
        """The width of each of a client's local means over its own nodes."""

    @abstractmethod
    def personalised_widths(self, settings: RunView, view: ClientView) -> Widths:
        """The width of each personalised estimate ``alpha local + (1 - alpha) global`` (PF-XAB)."""

    def keep(self, estimates: np.ndarray, widths: Widths, slack: float) -> np.ndarray:
        """Keep mask of the elimination ``drop k if upper_k + slack <= max_j lower_j`` with these widths."""
        return eliminate_with_widths(estimates, widths, slack)
