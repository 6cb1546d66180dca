"""What a client accepts of a server's message: every value bounded by the run the message describes, before any work.

A phase within the schedule, node ids of that phase's depth, arrays of the union's size and no more
pulls than the horizon leaves; anything else is one :class:`ProtocolError` line and nothing is pulled.
The attacks this stops: docs/reliability.md (issue 37, point 6).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pfxab_flower.algorithms.phased.policy import Policy
from pfxab_flower.algorithms.phased.settings import Settings
from pfxab_flower.algorithms.phased.state import ProtocolError
from pfxab_flower.arms.partition import depth_of


def max_phases(settings: Settings, policy: Policy) -> int:
    """An upper bound on the phases of the run (the server's Flower rounds are one more): none for a solo policy."""
    if policy.solo:  # its clients work alone: the final exchange is the only one
        return 0
    own = policy.max_phases(settings)  # a policy's own count (successive halving's rounds) is a hard limit
    if own is not None:
        return own
    return settings.bounded_phases


def check_phase(settings: Settings, policy: Policy, phase: int, *, final: bool = False) -> None:
    """``phase`` (a final message's: its completed phases) is one the run can have."""
    low, high = (0 if final else 1), max_phases(settings, policy)
    if not low <= phase <= high:
        what = "completed phases" if final else "phase"
        raise ProtocolError(f"{what} {phase} is not one this run can have: [{low}, {high}] for horizon="
                            f"{settings.horizon}, num_clients={settings.num_clients}, "
                            f"algorithm={settings.spec.algorithm}")


def check_nodes(settings: Settings, policy: Policy, node_ids: np.ndarray, phase: int) -> None:
    """The union ``A(p)`` of phase ``phase``: distinct node ids of the policy's depth for it, in increasing order,
    no more than the policy can hold then."""
    ids = np.asarray(node_ids)
    if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
        raise ProtocolError(f"the node ids of phase {phase} are not a non-empty vector of integers")
    depth = policy.depth(settings, phase)
    if (ids.size > policy.most_nodes(settings, phase) or ids.min() < 1 or np.any(depth_of(ids) != depth)
            or np.any(np.diff(ids) <= 0)):
        raise ProtocolError(f"the node ids of phase {phase} are not distinct nodes of depth {depth} in order")


def caught_up_size(policy: Policy, active_size: int, missed: int) -> int:
    """The size of an active set of ``active_size`` nodes after ``missed`` phases are caught up
    (:meth:`~pfxab_flower.algorithms.phased.Policy.caught_up_size`)."""
    return policy.caught_up_size(active_size, missed)


def check_catch_up(policy: Policy, active_size: int, completed: int, phase: int, room: int) -> None:
    """Catching up from ``completed`` to just before ``phase`` grows the active set (:func:`caught_up_size`): the
    result must fit in ``room`` nodes (the union it must lie in), so the growth is never done when it would not.
    Fixed candidates do not grow: a client works on its share of the union (:meth:`Policy.in_play`)."""
    if not policy.refines_partition:
        return
    grown = caught_up_size(policy, active_size, phase - 1 - completed)
    if grown > room:
        raise ProtocolError(f"phase {phase} after {completed} would hold {grown} nodes, more than "
                            f"the {room} of its union")


def check_pulls(settings: Settings, pulls_made: int, what: str, pulls: int) -> None:
    """``pulls`` more pulls (Python ints: no overflow) fit in what the horizon leaves after ``pulls_made``."""
    left = settings.horizon - pulls_made
    if not 0 <= pulls <= left:
        raise ProtocolError(f"{what} asks {pulls} pulls, but horizon={settings.horizon} leaves {left}")


def check_sizes(arrays: Mapping[str, np.ndarray | None], size: int, phase: int) -> None:
    """Every array of a global update has one value per node of the union."""
    for name, values in arrays.items():
        if values is not None and np.shape(values) != (size,):
            raise ProtocolError(f"the global update of phase {phase} has {name} of shape {np.shape(values)}, "
                                f"expected ({size},)")
