"""What ``pfxab simulate`` shows and says when the server stops a run."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import tomli_w

from pfxab_flower.simulations.flower.flwr_run_launcher import write_app_project
from pfxab_flower.simulations.flower.flwr_run_log import readable_lines
from tests.patience import patient

FLOWER_LOG = [
    "Successfully started run 1\n",
    "\x1b[93mWARNING \x1b[0m:   Since flwr 1.32, default simulated SuperNodes changed from 10 to 2.\n",
    "pfxab: pf-xab on garland: M=3 alpha=0.5 T=20000 seed=0\n",
    "\x1b[91mERROR \x1b[0m:     An exception was raised when processing a message by RayBackend\n",
    "\x1b[91mERROR \x1b[0m:     \x1b[36mray::ClientAppActor.run()\x1b[39m (pid=1, ip=192.0.2.2)\n",
    '  File "/x/client_app.py", line 161, in __call__\n',
    "pfxab_flower.faults.InjectedFailureError: client 0: injected failure in phase 1 (fail-rate=1.0)\n",
    "\n",
    "The above exception was the direct cause of the following exception:\n",
    "\x1b[91mERROR \x1b[0m:     Traceback (most recent call last):\n",
    "    raise value.as_instanceof_cause()\n",
    "pfxab: phase 1: local-means round failed on a client: client 0: injected failure in phase 1\n",
    "\x1b[92mINFO \x1b[0m:      [ROUND 2/7]\n",
]


def test_the_streamed_log_loses_colour_codes_misleading_notices_and_client_tracebacks() -> None:
    shown = list(readable_lines(FLOWER_LOG))
    assert shown == [
        "Successfully started run 1\n",
        "pfxab: pf-xab on garland: M=3 alpha=0.5 T=20000 seed=0\n",
        "pfxab: phase 1: local-means round failed on a client: client 0: injected failure in phase 1\n",
        "INFO :      [ROUND 2/7]\n",
    ]
    assert all("\x1b" in line for line in readable_lines(FLOWER_LOG[-1:], keep_colour=True))


@pytest.mark.ray
@pytest.mark.loopback  # pfxab simulate's local SuperLink
@pytest.mark.timeout(300)
def test_a_run_the_server_stops_is_one_line_and_exit_2_under_simulate(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "pfxab_flower.simulations.cli.main", "simulate", "--num-clients", "3", "--horizon",
         "20000",
         "--fail-rate", "1.0", "--out", str(out)],
        capture_output=True, text=True, timeout=patient(280), cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr + proc.stdout[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pfxab simulate: error: phase 1: only 0 of 3 clients"), proc.stderr
    assert "Traceback" not in proc.stdout and "\x1b[" not in proc.stdout
    assert not out.exists()


BOOM_SERVER_APP = """from flwr.serverapp import ServerApp

app = ServerApp()


@app.main()
def main(grid, context):
    raise RuntimeError("boom: this ServerApp always fails")
"""


def write_boom_app(directory: Path) -> Path:
    """The bundled app's project (every run-config key declared), with a ServerApp that raises."""
    pyproject = write_app_project(directory)
    project = tomllib.loads(pyproject.read_text())
    project["tool"]["flwr"]["app"]["components"]["serverapp"] = "boom_app:app"
    pyproject.write_text(tomli_w.dumps(project))
    (directory / "boom_app.py").write_text(BOOM_SERVER_APP)
    return directory


@pytest.mark.ray
@pytest.mark.loopback  # pfxab simulate's local SuperLink
@pytest.mark.timeout(300)
def test_a_run_that_ends_without_a_result_names_flowers_record_and_exits_1(tmp_path: Path) -> None:
    """``flwr run`` exits 0 after a ServerApp raised; ``pfxab simulate`` asks Flower (``flwr ls``) and says so."""
    app = write_boom_app(tmp_path / "app")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "pfxab_flower.simulations.cli.main", "simulate", "--num-clients", "2", "--horizon",
         "2000",
         "--app-dir", str(app), "--out", str(out)],
        capture_output=True, text=True, timeout=patient(280), cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr + proc.stdout[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert lines == ["pfxab simulate: error: the Flower run ended finished:failed (Simulation failed with exception: "
                     "boom: this ServerApp always fails) and wrote no summary.json (see the log above)"], proc.stderr
