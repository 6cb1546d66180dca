"""``pfxab simulate`` and the Flower app config: run-config keys, validation, clean-up.

Most checks need no Ray; one end-to-end ``flwr run .`` (marked ``ray``) checks the
results are written and that no SuperLink, superexec, flwr-simulation or Ray
process and no temporary directory is left behind, and that pyproject is unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from pfxab_flower.errors import ConfigError
from pfxab_flower.flower_shared import flower_internals
from pfxab_flower.schema.run_config import APP_DEFAULTS, AppOptions, RunConfig, parse_run_config
from pfxab_flower.simulations.cli.main import main
from pfxab_flower.simulations.flower import flwr_run_launcher as flwr_run
from pfxab_flower.simulations.flower.leftover_processes import processes_with_marker, stop_processes
from pfxab_flower.simulations.flower.simulation_environment import check_num_cpus
from tests.patience import patient

ROOT = Path(__file__).resolve().parents[1]


def app_table() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["flwr"]


def test_pyproject_app_config_is_every_run_option_and_parses_to_the_defaults() -> None:
    flwr = app_table()
    assert "federations" not in flwr  # legacy table: `flwr run` would rewrite pyproject
    assert flwr["app"]["components"] == {"serverapp": "pfxab_flower.simulations.server_app:app",
                                         "clientapp": "pfxab_flower.simulations.client_app:app"}
    keys = set(flwr["app"]["config"])
    assert keys == {name.replace("_", "-") for name in RunConfig.names()} | set(APP_DEFAULTS)
    config, options = parse_run_config(flwr["app"]["config"])
    assert config == RunConfig()
    assert options == AppOptions()


def test_run_config_argument_round_trips_through_flwrs_parser() -> None:
    from flwr.common.config import parse_config_args

    config = RunConfig(problem="doublesine", algorithm="pf-pne", num_clients=7, alpha=0.9, horizon=12345, seed=4,
                       max_depth=6, pf_pne_eps=0.25)
    options = AppOptions(out_dir="/tmp/some dir/out", round_timeout=30.0)
    parsed = parse_config_args([flwr_run.run_config_argument(config, options)])
    assert parse_run_config(parsed) == (config, options)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"alpha": 1.5}, "alpha=1.5 is invalid"),
        ({"problem": "rosenbrock"}, "problem='rosenbrock' is invalid"),
        ({"round-timeout": 0}, "round-timeout=0 is invalid"),
        ({"out-dir": ""}, "out-dir='' is invalid"),
        ({"colour": "red"}, "unknown parameter 'colour'"),
    ],
)
def test_bad_run_config_is_one_line_error(values: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_run_config(values)


def test_client_resources_must_fit_the_machine() -> None:
    assert check_num_cpus(1) == 1.0
    for bad in (0, -1, (os.cpu_count() or 1) + 1, True):
        with pytest.raises(ConfigError, match="num_cpus"):
            check_num_cpus(bad)


def test_simulate_rejects_bad_flags_before_starting_anything(capsys, tmp_path) -> None:
    assert main(["simulate", "--alpha", "2", "--out", str(tmp_path)]) == 2
    assert "alpha=2.0 is invalid" in capsys.readouterr().err
    assert main(["simulate", "--num-cpus", "64", "--out", str(tmp_path)]) == 2
    assert "num-cpus=64.0 is invalid" in capsys.readouterr().err
    assert main(["simulate", "--app-dir", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert "app-dir" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_generated_app_is_a_flower_app_of_the_installed_code_with_the_code_defaults(tmp_path) -> None:
    from flwr.cli.build import build_fab_from_files
    from flwr.common.config import validate_config

    app_dir = tmp_path / "app"
    pyproject = flwr_run.write_app_project(app_dir)
    assert [p.name for p in app_dir.iterdir()] == ["pyproject.toml"]  # no code: it comes from the package
    project = tomllib.loads(pyproject.read_text())
    assert validate_config(project, check_module=True, project_dir=app_dir)[:2] == (True, [])
    fab, _ = build_fab_from_files({"pyproject.toml": pyproject})
    assert fab
    generated = project["tool"]["flwr"]["app"]
    assert generated["components"] == app_table()["app"]["components"]
    assert set(generated["config"]) == set(app_table()["app"]["config"])  # flwr drops undeclared overrides
    assert parse_run_config(generated["config"]) == (RunConfig(), AppOptions())


def test_the_flower_home_starts_with_flowers_default_config_so_flwr_has_nothing_to_announce(
        tmp_path, monkeypatch, capsys) -> None:
    from flwr.cli.flower_config import init_flwr_config, read_superlink_connection

    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "empty"))
    init_flwr_config()  # what `flwr run` does first, in a home without the file
    assert "Flower configuration not found" in capsys.readouterr().out
    monkeypatch.setenv("FLWR_HOME", str(tmp_path))
    written = flower_internals.write_flower_config(tmp_path)
    init_flwr_config()
    assert capsys.readouterr().out == ""  # found: no note in pfxab simulate's log
    assert written.read_bytes() == (tmp_path / "empty" / written.name).read_bytes()  # Flower's own default
    assert read_superlink_connection().name == "local"  # and flwr reads it as its local SuperLink


def test_stop_processes_stops_exactly_the_marked_ones(tmp_path) -> None:
    marker = str(tmp_path / "marker")
    marked = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env={**os.environ, "M": marker})
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # Popen returns before the child's environment reads back (at close-on-exec, before the kernel sets it up)
        deadline = time.monotonic() + patient(30)
        while processes_with_marker(marker) != [marked.pid] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_with_marker(marker) == [marked.pid]
        assert stop_processes(marker, grace=5.0) == []
        assert marked.wait(timeout=patient(5)) != 0
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
        marked.kill()
        marked.wait()


@pytest.fixture
def short_tmpdir() -> Iterator[Path]:
    """A private temporary root short enough for Ray's socket paths (``/tmp/pt...``), removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="pt", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.ray
