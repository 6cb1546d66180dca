"""Flower strategies for PF-XAB, Fed-PNE and PF-PNE: one adapter over the core's ``ServerMachine``."""

from pfxab_flower.strategies.strategy import (
    STRATEGIES,
    FedPNEStrategy,
    PFPNEStrategy,
    PFXABStrategy,
    PhasedStrategy,
    strategy_for,
)

__all__ = ["STRATEGIES", "FedPNEStrategy", "PFPNEStrategy", "PFXABStrategy", "PhasedStrategy", "strategy_for"]
