"""Nothing left running when ``pfxab simulate``, ``sweep`` or ``compare`` is killed.

Each test starts the parent in a subprocess, waits until its children exist,
kills the parent (SIGKILL, which no handler sees, or SIGTERM/SIGHUP) and then
checks by process id, within a bounded wait, that none of them is still alive.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pfxab_flower.simulations.environment import remove_abandoned
from pfxab_flower.simulations.processes import alive, processes_with_marker
from tests.patience import patient


def wait_for(condition: Callable[[], object], seconds: float, what: str) -> object:
    """Poll ``condition`` until it is truthy (returned) or ``seconds`` pass (the test fails)."""
    deadline = time.monotonic() + patient(seconds)
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"not within {seconds} s: {what}")


def children(pid: int) -> list[int]:
    """The children of ``pid`` (over all its threads), from /proc."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):  # the thread ended
            found += [int(child) for child in (task / "children").read_text().split()]
    return sorted(found)


def python(code: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], **kwargs)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_pool_workers_exit_when_their_parent_dies(sig: signal.Signals) -> None:
    parent = python("""
        import time
        from pfxab_flower.parallel import run_in_processes
        run_in_processes(time.sleep, [(60,)] * 4, 2, lambda *done: None)
    """)
    try:
        workers = wait_for(lambda: len(children(parent.pid)) == 2 and children(parent.pid), 30, "two pool workers")
        parent.send_signal(sig)
        assert parent.wait(timeout=patient(10)) == -sig
        wait_for(lambda: not any(alive(pid) for pid in workers), 10, f"workers {workers} gone")
    finally:
        parent.kill()
        parent.wait()


