"""Shared fixtures: small federations, landmine-format data, a quiet environment, loopback only, one Ray.

The suite runs inside a network namespace that has only loopback (``tests/loopback_namespace.py``):
``pytest`` re-executes itself inside one at start-up when it is not already in one. Where
none can be made (or ``PFXAB_NETNS=off``), the tests that start Ray or Flower's servers
(markers ``ray`` and ``loopback``) are skipped with the reason, and the rest runs.

Two tiers. ``pytest`` (the README's command) runs the default tier: every property at least once,
on the cheapest transport that shows it (every algorithm through the Ray-free loopback harness,
``tests/flower_loopback.py`` and ``tests/message_loopback.py``; one federated and one solo
algorithm on Ray and through ``flwr run``; one deployment smoke test). Tests marked ``exhaustive``
are the slow tier, left out by pyproject's ``addopts`` (``-m 'not exhaustive'``): every algorithm
on every transport, every deployment, the runs at full size. ``pytest -m exhaustive`` runs the
slow tier alone (a later ``-m`` replaces the earlier one), ``pytest -m ""`` both; ``.ci/run`` runs
the default tier and then the slow tier, so nothing proved stops being proved. A test that starts
Ray, ``flwr run`` or a deployment, or takes more than a few seconds, and whose property the
default tier already proves on a cheaper transport, is ``exhaustive``; the comment beside its
marker says where the default tier proves it. To run one by name: ``pytest -m "" FILE::NAME``.

In-process Flower simulations share one Ray per worker (:func:`shared_ray`), started by the first
test that asks for it and stopped before a Ray test that does not (a test about Ray's own start
and end, or one that joins another cluster) and at the end of the session.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from pfxab_flower.problems.federation import Federation
from tests import loopback_namespace
from tests.landmine_files import LandmineFile, write_landmine_format_file
from tests.patience import patient, slowdown

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
#: Ray's own deadline for a driver to reach its GCS (60 s by default) broke a Ray start at load 14 ("Failed to
#: connect to GCS within 60 seconds"); the tests' Rays (in this process and every process the tests start) wait
#: longer, as every other deadline of the tests does on a busy machine (tests/patience.py).
os.environ.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", "300")

#: ``pfxab`` in a fresh process.
PFXAB = (sys.executable, "-m", "pfxab_flower.simulations.cli.main")


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


#: pytest-xdist groups (``--dist loadgroup``, pyproject's ``addopts``), by the markers a test carries: each
#: group's tests run one at a time, in one worker. ``superlink``: real SuperLink + SuperNode deployments
#: (marker ``loopback``); ``flwr-run``: ``flwr run`` or ``pfxab simulate`` with their local SuperLink and its
#: Ray simulation (markers ``loopback`` and ``ray``); ``ray``: the other Ray tests (one Ray at a time in this
#: process fits 2 cores). Tests of different groups may overlap, as may everything else: they mostly wait
#: (heartbeats, round timeouts, process start-up), so together they take about half the wall time they take
#: one after the other. The slow tier is almost only these groups: .ci/run gives it a worker per group.
XDIST_GROUPS = {("loopback", "ray"): "flwr-run", ("loopback",): "superlink", ("ray",): "ray"}
#: The slow tier's Ray tests that start a Ray of their own (a child ``pfxab run``, a Ray cluster, a private
#: in-process Ray) rather than the worker's :func:`shared_ray`: their own group, so they run beside the shared Ray's
#: instead of after them (the ``ray`` group was the slow tier's longest, about 700 s of its 730 s).
OWN_RAY_GROUP = "ray-own"


def xdist_group_of(item: pytest.Item) -> str | None:
    """The group of :data:`XDIST_GROUPS` that ``item``'s markers name (the first whose markers it all carries);
    :data:`OWN_RAY_GROUP` for a slow-tier ``ray`` test without :func:`shared_ray`."""
    group = next((group for markers, group in XDIST_GROUPS.items()
                  if all(item.get_closest_marker(marker) for marker in markers)), None)
    if (group == "ray" and item.get_closest_marker("exhaustive")
            and "shared_ray" not in getattr(item, "fixturenames", ())):
        return OWN_RAY_GROUP
    return group


#: Algorithms whose runs cost seconds per client at the horizons of the tests that run every algorithm (an
#: Optuna study per site): there they are in the slow tier (``exhaustive``), and proved in the default tier by
#: their own test file, at small horizons.
COSTLY_ALGORITHMS = {"optuna-tpe": "test_optuna_tpe.py", "optuna-tpe-fed": "test_optuna_tpe_fed.py"}


#: Algorithms whose decisions use no confidence width (pf-smbo: a model's choices; docs/algorithms/pf-smbo.md,
#: "Settings it takes and ignores"), with a test file that proves Bernstein's variances travel for them: a test
#: parametrised with one of them and ``"bernstein"`` elsewhere runs Hoeffding's twin in the default tier and is in the
#: slow tier itself (each such run costs seconds of model fits, and the two runs decide alike).
WIDTHLESS_ALGORITHMS = {"pf-smbo": "test_bernstein.py"}


def cheap_algorithms() -> list[str]:
    """The installed algorithms but the costly ones: what a default-tier comparison runs (``compare``'s default,
    every installed algorithm, is the slow tier's: tests/test_compare.py)."""
    from pfxab_flower.algorithms.registry import available_names

    return [name for name in available_names() if name not in COSTLY_ALGORITHMS]


#: Optuna studies of 40 trials a site instead of 1,000: a test of what the engines or a comparison do with a run,
#: not of TPE's cost.
CHEAP_TRIALS = {"tpe_trials": 40}


def cheap_options(algorithm: str) -> dict[str, int]:
    """The keywords of :data:`CHEAP_TRIALS` that ``algorithm`` takes (another algorithm refuses them)."""
    from pfxab_flower.algorithms.registry import options_of

    return {name: value for name, value in CHEAP_TRIALS.items() if name in options_of(algorithm)}


#: Phases of optuna-tpe-fed in a test of what an engine, a transport or a bound does with a run: each of its
#: ``min(T // M, 200)`` phases is one trial of every site's study, and 200 of them took 124-244 s a test on 2 cores
#: (the slow tier's slowest); 20 phases show the same equality (tests/test_optuna_tpe_fed.py tests the studies).
CHEAP_PHASES = 20
#: Pulls per client of a proposing policy (pf-smbo: a phase is model fits whose cost grows with the points) in
#: such a test: tests/test_secure_aggregation.py's choice, which shows several phases.
CHEAP_PROPOSING_HORIZON = 2_000


def cheap_horizon(algorithm: str, clients: int, horizon: int) -> int:
    """``horizon``, or less for an algorithm whose cost grows with it (see :data:`CHEAP_PHASES`): a test of what
    a run does, not of the algorithm's cost at a large budget."""
    from pfxab_flower.algorithms.registry import policy_class

    if algorithm == "optuna-tpe-fed":
        return min(horizon, CHEAP_PHASES * clients)
    if policy_class(algorithm).proposes:
        return min(horizon, CHEAP_PROPOSING_HORIZON)
    return horizon


#: ``--algorithms`` of :func:`cheap_algorithms` for a default-tier ``pfxab compare``.
CHEAP_ALGORITHMS_FLAG = ("--algorithms", ",".join(cheap_algorithms()))


def _parameter_values(item: pytest.Item) -> list[object]:
    """The values a test is parametrised with (none for a test without parameters)."""
    return list(getattr(getattr(item, "callspec", None), "params", {}).values())


def _algorithm_parameters(item: pytest.Item) -> list[str]:
    """The registered algorithms a test is parametrised with (none for a test without parameters)."""
    from pfxab_flower.algorithms.registry import algorithm_names

    return [value for value in _parameter_values(item) if isinstance(value, str) and value in algorithm_names()]


def _slow_tier_only(item: pytest.Item, algorithm: str) -> bool:
    """Whether ``item``, parametrised with ``algorithm``, belongs to the slow tier by :data:`COSTLY_ALGORITHMS` or
    :data:`WIDTHLESS_ALGORITHMS`."""
    if algorithm in COSTLY_ALGORITHMS:
        return item.path.name != COSTLY_ALGORITHMS[algorithm]
    return (algorithm in WIDTHLESS_ALGORITHMS and item.path.name != WIDTHLESS_ALGORITHMS[algorithm]
            and "bernstein" in _parameter_values(item))


def _mark_optional_algorithms(items: list[pytest.Item]) -> None:
    """Skip a test parametrised with an algorithm whose optional extra is not installed (``pytest`` without
    ``.[optuna]`` runs everything else); mark ``exhaustive`` what :func:`_slow_tier_only` says belongs to the slow
    tier."""
    from pfxab_flower.algorithms.registry import missing_module, policy_class

    for item in items:
        for name in _algorithm_parameters(item):
            module = missing_module(name)
            if module is not None:
                item.add_marker(pytest.mark.skip(reason=f"{name} needs {module}: pip install -e "
                                                        f"\".[test,{policy_class(name).extra}]\""))
            elif _slow_tier_only(item, name):
                item.add_marker(pytest.mark.exhaustive)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _mark_optional_algorithms(items)
    for item in items:
        group = xdist_group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        if getattr(config.option, "loadgroup", False):  # in a pytest-xdist worker, --dist loadgroup
            _name_its_group(item)
    reason = config.stash.get(_NO_LOOPBACK_NAMESPACE, None)
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"starts Ray or Flower's servers: needs a loopback-only network namespace "
                                   f"({reason})")
    for item in items:
        if item.get_closest_marker("ray") or item.get_closest_marker("loopback"):
            item.add_marker(skip)


