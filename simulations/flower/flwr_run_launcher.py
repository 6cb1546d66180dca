"""``pfxab simulate``: run the app through ``flwr run`` with nothing done by hand, and clean up.

It provides what ``flwr run`` needs on a fresh machine (an app directory, a private ``FLWR_HOME``
and ``RAY_TMPDIR``, free ports, the federation's size, the checked run config), streams the log,
says how the run ended, and stops every process the run started, even when killed
(:mod:`pfxab_flower.simulations.flower.leftover_processes`). Each step and why: docs/flower.md.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import IO, Any

import tomli_w

from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.processes.lifetime import with_parent
from pfxab_flower.schema.catalogue import PARAMETERS, RENAMED, refuse_renamed
from pfxab_flower.schema.run_config import AppOptions, RunConfig, to_run_config
from pfxab_flower.simulations.flower.flwr_run_log import readable_lines
from pfxab_flower.simulations.flower.flwr_run_progress import PhaseBar
from pfxab_flower.simulations.flower.leftover_processes import exit_on_signals, stop_processes, watchdog
from pfxab_flower.simulations.flower.simulation_environment import QUIET_ENV, check_num_cpus, temporary_directory

#: The server's log line when it stops a run (``ServerDriver.stop``): ``pfxab: run stopped: <why>``.
STOP_MARK = "run stopped: "
#: ``flwr run``'s line naming the run it submitted.
RUN_STARTED = re.compile(r"Successfully started run (\d+)")


@dataclass(frozen=True)
class SimulateOutcome:
    """How a ``flwr run`` ended: its exit status, the summary it wrote (if any), leftovers."""

    returncode: int
    summary_path: Path | None
    left_running: list[int]
    pyproject_restored: bool
    wall_seconds: float
    stop_reason: str | None = None  # why the server stopped the run, from its log line (nothing is written then)
    flower_status: str | None = None  # Flower's record of a run that wrote nothing: ``flwr ls`` status and details
    unsaved: dict[str, Any] | None = None  # a finished run whose files could not be written: ``error``, ``summary``


def run_config_argument(config: RunConfig, options: AppOptions) -> str:
    """``--run-config``'s argument: ``key=value`` pairs, each value in TOML syntax (as tomli-w writes it)."""
    return run_config_text(to_run_config(config, options))


def run_config_text(values: dict[str, Any]) -> str:
    """``key=value`` pairs of ``values`` for ``--run-config``, each value in TOML syntax."""
    return " ".join(tomli_w.dumps({key: value}).rstrip("\n").replace(" = ", "=", 1) for key, value in values.items())


#: The last ports :func:`free_port` handed out in this process (only a recent one can still be unbound).
_HANDED_OUT: collections.deque[int] = collections.deque(maxlen=1024)


def free_port() -> int:
    """A loopback port that nothing listens on, and that this process has not handed out recently.

    The port is free when the kernel gives it, but it is only taken when the process it is meant
    for binds it: a second pick in between (the next SuperNode of a deployment, started before the
    first has bound its port) can get the same number from the kernel, and one of the two then
    fails with "address already in use" (seen once in CI: a SuperNode that never joined). So a
    number handed out recently is asked for again.
    """
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.append(port)
            return port


def flwr_executable() -> str:
    """The ``flwr`` next to this Python (the project's environment), else the one on ``PATH``."""
    local = Path(sys.executable).with_name("flwr")
    found = str(local) if local.exists() else shutil.which("flwr")
    if found is None:
        raise ConfigError("flwr is not installed; allowed: pip install -e . (installs flwr[simulation])")
    return found


#: Largest ``pyproject.toml`` read from an app directory (a real one is a few kB).
MAX_PYPROJECT_BYTES = 1 << 20


def check_app_dir(app_dir: Path) -> Path:
    """The app's ``pyproject.toml``: a regular UTF-8 file declaring ``[tool.flwr.app]``; one line otherwise."""
    pyproject = app_dir / "pyproject.toml"
    try:
        regular = pyproject.is_file() and pyproject.stat().st_size <= MAX_PYPROJECT_BYTES
        text = pyproject.read_bytes().decode("utf-8") if regular else ""
    except (OSError, UnicodeDecodeError):  # unreadable, a name too long, not UTF-8 text
        text = ""
    if "[tool.flwr.app" not in text:
        raise ConfigError(f"{spelled('app_dir')}={str(app_dir)!r} is invalid; allowed: a directory whose "
                          f"pyproject.toml has [tool.flwr.app] (a Flower app), or no {spelled('app_dir')}")
    return pyproject


