"""Sites named by the app in simulation: a node's ``site`` label from a list the app is given, by ``partition-id``.

A deployment's SuperNode declares its site itself (``--node-config 'site="lab-a"'``); a simulation's nodes
have only their ``partition-id``, so ``objective_client_app(..., sites=[...])`` (or the run-config key ``sites``,
``"lab-a,lab-b,..."``) names them: the label then reaches the builder (``context.node_config["site"]``), every
reply and every failure line, as a declared one does.
"""

from __future__ import annotations

from collections.abc import Sequence

from flwr.app import Context, Message
from flwr.clientapp.typing import ClientAppCallable, Mod

from pfxab_flower.running.wire import codec

#: The run-config key that names a simulation's sites when the app was given no list: ``"lab-a,lab-b,..."``.
SITES_KEY = "sites"


def named_sites(sites: Sequence[str] | None = None) -> Mod:
    """A mod that gives a node without a ``site`` in its node config the name ``sites[partition-id]``, or, without
    ``sites``, the ``partition-id``-th of the run config's comma-separated ``sites`` key (if it has one)."""
    given = tuple(sites) if sites is not None else None

    def name_site(message: Message, context: Context, call_next: ClientAppCallable) -> Message:
        index = context.node_config.get("partition-id")
        if codec.SITE not in context.node_config and isinstance(index, int) and not isinstance(index, bool):
            listed = context.run_config.get(SITES_KEY)
            names = given if given is not None else tuple(
                name.strip() for name in listed.split(",")) if isinstance(listed, str) and listed.strip() else ()
            if 0 <= index < len(names) and names[index]:
                context.node_config = {**context.node_config, codec.SITE: names[index]}
        return call_next(message, context)

    return name_site
