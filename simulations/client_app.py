"""The ``ClientApp`` of ``flwr run`` / ``pfxab simulate``: node ``partition-id`` of the run config's built-in problem.

It answers on the Flower API the run config's ``api`` key names (``message`` or ``legacy``).
"""

from __future__ import annotations

from pfxab_flower.simulations.flower.app_builders import client_app

app = client_app()
