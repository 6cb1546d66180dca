"""The user app of docs/flower.md, copied from the page into a temporary directory, run as a user would.

It is a hand-written Flower app (its own pyproject, run-config keys of its own, four sites, a 0/1 trial each
with its centre from the node config, drawn from the rng the product hands it) that uses only the public API
the page shows. Through ``flwr run .`` (a local SuperLink, Flower's Ray simulation) every registered algorithm
(the registry's, read when the tests are collected: one registered later is run too), and through
``run_simulation`` PF-XAB and pf-sh, must put the per-phase metrics and each site's final point and name in its
results file, equal to the in-process engine's for the same seed; each node's objective is built once per
process (counted). The default tier runs the solo algorithm (local-only) through ``flwr run`` and a federated
one (PF-XAB) through ``run_simulation`` (a federated one through ``flwr run``: ``pfxab simulate``'s test,
tests/test_flower_simulate.py); the others are the slow tier (``exhaustive``): every algorithm's strategy and
client app give the in-process numbers without Ray through the loopback harness (tests/test_flower_message.py,
tests/test_flower_strategy.py). So are the page's failure stories through ``flwr run`` (what they print is the
strategy's one line, proved over the loopback grid; the rest, ``flwr ls``, ``flwr log`` and stopping the
SuperLink, is Flower's). The ``flwr run`` tests share one SuperLink for the module; the test of a stopped run
starts and stops its own, as the page describes.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from pfxab_flower import Federation, run
from pfxab_flower.algorithms.registry import available_names, options_of
from pfxab_flower.schema.catalogue import algorithm_names
from pfxab_flower.simulations.flower.flwr_run_launcher import flwr_executable, free_port, start_local_superlink
from pfxab_flower.simulations.flower.leftover_processes import processes_with_marker, stop_processes
from pfxab_flower.simulations.flower.simulation_environment import (
    QUIET_ENV,
    backend_config,
    ray_environment,
    temporary_directory,
)
from tests.conftest import CHEAP_TRIALS, cheap_horizon
from tests.patience import patient

ROOT = Path(__file__).resolve().parents[1]
ALGORITHMS = ("pf-xab", "pf-sh")  # through run_simulation; flwr run takes every registered one
HORIZON = 20_000  # pulls per client in the runs of every algorithm: small, so each takes seconds
FILE_BLOCK = re.compile(r"<!-- file: (?P<name>[^ ]+) -->\n```[a-z]*\n(?P<body>.*?)```", re.DOTALL)


def write_user_app(directory: Path) -> dict:
    """Every file the page shows, written where it says; the app's run-config defaults."""
    page = (ROOT / "docs" / "flower.md").read_text(encoding="utf-8")
    files = {m["name"]: m["body"] for m in FILE_BLOCK.finditer(page)}
    assert set(files) == {"pyproject.toml", "my_app/__init__.py", "my_app/task.py", "my_app/server_app.py",
                          "my_app/client_app.py"}
    for name, body in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(body, encoding="utf-8")
    import tomllib

    return tomllib.loads(files["pyproject.toml"])["tool"]["flwr"]["app"]["config"]


@contextmanager
def app_modules(app_dir: Path) -> Iterator[None]:
    """``my_app`` imported from ``app_dir`` inside, and forgotten on both sides: the module's apps (the page's and
    the instrumented copy) live in different directories under the same package name."""

    def forget() -> None:
        for name in [n for n in sys.modules if n == "my_app" or n.startswith("my_app.")]:
            del sys.modules[name]

    forget()
    sys.path.insert(0, str(app_dir))
    try:
        yield
    finally:
        sys.path.remove(str(app_dir))
        forget()


def expected_run(app_dir: Path, config: dict, algorithm: str) -> dict:
    """The in-process engine's summary for the app's objective, seed and horizon."""
    with app_modules(app_dir):
        task = importlib.import_module("my_app.task")
    federation = Federation.from_callables([task.trials(centre) for centre in task.CENTRES], task.DOMAIN,
                                           evaluation="stochastic", value_range=(0.0, 1.0), sites=task.SITES)
    return run(federation, algorithm=algorithm, alpha=config["alpha"], horizon=config["horizon"],
               seed=config["seed"]).summary


