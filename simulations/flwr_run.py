"""``pfxab simulate``: run the app through ``flwr run .`` with nothing done by hand, and clean up.

What ``flwr run`` needs on a fresh machine (see ``FLOWER-NOTES.md``), provided here:

* a private, temporary ``FLWR_HOME`` (the local SuperLink's state, the installed app) and
  ``RAY_TMPDIR``, both removed afterwards, and free local SuperLink ports, so the run
  starts its own SuperLink and never talks to someone else's;
* ``FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1`` (the app's dependencies are
  already installed; ``flwr`` would otherwise try to download them) and the quiet variables;
* ``--federation-config "num-supernodes=M client-resources-num-cpus=..."`` (the default
  federation has 2 nodes) and the run's parameters as ``--run-config``, validated first;
* ``--stream`` so the log (one line per phase) is shown as it happens;
* on success, failure or Ctrl-C: stop the SuperLink, superexec, flwr-simulation and Ray
  processes this run started (found by the temporary ``FLWR_HOME`` in their environment),
  and check ``pyproject.toml`` was not rewritten.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from pfxab_flower.config import RunConfig
from pfxab_flower.errors import ConfigError
from pfxab_flower.simulations.environment import QUIET_ENV, check_num_cpus, temporary_directory
from pfxab_flower.simulations.processes import stop_processes
from pfxab_flower.strategies.run_config import AppOptions, to_run_config


@dataclass(frozen=True)
class SimulateOutcome:
    """How a ``flwr run`` ended: its exit status, the summary it wrote (if any), leftovers."""

    returncode: int
    summary_path: Path | None
    left_running: list[int]
    pyproject_restored: bool
    wall_seconds: float


def toml_value(value: Any) -> str:
    """One value in TOML syntax, as ``--run-config`` expects."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))  # a TOML basic string


def run_config_argument(config: RunConfig, options: AppOptions) -> str:
    return " ".join(f"{key}={toml_value(value)}" for key, value in to_run_config(config, options).items())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def flwr_executable() -> str:
    """The ``flwr`` next to this Python (the project's environment), else the one on ``PATH``."""
    local = Path(sys.executable).with_name("flwr")
    found = str(local) if local.exists() else shutil.which("flwr")
    if found is None:
        raise ConfigError("flwr is not installed; allowed: pip install -e . (installs flwr[simulation])")
    return found


def check_app_dir(app_dir: Path) -> Path:
    pyproject = app_dir / "pyproject.toml"
    if not pyproject.is_file() or "[tool.flwr.app" not in pyproject.read_text(encoding="utf-8"):
        raise ConfigError(f"app-dir={str(app_dir)!r} is invalid; allowed: a directory whose pyproject.toml "
                          "has [tool.flwr.app] (the project root)")
    return pyproject


def simulate(
    config: RunConfig,
    options: AppOptions,
    *,
    app_dir: Path,
    num_cpus: float = 1.0,
    log: IO[str] = sys.stderr,
) -> SimulateOutcome:
    """Run ``config`` through ``flwr run app_dir --stream`` and stop everything it started."""
    started = time.perf_counter()
    app_dir = app_dir.resolve()
    pyproject = check_app_dir(app_dir)
    check_num_cpus(num_cpus)
    out_dir = Path(options.out_dir).expanduser().resolve()
    options = replace(options, out_dir=str(out_dir))  # every other option (api, faults) kept
    summary = out_dir / "summary.json"
    previous = summary.stat().st_mtime_ns if summary.exists() else None
    original = pyproject.read_bytes()
    with temporary_directory("pfxab-flwr-") as home, temporary_directory("pfxab-ray-") as ray_dir:
        env = {
            **os.environ,
            **QUIET_ENV,
            "FLWR_HOME": str(home),
            "RAY_TMPDIR": str(ray_dir),
            "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
            "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(free_port()),
            "FLWR_LOCAL_CONTROL_API_PORT": str(free_port()),
            "PFXAB_BASE_DIR": os.getcwd(),
            # flwr starts `flower-superlink` & co. by name: find them next to this Python
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        }
        command = [
            flwr_executable(), "run", str(app_dir), "--stream",
            "--federation-config",
            f"num-supernodes={config.clients} client-resources-num-cpus={_number(num_cpus)} "
            f"init-args-num-cpus={os.cpu_count() or 1}",
            "--run-config", run_config_argument(config, options),
        ]
        returncode = 1
        left: list[int] = []
        try:
            # a session of its own: Ctrl-C reaches only us, and we stop everything below
            process = subprocess.Popen(command, cwd=app_dir, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, start_new_session=True)
            try:
                assert process.stdout is not None
                for line in process.stdout:
                    log.write(line)
                    log.flush()
                returncode = process.wait()
            finally:
                if process.poll() is None:
                    process.terminate()
                    try:
                        process.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()
        finally:
            left = stop_processes(str(home))
            restored = pyproject.read_bytes() != original
            if restored:
                pyproject.write_bytes(original)
    wrote = summary.exists() and summary.stat().st_mtime_ns != previous
    return SimulateOutcome(returncode, summary if wrote else None, left, restored, time.perf_counter() - started)


def _number(value: float) -> str:
    """An integral float as an integer (``flwr`` rejects ``1.0`` where it expects a whole number)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))