def _name_its_group(item: pytest.Item) -> None:
    """Give ``item``'s node id the ``@group`` suffix by which pytest-xdist's ``loadgroup`` sends a group to one worker.

    pytest-xdist (3.8) writes the suffix into ``item._nodeid``; pytest 9 keeps a node's id as a structured
    ``item._id`` and ignores that field, so every group was silently spread over both workers (Ray tests
    side by side, deployments too; pytest-xdist issue 1386). Written here where the id lives, the same
    suffix pytest-xdist would write (the sorted names of the item's ``xdist_group`` marks, joined by ``_``).
    """
    names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                    for mark in item.iter_markers("xdist_group")})
    if not names or "@" in item.nodeid.rpartition("]")[2] or not hasattr(item, "_id"):
        return  # no group, already named (an older pytest), or a pytest whose ids pytest-xdist can still name
    from _pytest.nodeid import NodeId

    item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")


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
def _no_task_identity() -> None:
    """Each test starts as a fresh process would: Flower's ``TaskIdentity`` (which its ``Message`` reads) unset.

    A test that builds messages as a ServerApp sets it itself (``tests.message_loopback.as_a_serverapp_process``);
    without this reset such a test could pass only when an earlier test in its worker had set it.
    """
    task_identity = sys.modules.get("flwr.supercore.task_identity")  # only if Flower is already imported
    if task_identity is not None:
        identity = task_identity.TaskIdentity
        identity.run_id = identity.node_id = identity.task_id = None


