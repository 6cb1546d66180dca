"""A Ray already running on the machine: the run stops at once with one line naming the cause and the fix.

Flower's simulation calls ``ray.init()`` with no address, so it joins whatever cluster an
earlier ``ray start`` named in Ray's default temporary directory (docs/flower.md, "A Ray
already running on the machine"). The Ray test starts a real head with ``ray start --head``
in a private ``TMPDIR`` (so Ray's default temporary directory, for the head and for the app,
is private), runs the docs' app through ``flwr run .`` as a user would, then follows the
line's fix (stop the SuperLink, ``export RAY_ADDRESS=local``) and runs it again. Everything
it started is stopped by pid: never ``ray stop``, which stops every Ray on the machine. It is
the slow tier (``exhaustive``); the default tier checks the diagnosis and its line without Ray.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from pfxab_flower.running.exchanges import Exchange, Failure
from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.simulations.flower.flwr_run_launcher import free_port, run_config_argument, write_app_project
from pfxab_flower.simulations.flower.simulation_environment import QUIET_ENV, temporary_directory
from pfxab_flower.strategies import ray_diagnosis
from pfxab_flower.strategies.common import NO_REPLY, explain_silence, make_driver
from pfxab_flower.strategies.ray_diagnosis import foreign_cluster, ray_temp_dir
from tests.patience import patient
from tests.test_user_app import (
    check_outcome,
    expected_run,
    flwr_environment,
    flwr_run_command,
    stop_local_superlink,
)

#: The stop line must come well before the strategy's 600 s round timeout: within a minute of the run's start
#: (on an idle machine: :func:`tests.patience.patient` stretches it on a busy one).
WITHIN = 60.0


# -- the diagnosis, without starting Ray -------------------------------------------------------------
@pytest.mark.parametrize("env", [{"RAY_TMPDIR": "/r", "TMPDIR": "/t"}, {"TMPDIR": "/t"}, {}])
def test_ray_temp_dir_follows_rays_own_rule(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from ray._common.utils import get_default_ray_temp_dir

    for name in ("RAY_TMPDIR", "TMPDIR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert ray_temp_dir() == Path(get_default_ray_temp_dir())


def cluster_file(directory: Path, address: str = "127.0.0.1:6379") -> Path:
    (directory / "ray").mkdir(exist_ok=True)
    path = directory / "ray" / "ray_current_cluster"
    path.write_text(address + "\n")
    return path


def test_a_cluster_nobody_answers_for_stops_the_run_with_cause_and_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cluster file of a head that is gone: Ray waits, the strategy says why after ``wait`` seconds."""
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray_diagnosis, "ray_is_up", lambda: False)  # Ray never gets up (this process has none)
    path = cluster_file(tmp_path)
    line = foreign_cluster(simulation=True, wait=0.3)
    assert line is not None and "\n" not in line
    assert "127.0.0.1:6379" in line and str(path) in line and "export RAY_ADDRESS=local" in line


def test_no_cluster_file_or_a_chosen_address_or_no_simulation_is_no_objection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray_diagnosis, "ray_is_up", lambda: False)
    assert foreign_cluster(simulation=True, wait=5.0) is None  # no file: returns at once
    cluster_file(tmp_path)
    assert foreign_cluster(simulation=False, wait=5.0) is None  # a deployment's ServerApp has no Ray of its own
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert foreign_cluster(simulation=True, wait=5.0) is None  # joining was asked for


@pytest.mark.parametrize("silence", [*NO_REPLY, None])
def test_a_first_exchange_nobody_answered_stops_with_what_was_seen(silence: str | None) -> None:
    """Legacy API: Flower's 'Expected one Message but got: 0' per node; Message API: our 'no reply' per node;
    or no failure recorded at all."""
    failures = [] if silence is None else [Failure(f"{silence} (600 s)", node) for node in (11, 12, 13)]
    driver = make_driver("pf-xab", num_clients=3, horizon=1000, alpha=0.5, seed=0, nu1=1.0, rho=0.5, max_depth=None,
                         min_fraction=0.5, round_timeout=600.0, federation=None)
    explain_silence(driver, 1, Exchange(failures=failures))
    assert driver.stop_reason is not None
    assert driver.stop_reason.startswith("phase 1: none of the 3 clients replied within the round timeout; ")
    assert "\n" not in driver.stop_reason


def test_an_exchange_with_any_reply_or_error_is_left_to_the_quorum_rule() -> None:
    driver = make_driver("pf-xab", num_clients=3, horizon=1000, alpha=0.5, seed=0, nu1=1.0, rho=0.5, max_depth=None,
                         min_fraction=0.5, round_timeout=600.0, federation=None)
    explain_silence(driver, 1, Exchange(failures=[Failure("client 0: objective raised", 11)]))
    explain_silence(driver, 2, Exchange())  # later phases: lost clients, not a Ray that is not ours
    assert driver.stop_reason is None


# -- a real Ray head, then the docs' app through `flwr run .` ----------------------------------------------
def processes_using(directory: Path) -> list[int]:
    """Live processes that name ``directory`` in their environment or command line, or hold a file under it.

    Ray's agents rewrite their command line and environment (``ray::DashboardAgent``), so
    their open files are what ties them to this test's head.
    """
    needle, found = str(directory), []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        with contextlib.suppress(psutil.Error):  # it ended, or is not ours to read
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            named = needle in " ".join(process.cmdline()) or any(
                needle in f"{name}={value}" for name, value in process.environ().items())
            if named or any(file.path.startswith(needle) for file in process.open_files()):
                found.append(process.pid)
    return found


