"""The ``ClientApp`` of ``flwr run .``: client ``partition-id`` of the run config's built-in problem.

It answers on the Flower API the run config's ``api`` key names (``message`` or ``legacy``).
"""

from __future__ import annotations

from pfxab_flower.client_apps.factory import federation_client_fn
from pfxab_flower.simulations.apps import run_config_client_app

app = run_config_client_app(federation_client_fn())
