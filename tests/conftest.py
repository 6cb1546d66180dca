"""Shared fixtures: small federations, landmine-format data, a quiet environment, and loopback only.

The suite runs inside a network namespace that has only loopback (``tests/loopback_namespace.py``):
``pytest`` re-executes itself inside one at start-up when it is not already in one. Where
none can be made (or ``PFXAB_NETNS=off``), the tests that start Ray or Flower's servers
(markers ``ray`` and ``loopback``) are skipped with the reason, and the rest runs.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from pfxab_flower.problems.federation import Federation
from tests import loopback_namespace
from tests.landmine_files import LandmineFile, write_landmine_format_file
from tests.patience import patient, slowdown

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

#: ``pfxab`` in a fresh process.
PFXAB = (sys.executable, "-m", "pfxab_flower.simulations.cli")


#: Why the tests that start Ray or Flower's servers cannot run in this session (``None``: they can).
_NO_LOOPBACK_NAMESPACE = pytest.StashKey[str | None]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Move the session into a loopback-only network namespace, before anything else is configured.

    Only a session started from the command line is re-executed (its arguments are this
    process's own); one started by ``pytest.main(other args)`` inside another program is
    not, and runs its Ray tests only if it already is in such a namespace.
    """
    if tuple(config.invocation_params.args) == tuple(sys.argv[1:]):
        reason = loopback_namespace.enter([sys.executable, *sys.orig_argv[1:]], "pytest",
                                          before_exec=lambda: _release_captured_output(config))
    else:
        reason = loopback_namespace.loopback_only_reason()
    config.stash[_NO_LOOPBACK_NAMESPACE] = reason


def _release_captured_output(config: pytest.Config) -> None:
    """Give the real stdout/stderr back: pytest captures them while conftests load, and exec keeps fds as they are."""
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.stop_global_capturing()


def pytest_report_header(config: pytest.Config) -> str:
    reason = config.stash.get(_NO_LOOPBACK_NAMESPACE, None)
    if reason is None:
        return "network: a loopback-only namespace (Ray and Flower stay on 127.0.0.1)"
    return f"network: no loopback-only namespace ({reason}): the tests that start Ray or Flower's servers are skipped"


#: pytest-xdist groups (``--dist loadgroup``, pyproject's ``addopts``): each group's tests run one at a time,
#: in one worker. Ray tests never overlap (one Ray instance at a time fits 2 cores), nor do the real
#: SuperLink + SuperNode deployments; a Ray test and a deployment may overlap, as may everything else:
#: both mostly wait (heartbeats, round timeouts, process start-up), so together they take about half
#: the wall time they take one after the other.
XDIST_GROUPS = {"ray": "ray", "loopback": "superlink"}


#: Algorithms whose runs cost seconds per client at the horizons of the tests that run every algorithm (an
#: Optuna study per site): there they are in the slow tier (``exhaustive``), and proved in the default tier by
#: their own test file, at small horizons.
COSTLY_ALGORITHMS = {"optuna-tpe": "test_optuna_tpe.py"}


def _algorithm_parameters(item: pytest.Item) -> list[str]:
    """The registered algorithms a test is parametrised with (none for a test without parameters)."""
    from pfxab_flower.algorithms.registry import algorithm_names

    params = getattr(getattr(item, "callspec", None), "params", {})
    return [value for value in params.values() if isinstance(value, str) and value in algorithm_names()]


def _mark_optional_algorithms(items: list[pytest.Item]) -> None:
    """Skip a test parametrised with an algorithm whose optional extra is not installed (``pytest`` without
    ``.[optuna]`` runs everything else); mark one of a costly algorithm outside its own file ``exhaustive``."""
    from pfxab_flower.algorithms.registry import missing_module, policy_class

    for item in items:
        for name in _algorithm_parameters(item):
            module = missing_module(name)
            if module is not None:
                item.add_marker(pytest.mark.skip(reason=f"{name} needs {module}: pip install -e "
                                                        f"\".[test,{policy_class(name).extra}]\""))
            elif name in COSTLY_ALGORITHMS and item.path.name != COSTLY_ALGORITHMS[name]:
                item.add_marker(pytest.mark.exhaustive)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _mark_optional_algorithms(items)
    for item in items:
        group = next((XDIST_GROUPS[m] for m in XDIST_GROUPS if item.get_closest_marker(m)), None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    reason = config.stash.get(_NO_LOOPBACK_NAMESPACE, None)
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"starts Ray or Flower's servers: needs a loopback-only network namespace "
                                   f"({reason})")
    for item in items:
        if item.get_closest_marker("ray") or item.get_closest_marker("loopback"):
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Stretch the test's hang guard (its ``timeout`` marker, else pyproject's) by the machine's :func:`slowdown`.

    Runs before pytest-timeout reads the limit; a test's own deadlines use :func:`tests.patience.patient`.
    """
    factor = slowdown()
    marker = item.get_closest_marker("timeout")
    limit = (marker.kwargs.get("timeout", marker.args[0] if marker.args else None) if marker is not None
             else item.config.getini("timeout"))
    if factor > 1.0 and limit:
        item.add_marker(pytest.mark.timeout(float(limit) * factor), append=False)
    yield


def tent_federation(centres: list[float], noise_sigma: float = 0.1) -> Federation:
    """Clients with ``mu_m(x) = 1 - |x - c_m|`` on [0, 1]: optima known in closed form."""
    objectives = [lambda x, c=c: 1.0 - np.abs(x[:, 0] - c) for c in centres]
    return Federation.from_callables(objectives, {"x": (0.0, 1.0)}, noise_sigma=noise_sigma, name="tent")


@pytest.fixture
def tent() -> Federation:
    return tent_federation([0.2, 0.5, 0.7])


@pytest.fixture(scope="session")
def landmine_file(tmp_path_factory: pytest.TempPathFactory) -> LandmineFile:
    """A small landmine-format ``LandmineData.mat``, generated once per session (``tests/landmine_files.py``)."""
    return write_landmine_format_file(tmp_path_factory.mktemp("landmine") / "LandmineData.mat")


@pytest.fixture(autouse=True)
def _restore_pfxab_logger():
    """Flower runs make the ``pfxab_flower`` phase log visible; undo it after each test."""
    logger = logging.getLogger("pfxab_flower")
    handlers, level = list(logger.handlers), logger.level
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)


def cli_error_line(*args: str, program: Sequence[str] = PFXAB, not_ours: re.Pattern[str] | None = None) -> str:
    """Run ``pfxab ARGS`` in a fresh process; check it fails the documented way and return its one line.

    The documented way: exit status 2, nothing on stdout, exactly one line on stderr, no traceback.
    ``program`` is the command that starts ``pfxab`` (e.g. one accepting the generated landmine file);
    stderr lines matching ``not_ours`` (a library's own, named by the test) are not counted.
    """
    proc = subprocess.run([*program, *args], capture_output=True, text=True, timeout=patient(60))
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = [line for line in proc.stderr.strip().splitlines() if not (not_ours and not_ours.match(line))]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]