@pytest.fixture(autouse=True)
def _restore_pfxab_logger():
    """Flower runs make the ``pfxab_flower`` phase log visible; undo it after each test."""
    logger = logging.getLogger("pfxab_flower")
    handlers, level = list(logger.handlers), logger.level
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)


def cli_error_line(*args: str, program: Sequence[str] | None = None, not_ours: re.Pattern[str] | None = None) -> str:
    """Run ``pfxab ARGS``; check it fails the documented way and return its one line.

    The documented way: exit status 2, nothing on stdout, exactly one line on stderr, no traceback.
    By default ``main(ARGS)`` runs in this process (milliseconds, where a fresh process takes about
    a second); ``program`` runs it in a fresh process instead, started by that command: ``PFXAB``
    (the real command, for the one test per exit path that shows what a shell sees), or one
    accepting the generated landmine file. Stderr lines matching ``not_ours`` (a library's own,
    named by the test) are not counted.
    """
    if program is None:
        from pfxab_flower.simulations.cli.main import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(list(args))
            except SystemExit as exc:  # the parser's own errors end this way, as in the command
                status = exc.code
        returncode, stdout, stderr = status, out.getvalue(), err.getvalue()
    else:
        proc = subprocess.run([*program, *args], capture_output=True, text=True, timeout=patient(60))
        returncode, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    assert returncode == 2, stderr
    assert stdout == ""
    lines = [line for line in stderr.strip().splitlines() if not (not_ours and not_ours.match(line))]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


