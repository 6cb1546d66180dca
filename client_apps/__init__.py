"""Flower clients for PF-XAB, Fed-PNE and PF-PNE: codecs over the core's :class:`~pfxab_flower.session.ClientSession`.

* :func:`objective_client_app`: your own objective as a Message-API ``ClientApp`` (built per node
  from its ``Context`` with :func:`from_context`);
* :func:`message_client_app` / :func:`legacy_client_app`: the ``ClientApp`` of any session
  function (:func:`federation_sessions` for simulated federations, :func:`objective_sessions`).
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