#: A stand-in for ``simulate``: a detached process carrying the marker (like the SuperLink, which
#: is not our child), a temporary directory, the watchdog and the signal handlers, and the same
#: clean-up in ``finally``.
SIMULATE_LIKE = """
    import os, subprocess, sys, tempfile, time
    from pfxab_flower.simulations.processes import clean_up, exit_on_signals, watchdog
    with exit_on_signals():
        home = tempfile.mkdtemp(prefix="pfxab-test-")
        link = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                                env={**os.environ, "FLWR_HOME": home}, start_new_session=True)
        try:
            with watchdog(home, [home]) as watcher:
                print(home, link.pid, watcher.pid, flush=True)
                time.sleep(120)
        finally:
            clean_up(home, [home])
"""


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGKILL, -9), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_killed_parent_leaves_no_marked_process_nor_directory(sig: signal.Signals, status: int) -> None:
    parent = python(SIMULATE_LIKE, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        home, link, watcher = parent.stdout.readline().split()
        assert Path(home).is_dir() and processes_with_marker(home) == [int(link)] and alive(int(watcher))
        parent.send_signal(sig)
        assert parent.wait(timeout=patient(20)) == status
        wait_for(lambda: not alive(int(link)) and not Path(home).exists(), 20, "marked process and directory gone")
        wait_for(lambda: not alive(int(watcher)), 10, "watcher gone")
    finally:
        parent.kill()
        parent.wait()


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def flwr_simulation_of(home: Path) -> int | None:
    """The ``flwr-simulation`` process of the run whose FLWR_HOME is ``home`` (Ray starts under it)."""
    for pid in processes_with_marker(str(home)):
        with contextlib.suppress(OSError):  # it ended
            if b"flwr-simulation" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
    return None


@pytest.mark.ray
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGKILL, -9), (signal.SIGTERM, 143)])
def test_killed_simulate_stops_superlink_ray_and_removes_its_directories(
        tmp_path: Path, sig: signal.Signals, status: int) -> None:
    before = set(Path("/tmp").glob("pfxab-flwr-*"))
    log = (tmp_path / "log.txt").open("w")
    parent = subprocess.Popen(
        [sys.executable, "-m", "pfxab_flower.simulations.cli", "simulate", "--clients", "2", "--horizon", "2000",
         "--out", str(tmp_path / "out")], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        def started() -> tuple[Path, int] | None:
            assert parent.poll() is None, (tmp_path / "log.txt").read_text()[-2000:]
            for home in set(Path("/tmp").glob("pfxab-flwr-*")) - before:
                pid = flwr_simulation_of(home)
                if pid is not None:
                    return home, pid
            return None

        home, simulation = wait_for(started, 180, "flwr-simulation started")
        marked = processes_with_marker(str(home))
        env = environ_of(simulation)
        ray_dir = Path(env["RAY_TMPDIR"])
        ports = [int(env["FLWR_LOCAL_SUPERLINK_HTTP_API_PORT"]), int(env["FLWR_LOCAL_CONTROL_API_PORT"])]
        assert any(listening(port) for port in ports)  # the SuperLink is up
        parent.send_signal(sig)
        assert parent.wait(timeout=patient(60)) == status
        wait_for(lambda: not any(alive(pid) for pid in marked) and not processes_with_marker(str(home)), 60,
                 f"SuperLink, superexec, flwr-simulation and Ray ({marked}) gone")
        wait_for(lambda: not home.exists() and not ray_dir.exists(), 20, "FLWR_HOME and RAY_TMPDIR removed")
        assert not any(listening(port) for port in ports)
        assert not (tmp_path / "out" / "summary.json").exists()
    finally:
        parent.kill()
        parent.wait()
        log.close()


def watcher_of(pid: int) -> int:
    """The watchdog process ``pid`` started (``python -m pfxab_flower.simulations.processes``)."""
    for child in children(pid):
        with contextlib.suppress(OSError):
            if b"pfxab_flower.simulations.processes" in Path(f"/proc/{child}/cmdline").read_bytes():
                return child
    raise AssertionError(f"no watcher among the children of {pid}")


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_simulate_and_its_watcher_both_sigkilled_leave_no_process_and_the_next_run_removes_the_directories(
        tmp_path: Path) -> None:
    """Nothing left to clean up the chain: the SuperLink dies with simulate (PR_SET_PDEATHSIG), the rest with it."""
    before = set(Path("/tmp").glob("pfxab-flwr-*"))
    log = (tmp_path / "log.txt").open("w")
    parent = subprocess.Popen(
        [sys.executable, "-m", "pfxab_flower.simulations.cli", "simulate", "--clients", "2", "--horizon", "2000",
         "--out", str(tmp_path / "out")], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        def started() -> tuple[Path, int] | None:
            assert parent.poll() is None, (tmp_path / "log.txt").read_text()[-2000:]
            for home in set(Path("/tmp").glob("pfxab-flwr-*")) - before:
                pid = flwr_simulation_of(home)
                if pid is not None:
                    return home, pid
            return None

        home, simulation = wait_for(started, 180, "flwr-simulation started")
        ray_dir = Path(environ_of(simulation)["RAY_TMPDIR"])
        marked = processes_with_marker(str(home))
        assert len(marked) >= 4, marked  # SuperLink, superexec, flwr-simulation, flwr run, Ray's
        watcher = watcher_of(parent.pid)
        os.kill(watcher, signal.SIGKILL)
        parent.send_signal(signal.SIGKILL)
        assert parent.wait(timeout=patient(10)) == -9
        wait_for(lambda: not any(alive(pid) for pid in marked) and not processes_with_marker(str(home))
                 and not processes_with_marker(str(ray_dir)), 60, f"every process of the run ({marked}) gone")
        assert home.exists() and ray_dir.exists()  # nobody was left to remove them ...
        removed = remove_abandoned(Path("/tmp"), "pfxab-flwr-") + remove_abandoned(Path("/tmp"), "pfxab-ray-")
        assert home in removed and ray_dir in removed  # ... the next run does (it calls this first)
        assert not home.exists() and not ray_dir.exists()
    finally:
        parent.kill()
        parent.wait()
        log.close()
