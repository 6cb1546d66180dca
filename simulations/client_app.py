"""The ``ClientApp`` of ``flwr run .``: client ``partition-id`` of the run config's built-in problem."""

from __future__ import annotations

from flwr.client import ClientApp

from client_apps.factory import federation_client_fn

app = ClientApp(client_fn=federation_client_fn())