class _SharedRay:
    """One Ray for the in-process Flower simulations of this worker (see :func:`shared_ray`)."""

    def __init__(self) -> None:
        self.environment: contextlib.ExitStack | None = None
        self.directory: Path | None = None

    def running(self) -> bool:
        if self.environment is None:
            return False
        import ray

        if ray.is_initialized():
            return True
        self.stop()  # a test that did not ask for it shut it down (Flower's backend does after its run)
        return False

    def start(self, attempts: int = 3) -> Path:
        """Start Ray; again (at most ``attempts`` times) if its raylet misses Ray's fixed 30 s to register.

        That deadline (``ray._private.node``: "The current node timed out during startup") is not
        configurable, and a machine at load 14 broke it once.
        """
        import ray

        from pfxab_flower.simulations.flower.simulation_environment import ray_environment

        for attempt in range(1, attempts + 1):
            self.environment = contextlib.ExitStack()
            self.directory = self.environment.enter_context(ray_environment())
            try:
                ray.init(num_cpus=os.cpu_count(), num_gpus=0, include_dashboard=False, _temp_dir=str(self.directory),
                         logging_level="WARNING", log_to_driver=False)
                return self.directory
            except Exception as exc:  # Ray raises a bare Exception for it
                self.stop()
                if attempt == attempts or "timed out during startup" not in str(exc):
                    raise
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Shut Ray down and check that none of its processes is left (the directory's clean-up stops stragglers)."""
        if self.environment is None:
            return
        import ray

        from pfxab_flower.simulations.flower.leftover_processes import processes_with_marker

        ray.shutdown()
        directory, environment = self.directory, self.environment
        self.environment = self.directory = None
        environment.close()
        assert processes_with_marker(str(directory)) == []  # no Ray process left behind


_SHARED_RAY = _SharedRay()


@pytest.fixture
def shared_ray(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The worker's one Ray, started on first use (its temporary directory is yielded).

    Flower's Ray backend joins a Ray that is already initialised and shuts it down after its
    run; within the test its ``terminate`` only stops the run's actors, so Ray serves the next
    test too (about 7 s of start and stop saved per in-process simulation).
    """
    pytest.importorskip("ray")
    from flwr.server.superlink.fleet.vce.backend.raybackend import RayBackend

    directory = _SHARED_RAY.directory if _SHARED_RAY.running() else _SHARED_RAY.start()
    assert directory is not None

    def terminate_actors_only(self: RayBackend) -> None:
        if self.pool:
            self.pool.terminate_all_actors()

    monkeypatch.setattr(RayBackend, "terminate", terminate_actors_only)
    yield directory


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A Ray test that does not share the worker's Ray finds none running (it starts, joins or stops its own)."""
    if item.get_closest_marker("ray") and "shared_ray" not in getattr(item, "fixturenames", ()):
        _SHARED_RAY.stop()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _SHARED_RAY.stop()
