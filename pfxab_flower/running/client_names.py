"""How the server names a client in its log and records: index, site and Flower node, from what it was told.

The naming half of :class:`~pfxab_flower.running.driver.ServerDriver` (which inherits it): a client is named by
the node that holds it, or, for a node that never sent a usable reply, by what its failure line says
(:func:`~pfxab_flower.errors.read_client_failure`), for the log and the lost-client record only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pfxab_flower.errors import read_client_failure
from pfxab_flower.running.exchanges import Failure
from pfxab_flower.running.trust import NodeBinding


class ClientNames:
    """Names clients from the driver's state (set by :class:`~pfxab_flower.running.driver.ServerDriver`)."""

    binding: NodeBinding
    failed_at: dict[int, tuple[int | None, str | None]]

    if TYPE_CHECKING:  # the driver's (and its outcome's) read-only views
        @property
        def nodes(self) -> Mapping[int, int]: ...

        @property
        def num_clients(self) -> int: ...

        def client_site(self, client: int) -> str | None: ...

    def who(self, client: object, node: int | None = None) -> str:
        """A client as the log names it: its index and, where known, its site label and Flower node."""
        site = None
        if isinstance(client, int) and not isinstance(client, bool):
            node = node if node is not None else self.nodes.get(client, self.failed_at.get(client, (None, None))[0])
            site = self.client_site(client)
        name = f"client {client}" if client is not None else "a client"
        known = ([f"site {site!r}"] if site is not None else []) + ([f"Flower node {node}"] if node is not None else [])
        return name + (f" ({', '.join(known)})" if known else "")

    def _sender(self, client: object, node: int | None) -> str:
        """``", from client 2 (Flower node N)"``, or as much of it as is known."""
        if client is None and node is None:
            return ""
        return ", from " + (self.who(client, node) if client is not None else f"Flower node {node}")

    def _client_of(self, failure: Failure) -> int | None:
        if failure.client is not None:
            return failure.client
        return next((m for m, node in self.nodes.items() if node == failure.node), None)

    def _failed(self, failure: Failure) -> tuple[int | None, str]:
        """Whose failure it is and what failed, in the failure's own words without its ``client N (site S):``.

        A node not yet bound to a client (it never sent a usable reply) is taken at the client and
        site its failure line names (:func:`~pfxab_flower.errors.read_client_failure`), for the log
        and the lost-client record only, unless the node or the client is already another's.
        """
        client, what = self._client_of(failure), failure.reason
        claimed = read_client_failure(failure.reason)
        if claimed is None:
            return client, what
        named, site, said = claimed
        free = failure.node is None or failure.node not in self.binding.held
        if client is None and free and named is not None and 0 <= named < self.num_clients and named not in self.nodes:
            client = named
        if client is not None and named in (client, None):
            what = said
            if client not in self.failed_at or failure.node is not None or site is not None:
                known_node, known_site = self.failed_at.get(client, (None, None))
                self.failed_at[client] = (failure.node or known_node, site or known_site)
        return client, what