def declared_config(pyproject: Path) -> dict[str, Any]:
    """The run-config keys an app declares (``[tool.flwr.app.config]``, nested tables as ``a.b``), with defaults."""
    import tomllib

    try:
        table = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["flwr"]["app"].get("config", {})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        table = {}

    def flat(values: Any, prefix: str = "") -> dict[str, Any]:
        if not isinstance(values, dict):
            return {}
        out: dict[str, Any] = {}
        for key, value in values.items():
            out.update(flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
        return out

    return flat(table)


def app_run_config(pyproject: Path, values: dict[str, Any], given: frozenset[str]) -> dict[str, Any]:
    """What ``pfxab simulate`` passes a user's app: the keys the user gave that the app declares (Flower refuses a
    run whose ``--run-config`` has a key the app does not declare, with only ``[code: 15] Invalid run
    configuration.``), and ``out-dir`` (``--out``) if it declares one; a given key it does not declare is one line
    naming it and what the app declares."""
    declared = declared_config(pyproject)
    given = given | ({"out-dir"} if "out-dir" in declared else set())  # where it writes, if it says
    for key in sorted(given):
        if key not in declared:
            raise ConfigError(f"--{key}={values.get(key)!r} is invalid with app-dir={str(pyproject.parent)!r}: the "
                              f"app declares no run-config key {key!r} (its [tool.flwr.app.config] declares: "
                              f"{', '.join(declared) or 'none'}); allowed: the flags of the keys it declares, or "
                              f"{key} = ... added to its pyproject.toml")
    return {key: value for key, value in values.items() if key in given}


def supernodes_of(pyproject: Path | None, config: RunConfig, given: frozenset[str]) -> int:
    """The federation's size: ``--num-clients`` if given, else a user's app's own ``num-clients`` default, else the
    config's. An app that declares the former key ``clients`` instead is one line naming ``num-clients``."""
    key = PARAMETERS["num_clients"].key
    if pyproject is None or key in given:
        return config.num_clients
    keys = declared_config(pyproject)
    if key not in keys:
        for former in (k for k in keys if k.replace("-", "_") in RENAMED):
            refuse_renamed(former, f"run-config key {former!r} in {str(pyproject)!r}", spelling="key")
    declared = keys.get(key)
    return declared if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0 else \
        config.num_clients


#: The generated app's components: the installed package's ServerApp and ClientApp.
COMPONENTS = {"serverapp": "pfxab_flower.simulations.server_app:app",
              "clientapp": "pfxab_flower.simulations.client_app:app"}


def app_config_defaults() -> dict[str, Any]:
    """``[tool.flwr.app.config]`` from the code's defaults: every run-config key, unset ones as ``""``.

    ``flwr run`` silently drops a ``--run-config`` key that the app's config does
    not declare, so the optional fields (``max-depth``...) must be there too.
    """
    unset = {name.replace("_", "-"): "" for name in RunConfig.names()}
    return {**unset, **to_run_config(RunConfig(), AppOptions())}


def write_app_project(directory: Path) -> Path:
    """Write the minimal Flower app project ``flwr run`` needs into ``directory``; its ``pyproject.toml``.

    Only metadata: the FAB ``flwr run`` builds from it holds no code, and the
    SuperLink's processes import the components from the installed package.
    """
    try:
        version = metadata.version("pfxab-flower")
    except metadata.PackageNotFoundError:
        version = "0.0.0"
    project = {
        "project": {"name": "pfxab-flower-app", "version": version, "license": "Apache-2.0",
                    "description": "pfxab simulate's Flower app (code from the installed pfxab-flower)"},
        "tool": {"flwr": {"app": {"publisher": "pfxab", "components": COMPONENTS, "config": app_config_defaults()}}},
    }
    directory.mkdir(parents=True, exist_ok=True)
    pyproject = directory / "pyproject.toml"
    pyproject.write_text(tomli_w.dumps(project), encoding="utf-8")
    return pyproject


def simulate(
    config: RunConfig,
    options: AppOptions,
    *,
    app_dir: Path | None = None,
    num_cpus: float = 1.0,
    ray_address: str | None = None,
    log: IO[str] = sys.stderr,
    given: frozenset[str] = frozenset(),
) -> SimulateOutcome:
    """Run ``config`` through ``flwr run <app> --stream`` and stop everything it started.

    ``app_dir`` is a user's own Flower app; without it a generated one is used. A user's app is
    given only the run-config keys the user set (``given``, kebab-case) and it declares (one
    line before anything starts for one it does not: :func:`app_run_config`), and its own
    ``num-clients`` as the federation's size unless ``--num-clients`` was given. With
    ``ray_address`` the simulation joins that Ray cluster: Flower 1.41's federation
    config has no address key, so ``RAY_ADDRESS`` goes into the environment of the
    SuperLink (which starts the simulation, whose ``ray.init()`` reads it), and no
    ``init-args-num-cpus`` is sent (a cluster's resources are its own).
    """
    started = time.perf_counter()
    user_pyproject = check_app_dir(app_dir.resolve()) if app_dir is not None else None
    check_num_cpus(num_cpus, ray_address)
    out_dir = Path(options.out_dir).expanduser().resolve()
    options = replace(options, out_dir=str(out_dir))  # every other option (api, faults) kept
    run_config = to_run_config(config, options) if user_pyproject is None else \
        app_run_config(user_pyproject, to_run_config(config, options), given)
    summary = out_dir / "summary.json"
    previous = summary.stat().st_mtime_ns if summary.exists() else None
    with (
        exit_on_signals(),  # Ctrl-C, SIGTERM, SIGHUP unwind through the clean-up below
        temporary_directory("pfxab-flwr-") as home,
        temporary_directory("pfxab-ray-") as ray_dir,
        watchdog(str(home), [home, ray_dir]),  # the clean-up, should this process be killed
    ):
        from pfxab_flower.flower_shared.flower_internals import write_flower_config  # imports Flower

        write_flower_config(home)
        pyproject = user_pyproject or write_app_project(home / "pfxab-app")
        app_dir = pyproject.parent
        original = pyproject.read_bytes()
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
        if ray_address is not None:
            env["RAY_ADDRESS"] = ray_address
        supernodes = supernodes_of(user_pyproject, config, given)
        command = [
            flwr_executable(), "run", str(app_dir), "--stream",
            "--federation-config", federation_config(supernodes, num_cpus, ray_address),
            *(["--run-config", run_config_text(run_config)] if run_config else []),
        ]
        returncode = 1
        stop_reason: str | None = None
        unsaved: dict[str, Any] | None = None
        run_id: str | None = None
        flower_status: str | None = None
        left: list[int] = []
        superlink: subprocess.Popen[bytes] | None = None
        try:
            # our child: it dies with us, whatever kills us; a user's app writes relative paths where simulate runs
            superlink = start_local_superlink(env, home, Path.cwd() if user_pyproject is not None else None)
            # a session of its own: Ctrl-C reaches only us, and we stop everything below
            process = subprocess.Popen(with_parent(command), cwd=app_dir, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, start_new_session=True)
            shown = PhaseBar(log)  # the log as it streams, and on a terminal a bar of the phases below it
            try:
                assert process.stdout is not None
                for line in readable_lines(process.stdout, keep_colour=log.isatty()):
                    if unsaved is None and (unsaved := unsaved_result(line)) is not None:
                        continue  # the summary is printed by the command, not buried in the log
                    shown.write(line)
                    if STOP_MARK in line and stop_reason is None:
                        stop_reason = line.split(STOP_MARK, 1)[1].strip()
                    if run_id is None and (started_run := RUN_STARTED.search(line)):
                        run_id = started_run[1]
                returncode = process.wait()
                if stop_reason is None and unsaved is None and run_id is not None and not _written(summary, previous):
                    flower_status = run_status(run_id, env, app_dir)  # `flwr run` exits 0 whatever happened
            finally:
                shown.close()
                if process.poll() is None:
                    _end(process)
        finally:
            left = stop_processes(str(home))
            if superlink is not None:
                superlink.wait()  # stopped above; reap it
            restored = pyproject.read_bytes() != original
            if restored:
                pyproject.write_bytes(original)
    return SimulateOutcome(returncode, summary if _written(summary, previous) else None, left, restored,
                           time.perf_counter() - started, stop_reason, flower_status, unsaved)


def unsaved_result(line: str) -> dict[str, Any] | None:
    """The ``error`` and ``summary`` of the ServerApp's line for a result it could not write, if ``line`` is one."""
    from pfxab_flower.simulations.server_app import UNSAVED_MARK

    if UNSAVED_MARK not in line:
        return None
    try:
        record = json.loads(line.split(UNSAVED_MARK, 1)[1])
    except ValueError:
        return None
    ok = isinstance(record, dict) and isinstance(record.get("error"), str) and isinstance(record.get("summary"), dict)
    return record if ok else None


#: Seconds the SuperLink this module starts has to answer its health check (flwr's own wait is 15 s).
SUPERLINK_STARTUP_TIMEOUT = 60.0


def start_local_superlink(env: dict[str, str], home: Path, cwd: Path | None = None) -> subprocess.Popen[bytes] | None:
    """Start the local SuperLink ``flwr run`` would start, but as our child that dies with us; ``None`` if it fails.

    ``flwr run`` starts it detached, so it outlived a SIGKILLed ``pfxab simulate`` whose
    watcher was killed too (with its superexec, ``flwr-simulation`` and Ray: 11 processes).
    Started here with the same command line, ports and ``FLWR_HOME``, through
    :func:`~pfxab_flower.processes.lifetime.with_parent`, it gets SIGTERM when this process dies, and ``flwr run``
    finds it
    running and uses it. If it does not come up, it is stopped and ``flwr run`` starts its own. ``cwd`` (default
    ``home``) is where the runs' ServerApps start: a user's app resolves a relative results path there.
    """
    port = env["FLWR_LOCAL_SUPERLINK_HTTP_API_PORT"]
    runtime = home / "local-superlink"  # flwr's own layout (flwr.cli.local_superlink)
    runtime.mkdir(parents=True, exist_ok=True)
    command = [
        "flower-superlink", "--insecure", "--simulation", "--isolation", "subprocess",
        "--control-api-address", f"127.0.0.1:{env['FLWR_LOCAL_CONTROL_API_PORT']}",
        "--host", "127.0.0.1", "--port", port, "--log-file", str(runtime / "superlink.log"),
        "--log-rotation-interval-hours", "24", "--log-rotation-backup-count", "7",
        "--database", str(runtime / "state.db"),
    ]
    try:
        process = subprocess.Popen(with_parent(command), env={**env, "FLWR_DISABLE_UPDATE_CHECK": "1"}, cwd=cwd or home,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None
    try:
        wait_for_health(int(port), process, SUPERLINK_STARTUP_TIMEOUT)
    except (RuntimeError, TimeoutError):  # it did not come up: stopped, and `flwr run` starts its own
        _end(process)
        return None
    return process


def wait_for_health(port: int, process: subprocess.Popen[bytes], timeout: float, ca: Path | None = None) -> None:
    """Wait until the SuperLink ``process`` answers on ``/health`` (https trusting ``ca``, if given; else http).

    Raises ``RuntimeError`` if it exits first, ``TimeoutError`` if it takes longer than ``timeout`` seconds.
    """
    url = f"{'https' if ca is not None else 'http'}://127.0.0.1:{port}/health"
    context = ssl.create_default_context(cafile=str(ca)) if ca is not None else None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"flower-superlink exited with status {process.returncode}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2, context=context) as response:
            if response.status == 200:
                return
        time.sleep(0.2)
    raise TimeoutError(f"flower-superlink did not answer on port {port} within {timeout:.0f} s")


def _written(summary: Path, previous: int | None) -> bool:
    """Whether this run wrote ``summary`` (it did not exist before, or it changed)."""
    return summary.exists() and summary.stat().st_mtime_ns != previous


def run_status(run_id: str, env: dict[str, str], cwd: Path) -> str | None:
    """How the local SuperLink recorded run ``run_id`` (``flwr ls``): e.g. ``finished:failed (<details>)``.

    The one place Flower says how a run really ended: ``flwr run`` exits 0 whatever
    happened, and a ServerApp that raised leaves only a traceback in the log.
    """
    command = [flwr_executable(), "ls", "--run-id", run_id, "--format", "json"]
    try:
        done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
        run = json.loads(done.stdout)["runs"][0]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError):
        return None
    details = " ".join(str(run.get("status-details") or "").split())
    return f"{run.get('status', 'unknown')}" + (f" ({details})" if details else "")


def federation_config(supernodes: int, num_cpus: float, ray_address: str | None) -> str:
    """``--federation-config``: the nodes, and CPUs per client as whole logical CPUs.

    Flower's federation config carries CPUs as whole numbers (a ``uint32``: ``client-resources-num-cpus=0.25``
    failed with ``'float' object cannot be interpreted as an integer``), so a fraction ``f`` of a core per client
    becomes one logical CPU per client out of ``cores / f`` (at most one per node): Ray then runs that many
    clients at once, whose evaluations overlap (a site that waits does not hold the others). On a cluster
    (``ray_address``) its resources are its own: a whole number only.
    """
    cores = os.cpu_count() or 1
    if ray_address is not None:
        if not float(num_cpus).is_integer():
            raise ConfigError(f"{spelled('num_cpus')}={num_cpus!r} is invalid with {spelled('ray_address')}; "
                              "allowed: a whole number of CPUs (a Ray cluster's CPUs are its own)")
        return f"num-supernodes={supernodes} client-resources-num-cpus={int(num_cpus)}"
    if float(num_cpus).is_integer():
        return f"num-supernodes={supernodes} client-resources-num-cpus={int(num_cpus)} init-args-num-cpus={cores}"
    logical = max(1, min(round(cores / num_cpus), supernodes))
    return f"num-supernodes={supernodes} client-resources-num-cpus=1 init-args-num-cpus={logical}"


def _end(process: subprocess.Popen[Any]) -> None:
    """Stop a process we started: SIGTERM, then SIGKILL if it has not ended within 5 s."""
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
