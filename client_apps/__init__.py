"""Flower clients for PF-XAB, Fed-PNE and PF-PNE: codecs over the core's :class:`~pfxab_flower.session.ClientSession`.

* :func:`objective_client_app`: your own objective as a Message-API ``ClientApp``;
* :func:`message_client_app` / :func:`legacy_client_app`: the ``ClientApp`` of any session
  function (:func:`federation_sessions` for simulated federations, :func:`objective_sessions`).
"""

from pfxab_flower.client_apps.message_app import message_client_app
from pfxab_flower.client_apps.numpy_client import PhasedNumPyClient, legacy_client_app
from pfxab_flower.client_apps.objective import objective_client_app
from pfxab_flower.client_apps.sessions import federation_sessions, objective_sessions

__all__ = [
    "PhasedNumPyClient",
    "federation_sessions",
    "legacy_client_app",
    "message_client_app",
    "objective_client_app",
    "objective_sessions",
]
