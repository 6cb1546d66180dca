"""Where an algorithm departs from the shared skeleton (:class:`Policy`), and what a client decides on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from pfxab_flower.algorithms.bounds import Widths
from pfxab_flower.algorithms.phased.settings import Settings
from pfxab_flower.config import Parameter

if TYPE_CHECKING:
    from pfxab_flower.sampling import Environment


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


class Policy:
    """Where an algorithm departs from the shared skeleton. Subclasses override what differs.

    Eliminations go through the run's bound (``settings.bound``): its widths and its rule
    :meth:`~pfxab_flower.algorithms.bounds.ConfidenceBound.keep`, so a policy holds for every bound.
    """

    #: The CLI name, the wire's ``param-algorithm`` and the registry's key (:mod:`pfxab_flower.algorithms.registry`).
    name = "phased-elimination"
    #: How figures and tables name it; its Flower strategy classes are named after it (``PF-XAB`` -> ``PFXAB``).
    label = "Phased elimination"
    #: One line for ``--help``, the docs and the strategy's docstring.
    description = "phased elimination over a hierarchical partition"
    #: The algorithm's own keywords (``config.Parameter``: default, check, help), beside the common ones.
    #: Their values reach the policy as ``settings.options[name]``.
    parameters: tuple[Parameter, ...] = ()
    #: A baseline whose clients work alone (:class:`~pfxab_flower.algorithms.solo.SoloPolicy`): the server
    #: runs no phase, only the final exchange, in which each client plays its horizon (:meth:`alone`).
    solo: ClassVar[bool] = False

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        """``(global pulls per node of A(p), local pulls per node of A^m(p))`` for the phase's ``f(p)``."""
        raise NotImplementedError

    def phase_pulls(self, settings: Settings, f: float, union_size: int, own_size: int) -> tuple[int, int]:
        """:meth:`pulls` for a phase whose union ``A(p)`` has ``union_size`` nodes and whose largest own set
        ``A^m(p)`` has ``own_size``: what the server asks. A policy whose split depends on the sets' sizes
        overrides this; the paper's algorithms do not look at them."""
        return self.pulls(settings, f)

    def phase_fits(self, settings: Settings, length: int, remaining: int) -> bool:
        """Whether a phase of ``length`` pulls per client starts with ``remaining`` pulls of the horizon left.

        The paper's rule: whenever it fits. A policy may ask more of a phase before it trades
        exploitation for it."""
        return length <= remaining

    def server_eliminated(
        self, settings: Settings, phase: int, pooled_means: np.ndarray, pooled_widths: Widths
    ) -> np.ndarray:
        """Nodes of ``A(p)`` the server drops for everyone (default: none), given the global means' widths."""
        return np.zeros(pooled_means.shape, dtype=bool)

    def score(self, settings: Settings, view: ClientView) -> np.ndarray:
        """The client's estimate of each node's value: it exploits the best one at the end."""
        raise NotImplementedError

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        """Which nodes of ``A^m(p)`` survive the client's elimination."""
        raise NotImplementedError

    def alone(self, settings: Settings, client: int, env: Environment) -> tuple[int, int]:
        """A solo client's own search (``solo`` policies only): ``(node to exploit, pulls made)``.

        The skeleton exploits that node for the rest of the horizon.
        """
        raise NotImplementedError(f"{self.name} is not a solo policy")
