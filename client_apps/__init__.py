"""Flower clients for every registered algorithm: codecs over the core's client session,
:class:`~pfxab_flower.running.client_session.ClientSession`.

:func:`objective_client_app` makes your own objective a Message-API ``ClientApp`` (or each node
builds it from its ``Context``: :func:`from_context`); :func:`message_client_app` and
:func:`legacy_client_app` make the ``ClientApp`` of any session function.
"""

from pfxab_flower.client_apps.message_app import message_client_app
from pfxab_flower.client_apps.numpy_client import PhasedNumPyClient, legacy_client_app
from pfxab_flower.client_apps.objective import objective_client_app
from pfxab_flower.client_apps.sessions import FromContext, federation_sessions, from_context, objective_sessions

__all__ = [
    "FromContext",
    "PhasedNumPyClient",
    "federation_sessions",
    "from_context",
    "legacy_client_app",
    "message_client_app",
    "objective_client_app",
    "objective_sessions",
]