def stop_all(directory: Path, grace: float = 5.0) -> list[int]:
    """SIGTERM, then SIGKILL, everything :func:`processes_using` finds; what is left."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in processes_using(directory):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + patient(wait)
        while processes_using(directory) and time.monotonic() < deadline:
            time.sleep(0.2)
    return processes_using(directory)


def start_ray_head(env: dict[str, str]) -> None:
    """``ray start --head`` as a user would, on free ports (no other helper's Ray is touched)."""
    command = [str(Path(sys.executable).with_name("ray")), "start", "--head", "--port", "0", "--num-cpus", "1",
               "--include-dashboard=false", "--disable-usage-stats",
               "--ray-client-server-port", str(free_port()), "--dashboard-agent-listen-port", str(free_port())]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=patient(180))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def timed_flwr_run(command: list[str], cwd: Path, env: dict[str, str], limit: float | None = None) -> tuple[str, float]:
    """Run ``flwr run --stream`` (killed after ``limit`` s); its output, and the seconds from its
    'Successfully started run' line to its end (``inf`` if it never got there or was killed)."""
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    killer = threading.Timer(patient(240.0) if limit is None else limit, process.kill)
    killer.start()
    lines, started = [], None
    try:
        for line in process.stdout:
            lines.append(line)
            if started is None and "Successfully started run" in line:
                started = time.monotonic()
        killed = process.wait() < 0
    finally:
        killer.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()
    seconds = time.monotonic() - started if started is not None and not killed else float("inf")
    return "".join(lines), seconds


@pytest.mark.exhaustive  # default tier: the diagnosis and its line without starting Ray (above)
@pytest.mark.ray
@pytest.mark.loopback  # flwr run's local SuperLink
@pytest.mark.timeout(600)
def test_the_docs_app_with_a_ray_head_already_running(tmp_path: Path) -> None:
    from tests.test_user_app import write_user_app

    app_dir = tmp_path / "app"
    app_dir.mkdir()
    config = write_user_app(app_dir)
    with temporary_directory("pfxab-head-") as private:
        base = {**os.environ, **QUIET_ENV, "TMPDIR": str(private)}  # Ray's default temp dir: <private>/ray
        base.pop("RAY_TMPDIR", None)
        base.pop("RAY_ADDRESS", None)
        try:
            start_ray_head(base)
            announced = (private / "ray" / "ray_current_cluster").read_text().strip()
            home = private / "flwr"
            env = {**flwr_environment(home), "TMPDIR": str(private)}
            env.pop("RAY_TMPDIR", None)
            env.pop("RAY_ADDRESS", None)

            # 1. as a user would: the run stops within a minute, one line naming the cause and the fix
            results = tmp_path / "first.json"
            command = flwr_run_command(app_dir, config["num-clients"], f"algorithm='fed-pne' results-file='{results}'",
                                       init_cpus=False)
            output, seconds = timed_flwr_run(command, app_dir, env)
            assert seconds < patient(WITHIN), (seconds, output[-3000:])
            print(f"flwr run ended {seconds:.1f} s after the run started, with the stop line")
            lines = [line for line in output.splitlines() if "my-tuning-app:" in line]
            assert len(lines) == 1, output[-3000:]
            assert re.search(f"joined the Ray cluster at {re.escape(announced)} .*fix: `export RAY_ADDRESS=local`",
                             lines[0]), lines[0]
            assert "RAY_ADDRESS=local" in json.loads(results.read_text())["stopped"]
            assert "Traceback" not in output, output[-3000:]

            # the bundled app on the legacy API (on the same SuperLink) stops the same way
            bundled = write_app_project(private / "bundled")
            run_config = run_config_argument(RunConfig(num_clients=3, horizon=2000),
                                             AppOptions(api="legacy", out_dir=str(tmp_path / "bundled-out")))
            output, seconds = timed_flwr_run(flwr_run_command(bundled.parent, 3, run_config, init_cpus=False),
                                             bundled.parent, env)
            assert seconds < patient(WITHIN), (seconds, output[-3000:])
            stops = [line for line in output.splitlines() if "run stopped: " in line]
            assert stops and "joined the Ray cluster at" in stops[0] and "RAY_ADDRESS=local" in stops[0], output[-3000:]
            assert not (tmp_path / "bundled-out").exists()

            # 2. the fix: stop the SuperLink (it keeps the environment it started with), export RAY_ADDRESS=local
            assert stop_local_superlink(home) == []
            results = tmp_path / "fixed.json"
            command = flwr_run_command(app_dir, config["num-clients"], f"algorithm='fed-pne' results-file='{results}'",
                                       init_cpus=False)
            done = subprocess.run(command, cwd=app_dir, env={**env, "RAY_ADDRESS": "local"}, capture_output=True,
                                  text=True, timeout=patient(300))
            assert done.returncode == 0 and results.exists(), done.stdout[-3000:]
            check_outcome(json.loads(results.read_text()), expected_run(app_dir, config, "fed-pne"))
            assert np.isfinite([row["final_point"] for row in json.loads(results.read_text())["clients"]]).all()
            assert (private / "ray" / "ray_current_cluster").read_text().strip() == announced  # the head untouched
        finally:
            left = stop_all(private)
        assert left == []
