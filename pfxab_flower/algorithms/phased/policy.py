"""Where an algorithm departs from the shared skeleton (:class:`Policy`), and what a client decides on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from pfxab_flower.algorithms.bounds import ClientView, Widths
from pfxab_flower.algorithms.phased.settings import Settings
from pfxab_flower.algorithms.phased.state import FIRST_ACTIVE_SET
from pfxab_flower.algorithms.run_spec import SpecT
from pfxab_flower.arms.partition import children, depth_of, parent
from pfxab_flower.parameter import Parameter

if TYPE_CHECKING:
    from pfxab_flower.problems.sampling import Environment


@dataclass(frozen=True)
class RoundEstimates:
    """What a client knows after a phase's global update, over the whole union ``A(p)`` (a proposal policy's input).

    ``own`` marks the client's own nodes of the union; ``holders`` is ``None`` unless the bound pools statistics.
    """

    phase: int
    node_ids: np.ndarray
    local_means: np.ndarray
    local_counts: np.ndarray
    global_means: np.ndarray
    own: np.ndarray
    holders: np.ndarray | None
    dimensions: int  # of the search space (the partition's cells are cut in turn along each)


@dataclass(frozen=True)
class Proposal:
    """A proposal policy's step: the node to exploit now, the next phase's own nodes, the memory to keep, and spares:
    further nodes the client offers after its own, for the server to take in place of a lost proposer's."""

    choice: int
    nodes: np.ndarray
    memory: dict[str, np.ndarray]
    spares: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


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
    #: The algorithm's own keywords (``parameter.Parameter``: default, check, help), beside the common ones.
    #: Their values reach the policy as ``settings.options[name]``.
    parameters: tuple[Parameter, ...] = ()
    #: A baseline whose clients work alone (:class:`~pfxab_flower.algorithms.baselines.solo.SoloPolicy`): the server
    #: runs no phase, only the final exchange, in which each client plays its horizon (:meth:`alone`).
    solo: ClassVar[bool] = False
    #: Whether a phase works at the partition's depth ``h = p`` (its nodes are split as they survive).
    #: A policy over fixed candidates (successive halving) keeps its survivors as they are instead.
    refines_partition: ClassVar[bool] = True
    #: What :meth:`successors` are, for the server's one-line reason when a reply's active set is not among them.
    successor_kind: ClassVar[str] = "children"
    #: Whether ``nu1`` and ``rho`` shape its phases (``pfxab calibrate`` measures them only for such an algorithm).
    smoothness_model: ClassVar[bool] = True
    #: The modules it needs beyond the project's own dependencies, and the optional extra that installs them
    #: (``pip install "pfxab-flower[optuna]"``): without them, choosing it is refused in one line naming the extra.
    requires: ClassVar[tuple[str, ...]] = ()
    extra: ClassVar[str] = ""
    #: Whether the server forms the next union from the clients that completed the round only (their local means
    #: and next set both arrived), so that a silent client's set cannot hold the union open. The paper's
    #: algorithms count every client (a missing one by its superset of children), as the paper does.
    counts_only_completed_rounds: ClassVar[bool] = False
    #: Whether its clients measure their noise from the rounds (:attr:`ClientView.noise_variance`); the paper's
    #: algorithms take their widths from the reward range instead.
    estimates_noise: ClassVar[bool] = False
    #: A proposal policy: after each phase a client proposes new nodes (:meth:`propose`) instead of keeping
    #: some of its own and splitting them (:meth:`keep`, :meth:`successors`).
    proposes: ClassVar[bool] = False

    def phase_line(self, row: Mapping[str, Any]) -> str:
        """The log's line for a completed phase (a row of the server's history), in the algorithm's own words."""
        return (f"phase {row['phase']} (depth {row['depth']}): {row['active_nodes']} active nodes, {row['eliminated']} "
                f"eliminated, {row['phase_length']} pulls per client, {row['communication_rounds']} exchanges so far")

    def smoothness_spec(self, spec: SpecT) -> SpecT:
        """The spec of the phased elimination ``nu1`` and ``rho`` shape (a solo baseline's own run, if it has one)."""
        return spec

    # -- the candidates: where every client starts, what survives a phase, what the server may hear ----------
    def depth(self, settings: Settings, phase: int) -> int:
        """The partition depth of phase ``phase``'s nodes: ``h = p``, the paper's."""
        return phase

    def most_nodes(self, settings: Settings, phase: int) -> int:
        """The most nodes a phase's union can hold: every node of its depth, ``2**p``."""
        return 1 << phase

    def first_active_set(self, settings: Settings) -> np.ndarray:
        """Every client's ``A^m(1)`` (sorted node ids): the root's children, the paper's."""
        return FIRST_ACTIVE_SET.copy()

    def successors(self, kept: np.ndarray) -> np.ndarray:
        """The next phase's active set of a client that kept ``kept`` (sorted): their children.

        It is also the superset the server and a client assume for a phase whose active set was lost."""
        return children(kept)

    def lost(self, active: np.ndarray) -> np.ndarray:
        """The next set both sides assume for a client whose set for the next phase is unknown (its reply was lost,
        or it missed the phase): every successor of ``active``, a superset of whatever it could have kept."""
        return self.successors(active)

    def next_sets(self, settings: Settings, phase: int, replies: list[np.ndarray | None],
                  previous: list[np.ndarray]) -> list[np.ndarray]:
        """Each client's set for phase ``phase + 1`` as the server keeps it, from the usable replies of phase
        ``phase`` (node ids as sent; ``None``: no usable reply) and the sets of phase ``phase``.

        Default: a reply's set, sorted; for a client without one, :meth:`lost`. A proposal policy deals the next
        phase's points among the replies instead
        (:class:`~pfxab_flower.algorithms.surrogate.proposals.ProposalPolicy`)."""
        return [np.sort(new) if new is not None else self.lost(old) for new, old in zip(replies, previous, strict=True)]

    def caught_up_size(self, active_size: int, missed: int) -> int:
        """The size of an active set of ``active_size`` nodes after ``missed`` phases are caught up (:meth:`lost`
        applied ``missed`` times): each doubles it on a refined partition; survivors of fixed candidates stay."""
        return active_size << max(missed, 0) if self.refines_partition else active_size

    def check_next_set(self, settings: Settings, phase: int, client: int, previous: np.ndarray,
                       node_ids: np.ndarray) -> str | None:
        """Why ``node_ids`` cannot be client ``client``'s set for phase ``phase + 1`` when its set of ``phase`` was
        ``previous`` (the server's check of an active-set reply), or ``None``: distinct successors of it."""
        if node_ids.ndim != 1 or node_ids.size == 0 or not np.issubdtype(node_ids.dtype, np.integer):
            return "active set is not a non-empty vector of node ids"
        allowed = self.successors(previous)
        if not np.all(np.isin(node_ids, allowed)) or np.unique(node_ids).size != node_ids.size:
            return (f"active set holds node ids that are not distinct {self.successor_kind} of the client's "
                    "previous set")
        return None

    def own_nodes(self, active: np.ndarray, union: np.ndarray) -> np.ndarray:
        """A client's own nodes of a phase whose union is ``union``: its active set (the union must hold it)."""
        return active

    def predecessors(self, nodes: np.ndarray) -> np.ndarray:
        """The nodes of this phase that ``nodes`` of the next phase descend from (each node's parent)."""
        return parent(nodes)

    def can_finish_on(self, own: np.ndarray, node: int, reported_phase: int) -> bool:
        """Whether a client whose active set the server knows as ``own`` may exploit ``node`` at the end.

        A client exploits the best survivor of the last phase it completed: an ancestor of its
        active set, no shallower than the last phase whose active set it sent (the root only if
        it never sent one)."""
        depth, own_depth = int(depth_of(np.array([node]))[0]), depth_of(own)
        held = np.any((own_depth > depth) & (np.right_shift(own, np.maximum(own_depth - depth, 0)) == node))
        return bool(held) and depth >= reported_phase

    @classmethod
    def check_options(cls, num_clients: int, options: Mapping[str, Any]) -> None:
        """A one-line ``ConfigError`` for own options that do not fit a run of ``num_clients`` clients (each
        option alone is checked by its declaration). Called where a run's values enter (``RunConfig``), so a
        sweep's grid is refused before any work. Default: nothing to check together."""

    def in_play(self, held: np.ndarray, union: np.ndarray) -> np.ndarray:
        """What a client holding ``held`` works on in a phase whose union is ``union`` (both sides compute it).

        Default: all it holds, which lies in the union whenever every client is counted in it."""
        return held

    def kept_problem(self, held: np.ndarray, union: np.ndarray, kept: np.ndarray, explored: bool) -> str | None:
        """Why a client that held ``held`` may not keep ``kept`` after a phase over ``union`` (``explored``: its
        local means were used), beyond being among :meth:`successors`; ``None``: it may. Default: no rule."""
        return None

    def resolve(self, spec: SpecT, dimensions: int | None) -> SpecT:
        """``spec`` with the options this algorithm derives from the run once, where the run is specified
        (``dimensions``: the search space's, ``None`` if unknown there). Default: nothing to derive."""
        return spec

    def max_phases(self, settings: Settings) -> int | None:
        """The most phases the policy runs (``None``: as many as the schedule's budget fits). The server
        starts none beyond it."""
        return None

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        """``(global pulls per node of A(p), local pulls per node of A^m(p))`` for the phase's ``f(p)``."""
        raise NotImplementedError

    def phase_pulls(self, settings: Settings, f: float, union_size: int, own_size: int) -> tuple[int, int]:
        """:meth:`pulls` for a phase whose union ``A(p)`` has ``union_size`` nodes and whose largest own set
        ``A^m(p)`` has ``own_size``: what the server asks. A policy whose split depends on the sets' sizes
        overrides this; the paper's algorithms do not look at them."""
        return self.pulls(settings, f)

    def phase_allowed(self, settings: Settings, phase: int) -> bool:
        """Whether phase ``phase`` may run at all: its depth ``h = p`` within ``max_depth`` and an ``int64`` node id
        (a policy whose phases are not depths says otherwise)."""
        return settings.schedule.depth_allowed(phase)

    def round_pulls(self, settings: Settings, phase: int, f: float, union_size: int,
                    own_size: int) -> tuple[int, int]:
        """:meth:`phase_pulls` for phase ``phase``: what the server asks. A policy whose budget depends on the
        phase's number overrides this; the default is the phase's ``f`` alone."""
        return self.phase_pulls(settings, f, union_size, own_size)

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

    def propose(self, settings: Settings, client: int, memory: Mapping[str, np.ndarray],
                estimates: RoundEstimates) -> Proposal:
        """A proposal policy's step after a phase (:attr:`proposes` policies only): what to exploit, what to propose
        for the next phase, what to remember. Deterministic given its inputs and the run's seed."""
        raise NotImplementedError(f"{self.name} is not a proposal policy")

    def alone(self, settings: Settings, client: int, env: Environment) -> tuple[int, int, int]:
        """A solo client's own search (``solo`` policies only): ``(node to exploit, pulls made, phases it ran)``.

        The skeleton exploits that node for the rest of the horizon.
        """
        raise NotImplementedError(f"{self.name} is not a solo policy")
