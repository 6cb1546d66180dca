"""Issue 47 (the fourth attack), classes 10 and 14: Ray's sockets and agents.

Class 10: a ``TMPDIR`` of 26-40 characters made ``pfxab run --engine flower`` print three tracebacks
(``AF_UNIX path length cannot exceed 107 bytes``) and hang, and ``pfxab simulate`` fail after 10 s: the
rule for a temporary root short enough for Ray assumed 40 characters, where Ray's socket paths need the
root to be at most 107 - 82 - (digits of the largest pid) bytes (measured: 28 characters failed with
4-digit pids). Class 14: an interrupted ``run --engine flower`` left ``ray::DashboardAgent`` and
``ray::RuntimeEnvAgent`` running for about a minute: Ray renames them (``setproctitle``), which wipes the
environment and command line the clean-up recognised them by.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pfxab_flower.errors import ConfigError
from pfxab_flower.simulations.flower import simulation_environment as environment
from pfxab_flower.simulations.flower.leftover_processes import alive, processes_with_marker, stop_processes
from tests.conftest import PFXAB
from tests.patience import patient


def with_tmpdir(monkeypatch, root: str) -> None:
    monkeypatch.setenv("TMPDIR", root)
    monkeypatch.setattr(tempfile, "tempdir", None)  # tempfile caches the first answer


@pytest.mark.parametrize("length", [26, 28, 33, 40, 60])
def test_a_tmpdir_too_long_for_rays_sockets_is_not_used(monkeypatch, length):
    root = Path("/tmp/" + f"a47-{os.getpid()}-".ljust(length - 5, "d"))
    root.mkdir(exist_ok=True)
    try:
        with_tmpdir(monkeypatch, str(root))
        assert len(str(root)) == length > environment.longest_temp_root()
        assert environment.short_temp_root() == "/tmp"
    finally:
        root.rmdir()


def test_a_short_tmpdir_is_used_and_the_rule_is_rays_measured_path(monkeypatch):
    short = Path("/tmp") / f"p47{os.getpid()}"[:8]
    short.mkdir(exist_ok=True)
    try:
        with_tmpdir(monkeypatch, str(short))
        assert environment.short_temp_root() == str(short)
    finally:
        short.rmdir()
    # ROOT/pfxab-ray-XXXXXXXX/ray/session_2026-11-27_13-04-41_423260_PID/sockets/plasma_store.1 fits 107 bytes
    digits = len(Path("/proc/sys/kernel/pid_max").read_text().strip())
    root = "r" * environment.longest_temp_root()
    socket = f"{root}/pfxab-ray-abcdefgh/ray/session_2026-11-27_13-04-41_423260_{'9' * digits}/sockets/plasma_store.1"
    assert len(socket) == environment.SOCKET_PATH_MAX


def test_no_usable_short_root_is_one_line_before_ray_starts(tmp_path, monkeypatch):
    long_root = tmp_path / ("x" * 40)
    long_root.mkdir()
    with_tmpdir(monkeypatch, str(long_root))
    monkeypatch.setattr(environment.os, "access", lambda path, mode: path != "/tmp")
    with pytest.raises(ConfigError, match=r"^TMPDIR='.*' is invalid \(\d+ bytes: Ray's sockets below it would be "
                                          r"longer than 107 bytes, and /tmp is not a writable directory\); allowed: "
                                          r"a TMPDIR of at most \d+ bytes, or a writable /tmp$"):
        environment.short_temp_root()


def _renamed_process(name: str, holding: Path, environ: dict[str, str]) -> subprocess.Popen[str]:
    """A process that renames itself as Ray does (``prctl(PR_SET_NAME)``) and holds ``holding`` open; its command
    line and environment do not name ``holding``."""
    code = ("import ctypes, sys, time\n"
            "path = sys.stdin.readline().strip()\n"
            "f = open(path, 'a')\n"
            f"ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\n"
            "print('ready', flush=True)\n"
            "time.sleep(120)\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               env=environ)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(f"{holding}\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "ready"
    return process


def test_a_process_ray_renamed_is_found_by_the_files_it_holds_and_stopped(tmp_path):
    """Before: ``ray::DashboardAgent`` (renamed, its environment wiped) escaped the clean-up for a minute."""
    ray_dir = tmp_path / "pfxab-ray-fake"
    (ray_dir / "logs").mkdir(parents=True)
    plain_env = {"PATH": os.environ["PATH"]}
    agent = _renamed_process("ray::Dashboard", ray_dir / "logs" / "dashboard_agent.log", plain_env)
    users_tail = _renamed_process("tail", ray_dir / "logs" / "raylet.out", plain_env)  # a user reading a log
    try:
        assert processes_with_marker(str(ray_dir)) == [agent.pid]
        assert stop_processes(str(ray_dir)) == []
        assert agent.wait(timeout=patient(10)) == -signal.SIGTERM
        assert alive(users_tail.pid)  # not ours to stop
    finally:
        for process in (agent, users_tail):
            process.kill()
            process.wait()


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_a_run_on_flower_with_a_40_character_tmpdir_finishes(tmp_path):
    """Before: three tracebacks (AF_UNIX path length) and a hang."""
    root = Path("/tmp") / ("t47-" + "x" * 31)
    root.mkdir(exist_ok=True)
    try:
        proc = subprocess.run([*PFXAB, "run", "--engine", "flower", "--num-clients", "2", "--horizon", "3000",
                               "--json"],
                              capture_output=True, text=True, timeout=patient(240),
                              env={**os.environ, "TMPDIR": str(root)})
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr and json.loads(proc.stdout)["num_clients"] == 2
        assert list(root.iterdir()) == []  # Ray's files went below /tmp, and were removed
    finally:
        root.rmdir()


@pytest.mark.exhaustive
@pytest.mark.ray
@pytest.mark.loopback  # pfxab simulate's local SuperLink: the flwr-run group (tests/conftest.py)
@pytest.mark.timeout(600)
def test_simulate_with_a_30_character_tmpdir_finishes(tmp_path):
    root = Path("/tmp") / ("s47-" + "x" * 21)
    root.mkdir(exist_ok=True)
    try:
        proc = subprocess.run([*PFXAB, "simulate", "--num-clients", "2", "--horizon", "3000", "--out",
                               str(tmp_path / "r"),
                               "--json"], capture_output=True, text=True, timeout=patient(400),
                              env={**os.environ, "TMPDIR": str(root)})
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr and json.loads(proc.stdout.strip().splitlines()[-1])["num_clients"] == 2
    finally:
        root.rmdir()


def _ray_processes_under(root: Path) -> list[int]:
    """Processes Ray renamed (``ray::...``) holding a file below ``root``."""
    import psutil

    found = []
    for process in psutil.process_iter():
        try:
            if process.name().startswith("ray::") and any(str(root) in f.path for f in process.open_files()):
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


@pytest.mark.exhaustive
@pytest.mark.ray
@pytest.mark.timeout(900)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_flower_run_interrupted_while_ray_starts_leaves_no_agent(sig):
    """Interrupted 1.5, 3 and 4.5 s after Ray's directory appears (its agents starting): none left 5 s later."""
    root = Path(tempfile.mkdtemp(prefix="i47", dir="/tmp"))
    try:
        for delay in (1.5, 3.0, 4.5):
            child = subprocess.Popen([*PFXAB, "run", "--engine", "flower", "--num-clients", "3", "--horizon",
                                      "2000000"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                     env={**os.environ, "TMPDIR": str(root)})
            deadline = time.monotonic() + patient(120)
            while not any(root.glob("pfxab-ray-*")) and time.monotonic() < deadline and child.poll() is None:
                time.sleep(0.05)
            time.sleep(delay)
            child.send_signal(sig)
            assert child.wait(timeout=patient(30)) == 128 + sig
            time.sleep(5)
            left = _ray_processes_under(root)
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            assert left == [], f"{sig.name} after {delay} s: {left}"
    finally:
        shutil.rmtree(root, ignore_errors=True)