@pytest.mark.loopback  # pfxab simulate's local SuperLink
@pytest.mark.timeout(240)
def test_pfxab_simulate_runs_flwr_run_and_leaves_nothing_behind(tmp_path, monkeypatch, short_tmpdir) -> None:
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    monkeypatch.setenv("TMPDIR", str(short_tmpdir))  # its own temporary root: another job's files are not ours
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "results"
    code = subprocess.run(
        [sys.executable, "-m", "pfxab_flower.simulations.cli.main", "simulate", "--app-dir", str(ROOT),
         "--num-clients", "2", "--horizon", "3000", "--algorithm", "fed-pne", "--out", "results", "--json"],
        capture_output=True, text=True, timeout=patient(220),
    )
    assert code.returncode == 0, code.stderr[-2000:]
    summary = json.loads(code.stdout)
    assert summary == json.loads((out / "summary.json").read_text())
    assert summary["engine"] == "flower" and summary["algorithm"] == "fed-pne" and summary["num_clients"] == 2
    assert "phase 1 (depth 1)" in code.stderr  # one readable line per phase, streamed
    assert {"clients.csv", "curve.csv", "phases.csv", "communication.csv"} <= {p.name for p in out.iterdir()}
    assert (ROOT / "pyproject.toml").read_bytes() == pyproject
    assert list(short_tmpdir.iterdir()) == []  # FLWR_HOME and RAY_TMPDIR removed
    assert "processes still running" not in code.stderr


@pytest.mark.exhaustive  # default tier: the generated app, simulate through flwr run (above); and .ci/wheel-check
@pytest.mark.ray
@pytest.mark.loopback  # pfxab simulate's local SuperLink
@pytest.mark.timeout(240)
def test_pfxab_simulate_works_outside_a_clone(tmp_path, short_tmpdir) -> None:
    """No --app-dir, run from a directory that is not the repository: the generated app is used."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"TMPDIR": str(short_tmpdir)}
    code = subprocess.run(
        [sys.executable, "-m", "pfxab_flower.simulations.cli.main", "simulate", "--num-clients", "2", "--horizon",
         "2000",
         "--out", str(tmp_path / "out")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=patient(220),
    )
    assert code.returncode == 0, code.stderr[-2000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["engine"] == "flower" and summary["num_clients"] == 2 and summary["horizon"] == 2000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing written in the working directory
    assert "Flower configuration not found" not in code.stdout + code.stderr  # the log holds only the run
    assert list(short_tmpdir.iterdir()) == []  # its temporary directories removed
