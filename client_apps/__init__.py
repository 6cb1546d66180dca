"""Flower NumPy clients for PF-XAB, Fed-PNE and PF-PNE: one adapter over the core's ``ClientMachine``."""

from pfxab_flower.client_apps.client import FedPNEClient, PFPNEClient, PFXABClient, PhasedClient
from pfxab_flower.client_apps.factory import federation_client_fn, make_client_fn, objective_client_fn

__all__ = [
    "FedPNEClient",
    "PFPNEClient",
    "PFXABClient",
    "PhasedClient",
    "federation_client_fn",
    "make_client_fn",
    "objective_client_fn",
]
