"""The user app of docs/flower.md, copied from the page into a temporary directory, run as a user would.

It is a hand-written Flower app (its own pyproject, run-config keys of its own, a 2-D
objective per site) that uses only the public API the page shows. Through ``flwr run .``
(a local SuperLink, Flower's Ray simulation) every registered algorithm (the registry's,
read when the test runs: one registered later is run too), and through ``run_simulation``
PF-XAB, Fed-PNE and PF-PNE, must put the per-phase metrics and each client's final point
with its site in its results file, equal to the in-process engine's for the same seed.
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
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np
import psutil
import pytest

from pfxab_flower import Federation, run
from pfxab_flower.algorithms.registry import available_names
from pfxab_flower.schema.catalogue import algorithm_names
from pfxab_flower.simulations.environment import QUIET_ENV, backend_config, ray_environment, temporary_directory
from pfxab_flower.simulations.flwr_run import flwr_executable, free_port, start_local_superlink
from pfxab_flower.simulations.processes import processes_with_marker, stop_processes
from tests.patience import patient

ROOT = Path(__file__).resolve().parents[1]
ALGORITHMS = ("pf-xab", "fed-pne", "pf-pne")  # through run_simulation; flwr run takes every registered one
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


def expected_run(app_dir: Path, config: dict, algorithm: str) -> dict:
    """The in-process engine's summary for the app's objective, seed and horizon."""
    sys.path.insert(0, str(app_dir))
    try:
        task = importlib.import_module("my_app.task")
    finally:
        sys.path.remove(str(app_dir))
    objectives = [partial(task.objective, partition_id=m) for m in range(config["num-clients"])]
    federation = Federation.from_callables(objectives, task.DOMAIN, noise_sigma=0.1)
    return run(federation, algorithm=algorithm, alpha=config["alpha"], horizon=config["horizon"],
               seed=config["seed"]).summary


def check_outcome(outcome: dict, expected: dict) -> None:
    """The app's results file: the in-process final points and phases, each client's row with its node."""
    assert outcome["algorithm"] == expected["algorithm"]
    clients = outcome["clients"]
    assert [row["client"] for row in clients] == list(range(len(expected["final_points"])))
    np.testing.assert_array_equal(np.array([row["final_point"] for row in clients]), expected["final_points"])
    assert all(isinstance(row["flower_node"], int) and "site" in row for row in clients)  # who held each client
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

    docs/flower.md says ``pkill -f "flower-superlink --insecure --simulation"``: SIGTERM to
    the processes whose command line has that. Only this test's (found by the private
    ``FLWR_HOME`` in their environment) are signalled.
    """
    marker = f"FLWR_HOME={home}"
    for pid in processes_with_marker(marker):
        if "flower-superlink --insecure --simulation" in " ".join(psutil.Process(pid).cmdline()):
            os.kill(pid, signal.SIGTERM)
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


@pytest.mark.ray
@pytest.mark.timeout(900)  # about 15 s per algorithm measured, on one warm SuperLink; far more for a hang
def test_user_app_through_flwr_run_for_every_registered_algorithm(user_app: tuple[Path, dict], tmp_path: Path) -> None:
    app_dir, config = user_app
    algorithms = available_names()  # the registry's (those this installation runs): one registered later is too
    assert {"local-only", "random-search"} <= set(algorithms)
    with flower_home() as (home, env):
        start_superlink_patiently(env, home)
        for algorithm in algorithms:
            results = tmp_path / f"{algorithm}.json"
            command = flwr_run_command(app_dir, config["num-clients"],
                                       f"algorithm='{algorithm}' horizon={HORIZON} results-file='{results}'")
            done = subprocess.run(command, cwd=app_dir, env=env, capture_output=True, text=True,
                                  timeout=patient(240))
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
            assert results.exists(), done.stdout[-3000:]
            expected = expected_run(app_dir, {**config, "horizon": HORIZON}, algorithm)
            check_outcome(json.loads(results.read_text()), expected)
            # the user's own ServerApp logs the bundled app's lines: one per phase, and the final exchange
            logged = re.findall(r"pfxab: phase (\d+) \(depth \d+\): \d+ active nodes", done.stdout)
            assert logged == [str(p) for p in range(1, expected["phases"] + 1)], done.stdout[-3000:]
            assert "pfxab: final exchange: 3 of 3 clients sent their final point" in done.stdout


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_an_algorithm_nobody_registered_fails_the_serverapp_with_one_line_and_flowers_record_says_so(
    user_app: tuple[Path, dict], tmp_path: Path
) -> None:
    """docs/flower.md: what a ``flwr run`` user sees when the ServerApp raises (``flwr run`` itself exits 0)."""
    app_dir, config = user_app
    results = tmp_path / "none.json"
    with flower_home() as (home, env):
        start_superlink_patiently(env, home)
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


@pytest.mark.ray
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


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_user_app_through_run_simulation(user_app: tuple[Path, dict], tmp_path: Path) -> None:
    from flwr.simulation import run_simulation

    app_dir, config = user_app
    sys.path.insert(0, str(app_dir))
    try:
        server_app = importlib.import_module("my_app.server_app")
        client_app = importlib.import_module("my_app.client_app")
        for algorithm in ALGORITHMS:
            results = tmp_path / f"{algorithm}.json"
            settings = {**config, "algorithm": algorithm, "results-file": str(results)}
            with ray_environment() as ray_dir, warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                run_simulation(server_app.make_app(settings), client_app.app, num_supernodes=config["num-clients"],
                               backend_config=backend_config(1.0, ray_dir))
            check_outcome(json.loads(results.read_text()), expected_run(app_dir, config, algorithm))
    finally:
        sys.path.remove(str(app_dir))
        for name in [n for n in sys.modules if n == "my_app" or n.startswith("my_app.")]:
            del sys.modules[name]