def check_outcome(outcome: dict, expected: dict) -> None:
    """The app's results file: the in-process final points and phases, each client's row with its node."""
    assert outcome["algorithm"] == expected["algorithm"]
    clients = outcome["clients"]
    assert [row["client"] for row in clients] == list(range(len(expected["final_points"])))
    np.testing.assert_array_equal(np.array([row["final_point"] for row in clients]), expected["final_points"])
    assert all(isinstance(row["flower_node"], int) for row in clients)  # who held each client
    assert [row["site"] for row in clients] == expected["sites"]  # named by the app, as in process
    assert len({row["flower_node"] for row in clients}) == len(clients) and outcome["lost_clients"] == []
    phases = outcome["phases"]
    assert sorted(map(int, phases)) == list(range(1, expected["phases"] + 1))
    for row in phases.values():
        assert {"active_nodes", "eliminated", "phase_length", "mean_observed_reward"} <= set(row)
        assert row["active_nodes"] >= 2 and row["phase_length"] > 0 and 0.0 < row["mean_observed_reward"] < 1.5


@pytest.fixture(scope="module")
def user_app(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    directory = tmp_path_factory.mktemp("user-app")
    return directory, write_user_app(directory)


def test_the_page_shows_a_complete_app_with_keys_of_its_own(user_app: tuple[Path, dict]) -> None:
    _, config = user_app
    assert {"learning-rate", "num-server-rounds", "results-file"} <= set(config)


def flwr_environment(home: Path) -> dict[str, str]:
    """What a user's shell needs for ``flwr run .`` (docs/flower.md), with a private ``FLWR_HOME`` and free ports."""
    return {
        **os.environ, **QUIET_ENV, "FLWR_HOME": str(home), "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
        "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(free_port()), "FLWR_LOCAL_CONTROL_API_PORT": str(free_port()),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }


@contextmanager
def flower_home() -> Iterator[tuple[Path, dict[str, str]]]:
    """A private ``FLWR_HOME`` and the environment of a user's shell for it; every process started under it is
    stopped at the end, and none may be left."""
    with temporary_directory("pfxab-user-") as home:
        env = {**flwr_environment(home), "RAY_TMPDIR": str(home / "ray")}
        (home / "ray").mkdir()
        try:
            yield home, env
        finally:
            stop_processes(str(home))
        assert processes_with_marker(str(home)) == []


def flwr_run_command(app_dir: Path, supernodes: int, run_config: str, init_cpus: bool = True) -> list[str]:
    """``flwr run <app> --stream`` with ``supernodes`` simulated SuperNodes of one CPU each."""
    federation = f"num-supernodes={supernodes} client-resources-num-cpus=1"
    if init_cpus:
        federation += f" init-args-num-cpus={os.cpu_count() or 1}"
    return [flwr_executable(), "run", str(app_dir), "--stream", "--federation-config", federation,
            "--run-config", run_config]


def stop_local_superlink(home: Path, wait: float | None = None) -> list[int]:
    """Stop the local SuperLink the documented way; what is left after ``wait`` s.

    docs/flower.md finds it by its log file, which is in its ``FLWR_HOME`` (``pgrep -u "$USER" -f -- "--log-file
    $FLWR_HOME/local-superlink/superlink.log"``) and sends its pid SIGTERM: no other SuperLink on the machine
    (another user's, another ``FLWR_HOME``'s) is touched, as ``pkill -f "flower-superlink ..."`` would.
    """
    marker = f"FLWR_HOME={home}"
    pattern = f"--log-file {home}/local-superlink/superlink.log"
    done = subprocess.run(["pgrep", "-u", str(os.getuid()), "-f", "--", pattern], capture_output=True, text=True,
                          timeout=patient(30))
    pids = [int(pid) for pid in done.stdout.split()]
    assert len(pids) == 1, done.stdout  # exactly this home's SuperLink
    os.kill(pids[0], signal.SIGTERM)
    deadline = time.monotonic() + (patient(20.0) if wait is None else wait)
    while (left := processes_with_marker(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def start_superlink_patiently(env: dict[str, str], home: Path) -> None:
    """Start the local SuperLink ``flwr run`` would start (the same command, ports and home) before it does.

    ``flwr run`` gives the SuperLink it starts a fixed 15 s to come up (Flower's
    ``LOCAL_SUPERLINK_STARTUP_TIMEOUT``), which a busy machine misses; started here it has
    ``pfxab simulate``'s 60 s, and ``flwr run`` finds it running and uses it. (The test of a
    stopped run lets ``flwr run`` start it, as the page describes.)
    """
    start_local_superlink(env, home)


@pytest.fixture(scope="module")
def superlink() -> Iterator[tuple[Path, dict[str, str]]]:
    """One local SuperLink (started before ``flwr run`` would start it) for the module's ``flwr run`` tests:
    its ``FLWR_HOME`` and the environment of a user's shell for it; stopped, with all it started, at the end."""
    with flower_home() as (home, env):
        start_superlink_patiently(env, home)
        yield home, env


def affordable_horizon(algorithm: str, clients: int) -> int:
    """:data:`HORIZON`, or less where an Optuna study's cost grows with it: the page's strategy takes no trial
    count, so optuna-tpe's ``min(tpe-trials, horizon)`` trials are bounded by the horizon (1,000 default trials
    a site took 168-231 s here); optuna-tpe-fed by tests/conftest.py's :func:`cheap_horizon`."""
    if "tpe_trials" in options_of(algorithm):
        return min(HORIZON, CHEAP_TRIALS["tpe_trials"])
    return cheap_horizon(algorithm, clients, HORIZON)


#: Through ``flwr run`` in the default tier: the solo algorithm (a federated one: tests/test_flower_simulate.py).
BY_FLWR_RUN_BY_DEFAULT = ("local-only",)


@pytest.mark.ray
@pytest.mark.loopback  # flwr run's local SuperLink
@pytest.mark.timeout(300)  # about 15 s per algorithm measured, on a warm SuperLink; far more for a hang
@pytest.mark.parametrize("algorithm", [
    pytest.param(a, marks=() if a in BY_FLWR_RUN_BY_DEFAULT else pytest.mark.exhaustive)
    for a in available_names()  # the registry's (those installed): one registered later is run too
])
def test_user_app_through_flwr_run_for_every_registered_algorithm(
    user_app: tuple[Path, dict], superlink: tuple[Path, dict[str, str]], tmp_path: Path, algorithm: str
) -> None:
    app_dir, config = user_app
    _, env = superlink
    results = tmp_path / f"{algorithm}.json"
    horizon = affordable_horizon(algorithm, config["num-clients"])
    command = flwr_run_command(app_dir, config["num-clients"],
                               f"algorithm='{algorithm}' horizon={horizon} results-file='{results}'")
    done = subprocess.run(command, cwd=app_dir, env=env, capture_output=True, text=True, timeout=patient(240))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert results.exists(), done.stdout[-3000:]
    expected = expected_run(app_dir, {**config, "horizon": horizon}, algorithm)
    check_outcome(json.loads(results.read_text()), expected)
    # the user's own ServerApp logs the bundled app's lines: one per phase, and the final exchange
    logged = re.findall(r"pfxab: phase (\d+)(?: \(depth \d+\))?: \d+ (?:active nodes|candidates)", done.stdout)
    assert logged == [str(p) for p in range(1, expected["phases"] + 1)], done.stdout[-3000:]
    assert "pfxab: final exchange: 4 of 4 clients sent their final point" in done.stdout


def test_the_registry_holds_the_baselines_the_flwr_run_test_runs() -> None:
    assert {"local-only", "random-search"} <= set(algorithm_names())
    assert set(BY_FLWR_RUN_BY_DEFAULT) <= set(algorithm_names())


def test_an_algorithm_nobody_registered_is_the_one_line_the_page_shows() -> None:
    """What the page's ServerApp raises for ``algorithm='pf-xba'`` (through ``flwr run``: the slow tier, below)."""
    from pfxab_flower.errors import ConfigError
    from pfxab_flower.strategies import STRATEGIES

    with pytest.raises(ConfigError) as info:
        STRATEGIES["pf-xba"]
    assert str(info.value) == f"algorithm='pf-xba' is invalid; allowed: {', '.join(algorithm_names())}"


@pytest.mark.exhaustive  # default tier: the one line (above); Flower's record of a failed run is Flower's
@pytest.mark.ray
@pytest.mark.loopback  # flwr run's local SuperLink
@pytest.mark.timeout(300)
def test_an_algorithm_nobody_registered_fails_the_serverapp_with_one_line_and_flowers_record_says_so(
    user_app: tuple[Path, dict], superlink: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """docs/flower.md: what a ``flwr run`` user sees when the ServerApp raises (``flwr run`` itself exits 0)."""
    app_dir, config = user_app
    results = tmp_path / "none.json"
    _, env = superlink  # the module's SuperLink
    command = flwr_run_command(app_dir, config["num-clients"], f"algorithm='pf-xba' results-file='{results}'")
    done = subprocess.run(command, cwd=app_dir, env=env, capture_output=True, text=True,
                          timeout=patient(240))
    assert done.returncode == 0, done.stdout[-3000:]  # Flower's: whatever happened to the run
    why = f"algorithm='pf-xba' is invalid; allowed: {', '.join(algorithm_names())}"
    assert why in done.stdout, done.stdout[-3000:]
    assert not results.exists()
    run_id = re.search(r"Successfully started run (\d+)", done.stdout)[1]
    listed = subprocess.run([flwr_executable(), "ls", "--run-id", run_id, "--format", "json"], cwd=app_dir,
                            env=env, capture_output=True, text=True, timeout=patient(60))
    record = json.loads(listed.stdout)["runs"][0]
    assert record["status"] == "finished:failed" and why in record["status-details"], record


@pytest.mark.exhaustive  # default tier: the one line over the loopback grid (test_flower_message.py, too few nodes)
@pytest.mark.ray
@pytest.mark.loopback  # flwr run's local SuperLink
@pytest.mark.timeout(300)
def test_a_stopped_run_ends_with_one_line_its_record_and_a_superlink_that_stops(
    user_app: tuple[Path, dict], tmp_path: Path
) -> None:
    """docs/flower.md: the app's one line and ``stopped`` result, ``flwr ls``/``flwr log``, stopping the SuperLink."""
    app_dir, config = user_app
    results = tmp_path / "stopped.json"
    with flower_home() as (home, env):
        command = flwr_run_command(app_dir, config["num-clients"] - 1, f"results-file='{results}'")
        done = subprocess.run(command, cwd=app_dir, env=env, capture_output=True, text=True,
                              timeout=patient(240))
        assert done.returncode == 0, done.stdout[-3000:]  # Flower's: whatever happened to the run
        why = f"only {config['num-clients'] - 1} of the {config['num-clients']} nodes the run needs are connected"
        lines = [line for line in done.stdout.splitlines() if "my-tuning-app:" in line]
        assert len(lines) == 1 and f"no result, the run stopped: {why}" in lines[0], done.stdout[-3000:]
        assert "Traceback" not in done.stdout and "Exit Code" not in done.stdout, done.stdout[-3000:]
        assert json.loads(results.read_text())["stopped"].startswith(why)

        run_id = re.search(r"Successfully started run (\d+)", done.stdout)[1]
        listed = subprocess.run([flwr_executable(), "ls", "--run-id", run_id, "--format", "json"], cwd=app_dir,
                                env=env, capture_output=True, text=True, timeout=patient(60))
        assert json.loads(listed.stdout)["runs"][0]["status"] == "finished:completed"  # the app caught the stop
        log = subprocess.run([flwr_executable(), "log", run_id, "--show"], cwd=app_dir, env=env,
                             capture_output=True, text=True, timeout=patient(60))
        assert f"no result, the run stopped: {why}" in log.stdout, log.stdout[-2000:] + log.stderr[-2000:]

        assert processes_with_marker(f"FLWR_HOME={home}")  # the SuperLink still runs after `flwr run`
        assert stop_local_superlink(home) == []


#: Test instrumentation of the page's ClientApp: its builder's calls written to ``$PFXAB_BUILD_LOG`` (one line
#: ``pid node run`` each) or, for the node ``$PFXAB_FAILING_PARTITION`` names, a ``KeyError('data-root')``.
INSTRUMENTED_CLIENT = '''"""The page's ClientApp, its builder counted (one site failing, if asked): a test's copy."""

import os

from my_app import client_app

_built = client_app.make_objective.make_objective


def instrumented(context):
    with open(os.environ["PFXAB_BUILD_LOG"], "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()} {context.node_id} {context.run_id}\\n")
    if str(context.node_config.get("partition-id")) == os.environ.get("PFXAB_FAILING_PARTITION"):
        return {}["data-root"]  # the site's data directory is not configured
    return _built(context)


client_app.make_objective.make_objective = instrumented
app = client_app.app
'''


@pytest.fixture(scope="module")
def instrumented_app(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The page's app with its ClientApp wrapped by :data:`INSTRUMENTED_CLIENT` (nothing else changed)."""
    directory = tmp_path_factory.mktemp("instrumented-app")
    config = write_user_app(directory)
    (directory / "my_app" / "instrumented_client.py").write_text(INSTRUMENTED_CLIENT, encoding="utf-8")
    pyproject = directory / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('clientapp = "my_app.client_app:app"',
                                                       'clientapp = "my_app.instrumented_client:app"'))
    return directory, config


def builds_per_process(log: Path) -> Counter:
    """How often each (process, node, run) built its objective."""
    return Counter(tuple(line.split()) for line in log.read_text().splitlines())


@pytest.mark.ray
@pytest.mark.timeout(300)
@pytest.mark.parametrize("algorithm", [pytest.param(a, marks=() if a == "pf-xab" else pytest.mark.exhaustive)
                                       for a in ALGORITHMS])  # the others: through flwr run (every one registered)
def test_user_app_through_run_simulation(instrumented_app: tuple[Path, dict], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch, algorithm: str) -> None:
    """The in-process engine's final point at every site, each site named; each node's objective built once in
    each Ray worker that handles it (it was built for every message). Its own Ray (not the worker's shared one):
    Flower's backend gives Ray's workers the ``sys.path`` of the moment it starts Ray, and the app's directory is
    on it only now."""
    from flwr.simulation import run_simulation

    app_dir, config = instrumented_app
    log = tmp_path / "builds.log"
    log.write_text("")
    monkeypatch.setenv("PFXAB_BUILD_LOG", str(log))  # Ray's workers inherit this process's environment
    with app_modules(app_dir):
        server_app = importlib.import_module("my_app.server_app")
        client_app = importlib.import_module("my_app.instrumented_client")
        results = tmp_path / f"{algorithm}.json"
        settings = {**config, "algorithm": algorithm, "results-file": str(results)}
        with ray_environment() as ray_dir, warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            run_simulation(server_app.make_app(settings), client_app.app, num_supernodes=config["num-clients"],
                           backend_config=backend_config(0.5, ray_dir))  # four workers on two cores
    outcome = json.loads(results.read_text())
    check_outcome(outcome, expected_run(app_dir, config, algorithm))
    builds = builds_per_process(log)
    nodes = {row["flower_node"] for row in outcome["clients"]}
    assert set(builds.values()) == {1}, builds  # never twice in one process
    assert {int(node) for _, node, _ in builds} == nodes  # every node built where it ran
    assert len(builds) <= len(nodes) * len({pid for pid, _, _ in builds})


@pytest.mark.exhaustive  # flwr run's own SuperLink; the same properties over the loopback grid: test_own_sites.py
@pytest.mark.ray
@pytest.mark.loopback  # its own SuperLink, and flwr run's Ray simulation: the flwr-run group (tests/conftest.py)
@pytest.mark.timeout(600)
def test_a_failing_site_in_a_four_site_flwr_run_is_one_line_per_phase_and_objectives_are_built_once(
    instrumented_app: tuple[Path, dict], tmp_path: Path
) -> None:
    """Site lab-c's builder raises KeyError('data-root'): 23 lines and 23 Flower tracebacks in a 23-exchange run
    before, and a lost-client record without the exception or the node."""
    app_dir, config = instrumented_app
    results, log = tmp_path / "failing.json", tmp_path / "builds.log"
    with flower_home() as (home, env):
        env = {**env, "PFXAB_BUILD_LOG": str(log), "PFXAB_FAILING_PARTITION": "2"}
        start_superlink_patiently(env, home)
        command = flwr_run_command(app_dir, config["num-clients"], f"algorithm='pf-xab' horizon={HORIZON} "
                                   f"results-file='{results}'")
        done = subprocess.run(command, cwd=app_dir, env=env, capture_output=True, text=True,
                              timeout=patient(300))
    assert done.returncode == 0 and results.exists(), done.stdout[-3000:]
    outcome = json.loads(results.read_text())
    phases = len(outcome["phases"])
    lines = [line for line in done.stdout.splitlines() if "lab-c" in line and "sent no usable" in line]
    per_phase = Counter(int(re.search(r"phase (\d+): ", line)[1]) for line in lines)
    assert set(per_phase.values()) == {1} and set(per_phase) == set(range(1, phases + 2)), done.stdout[-3000:]
    assert all(line.endswith("KeyError: 'data-root'") for line in lines), lines
    assert "Traceback" not in done.stdout and "ClientAppException" not in done.stdout, done.stdout[-3000:]
    (lost,) = outcome["lost_clients"]
    assert (lost["client"], lost["site"], lost["reason"]) == (2, "lab-c", "KeyError: 'data-root'")
    assert isinstance(lost["flower_node"], int) and f"Flower node {lost['flower_node']}" in lines[0]
    builds = builds_per_process(log)
    healthy = {key: count for key, count in builds.items() if int(key[1]) != lost["flower_node"]}
    assert set(healthy.values()) == {1}, builds  # once per (process, node, run); a failed build is tried again
    assert len({node for _, node, _ in healthy}) == 3


@pytest.mark.exhaustive  # a whole flwr run; the flags' checks run in process in test_own_sites.py
@pytest.mark.ray
@pytest.mark.loopback  # pfxab simulate's local SuperLink: the flwr-run group (tests/conftest.py)
@pytest.mark.timeout(600)
def test_pfxab_simulate_runs_the_page_app_as_it_is(user_app: tuple[Path, dict], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """It failed with Flower's "[code: 15] Invalid run configuration." (it passed every key of the bundled app)."""
    app_dir, config = user_app
    monkeypatch.chdir(tmp_path)  # the app's relative results-file lands where simulate runs
    done = subprocess.run([sys.executable, "-m", "pfxab_flower.simulations.cli.main", "simulate", "--app-dir",
                           str(app_dir), "--algorithm", "fed-pne", "--horizon", str(HORIZON), "--num-cpus", "0.5"],
                          capture_output=True, text=True, timeout=patient(400), env={**os.environ, **QUIET_ENV})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "your app's run finished (finished:completed" in done.stderr
    assert "each site's final point:" in done.stdout
    outcome = json.loads((tmp_path / config["results-file"]).read_text())
    assert outcome["algorithm"] == "fed-pne" and [row["site"] for row in outcome["clients"]] == \
        ["lab-a", "lab-b", "lab-c", "lab-d"]


@pytest.mark.exhaustive  # a SuperLink and four SuperNodes; the builds per process: under run_simulation above
@pytest.mark.loopback
@pytest.mark.timeout(400)
def test_the_page_app_in_a_deployment_reads_each_sites_centre_and_name_from_its_node_config(
    instrumented_app: tuple[Path, dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each SuperNode declares its site and centre; the final points are the in-process engine's for those centres.
    Flower runs each message in a flwr-clientapp process of its own: the builder runs once in each (counted)."""
    from pfxab_flower.simulations.flower import local_deployment as dep
    from tests.deployment_tools import log_tail

    app_dir, config = instrumented_app
    centres = [(0.2, 0.3), (0.35, 0.8), (0.6, 0.4), (0.85, 0.65)]
    log, results = tmp_path / "builds.log", tmp_path / "deployed.json"
    monkeypatch.setenv("PFXAB_BUILD_LOG", str(log))  # the SuperNodes' environment is this process's
    node_configs = [f'partition-id={m} num-partitions=4 site="ward-{m}" centre-dose={x} centre-rate={y}'
                    for m, (x, y) in enumerate(centres)]
    with dep.deployment(4, tmp_path / "deploy", node_configs=node_configs, startup_timeout=patient(60)) as running:
        done = running.flwr_run(app_dir, f"algorithm='pf-xab' horizon={HORIZON} results-file='{results}'",
                                timeout=patient(300))
        assert done.returncode == 0 and results.exists(), done.stdout[-2000:] + log_tail(running)
    outcome = json.loads(results.read_text())
    assert [row["site"] for row in outcome["clients"]] == [f"ward-{m}" for m in range(4)]  # the node's own names
    with app_modules(app_dir):
        task = importlib.import_module("my_app.task")
        federation = Federation.from_callables([task.trials(c) for c in centres], task.DOMAIN,
                                               evaluation="stochastic", value_range=(0.0, 1.0))
        alone = run(federation, algorithm="pf-xab", alpha=config["alpha"], horizon=HORIZON, seed=config["seed"])
    np.testing.assert_array_equal(np.array([row["final_point"] for row in outcome["clients"]]),
                                  alone.summary["final_points"])
    builds = builds_per_process(log)
    assert set(builds.values()) == {1} and len({node for _, node, _ in builds}) == 4, builds
    assert len({pid for pid, _, _ in builds}) == len(builds)  # a process per message: one build in each
