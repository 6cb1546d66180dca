"""Flower apps and experiment drivers built on the core (``ServerApp``/``ClientApp``, Ray simulation, sweeps)."""
