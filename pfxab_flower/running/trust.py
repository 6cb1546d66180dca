"""What the server believes of a reply: which node may speak for a client, and which pull logs it can score.

:class:`NodeBinding` binds each client to the Flower node its first undisputed reply came from;
:func:`pull_log_problem` and :func:`pull_log_rewritten` refuse a pull log that is not a client's
possible history. Engines without nodes pass ``None``. Threats and tests: docs/reliability.md.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from pfxab_flower.arms.partition import MAX_DEPTH


def _client_index(claimed: object, num_clients: int) -> int | None:
    """The claimed client as an index of the run, or ``None`` (the reply checks refuse the rest)."""
    if isinstance(claimed, bool) or not isinstance(claimed, int | np.integer) or not 0 <= claimed < num_clients:
        return None
    return int(claimed)


class NodeBinding:
    """Which Flower node holds which client index: bound at the client's first undisputed reply, then fixed."""

    def __init__(self, num_clients: int) -> None:
        self.num_clients = num_clients
        self.holder: dict[int, int] = {}  # client -> the node that speaks for it
        self.held: dict[int, int] = {}  # node -> the client it speaks for

    def screen(self, claims: Sequence[tuple[object, int | None]]) -> list[str | None]:
        """For each ``(claimed client, sending node)`` of one exchange, why it is refused, or ``None``.

        Binds the clients first claimed in this exchange by exactly one node that holds no
        other client. Claims without a node (engines without nodes) or of a client that is
        not an index of the run (the reply checks refuse those) are left alone.
        """
        claimants: dict[int, set[int]] = defaultdict(set)  # unbound client -> nodes claiming it now
        claimed_by: dict[int, set[int]] = defaultdict(set)  # node -> unbound clients it claims now
        for claimed, node in claims:
            client = _client_index(claimed, self.num_clients)
            if client is not None and node is not None and client not in self.holder and node not in self.held:
                claimants[client].add(node)
                claimed_by[node].add(client)
        reasons: list[str | None] = []
        for claimed, node in claims:
            client = _client_index(claimed, self.num_clients)
            reasons.append(None if client is None or node is None else self._judge(client, node, claimants,
                                                                                  claimed_by))
        for client, nodes in claimants.items():
            (node,) = nodes if len(nodes) == 1 else (None,)
            if node is not None and len(claimed_by[node]) == 1:
                self.holder[client], self.held[node] = node, client
        return reasons

    def _judge(self, client: int, node: int, claimants: Mapping[int, set[int]],
               claimed_by: Mapping[int, set[int]]) -> str | None:
        holder = self.holder.get(client)
        if holder is not None and holder != node:
            return (f"the reply for client {client} came from Flower node {node}, but client {client} is held by "
                    f"Flower node {holder}")
        held = self.held.get(node)
        if held is not None and held != client:
            return f"Flower node {node} holds client {held} and cannot reply for client {client}"
        if holder is None and len(claimants[client]) > 1:
            nodes = ", ".join(str(n) for n in sorted(claimants[client]))
            return (f"client {client} was claimed by Flower nodes {nodes} in one exchange; the server cannot tell "
                    "which is the client and uses neither")
        if holder is None and len(claimed_by[node]) > 1:
            return f"Flower node {node} claimed several clients in one exchange"
        return None

    def node_of(self, client: int) -> int | None:
        """The node that holds ``client``, if one does."""
        return self.holder.get(client)


def pull_log_problem(harness: Mapping[str, np.ndarray], horizon: int, final: bool) -> str | None:
    """Why a reply's pull log cannot be a client's history (``None`` if it can, or if a phase's reply carries none).

    A log is its segments' node ids (each a node of the partition) and counts (each
    positive), of at most ``horizon`` pulls in all; the final exchange's log holds exactly
    ``horizon`` pulls, since every client pulls until the horizon.
    """
    if "pull-nodes" not in harness and "pull-counts" not in harness:
        return "the final reply carries no pull log" if final else None  # the last one is what is scored
    nodes = np.asarray(harness.get("pull-nodes", np.zeros(0)))
    counts = np.asarray(harness.get("pull-counts", np.zeros(0)))
    if nodes.ndim != 1 or counts.shape != nodes.shape or not all(
            np.issubdtype(a.dtype, np.integer) for a in (nodes, counts)):
        return f"pull log has {nodes.size} node ids and {counts.size} counts, expected as many integers of each"
    if nodes.size and (nodes.min() < 1 or nodes.max() >= 2**MAX_DEPTH):
        return "pull log holds node ids that are not nodes of the partition"
    if counts.size and (counts.min() < 1 or counts.max() > horizon):
        return f"pull log holds counts outside [1, {horizon}]"
    # summed in floating point first: a sum of int64 counts could overflow and wrap below the horizon
    rough = float(counts.sum(dtype=np.float64))
    total = int(counts.sum()) if rough <= horizon + 0.5 else None
    if total is None or total > horizon or (final and total != horizon):
        expected = f"the horizon {horizon}" if final else f"at most the horizon {horizon}"
        return f"pull log holds {total if total is not None else f'{rough:.6g}'} pulls, expected {expected}"
    return None


def pull_log_rewritten(harness: Mapping[str, np.ndarray], earlier: Mapping[str, np.ndarray] | None) -> str | None:
    """Why a client's new pull log does not continue the one it sent before (``None`` if it does).

    A client's history only grows: its log is the earlier one with pulls appended (the
    earlier last segment may go on at the same node). A log that rewrote the past lost
    the client's history: a SuperNode restarted without its ``state-dir`` catches up as a
    client that missed every earlier phase, and the pulls it made before would go
    unscored. Call it on logs :func:`pull_log_problem` accepted.
    """
    if earlier is None or "pull-counts" not in earlier or "pull-counts" not in harness:
        return None
    old_nodes, old_counts = np.asarray(earlier["pull-nodes"]), np.asarray(earlier["pull-counts"])
    nodes, counts = np.asarray(harness["pull-nodes"]), np.asarray(harness["pull-counts"])
    k = old_nodes.size
    if k == 0:
        return None
    continues = (nodes.size >= k and np.array_equal(nodes[:k], old_nodes)
                 and np.array_equal(counts[:k - 1], old_counts[:-1]) and counts[k - 1] >= old_counts[-1])
    if continues:
        return None
    return (f"pull log of {int(counts.sum())} pulls does not continue the client's earlier one of "
            f"{int(old_counts.sum())} (its history was lost: a node that restarted without its state)")


__all__ = ["NodeBinding", "pull_log_problem", "pull_log_rewritten"]
