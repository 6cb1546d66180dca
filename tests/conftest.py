"""Shared fixtures: small federations and a quiet, reproducible environment."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import pytest

from pfxab_flower.problems.federation import Federation

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def tent_federation(centres: list[float], noise_sigma: float = 0.1) -> Federation:
    """Clients with ``mu_m(x) = 1 - |x - c_m|`` on [0, 1]: optima known in closed form."""
    objectives = [lambda x, c=c: 1.0 - np.abs(x[:, 0] - c) for c in centres]
    return Federation.from_callables(objectives, {"x": (0.0, 1.0)}, noise_sigma=noise_sigma, name="tent")


@pytest.fixture
def tent() -> Federation:
    return tent_federation([0.2, 0.5, 0.7])


@pytest.fixture(autouse=True)
def _restore_pfxab_logger():
    """Flower runs make the ``pfxab_flower`` phase log visible; undo it after each test."""
    logger = logging.getLogger("pfxab_flower")
    handlers, level = list(logger.handlers), logger.level
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)


def cli_error_line(*args: str) -> str:
    """Run ``pfxab ARGS`` in a fresh process; check it fails the documented way and return its one line.

    The documented way: exit status 2, nothing on stdout, exactly one line on stderr, no traceback.
    """
    proc = subprocess.run(
        [sys.executable, "-m", "pfxab_flower.simulations.cli", *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]
