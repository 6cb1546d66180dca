"""Nothing left running when ``pfxab simulate``, ``sweep`` or ``compare`` is killed.

Each test starts the parent in a subprocess, waits until its children exist,
kills the parent (SIGKILL, which no handler sees, or SIGTERM/SIGHUP) and then
checks by process id, within a bounded wait, that none of them is still alive.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from pfxab_flower.simulations.flower.leftover_processes import alive, processes_with_marker
from pfxab_flower.simulations.flower.simulation_environment import remove_abandoned
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


def marked_including(marker: str, pids: list[int], seconds: float = 30) -> list[int]:
    """The processes carrying ``marker`` once ``pids`` are among them (the test fails if not within ``seconds``).

    ``Popen`` returns when the child's exec has closed its close-on-exec files, before the kernel has set up
    the new program's arguments and environment: until then ``/proc/<pid>/environ`` and ``cmdline`` read
    empty, so a scan right after a start can miss the process just started (it did at load 14).
    """
    def found() -> list[int] | None:
        marked = processes_with_marker(marker)
        return marked if set(pids) <= set(marked) else None

    return wait_for(found, seconds, f"{pids} carrying {marker}")  # type: ignore[return-value]


def children(pid: int) -> list[int]:
    """The children of ``pid`` (started by any of its threads)."""
    try:
        return sorted(child.pid for child in psutil.Process(pid).children())
    except psutil.Error:  # it ended
        return []


def python(code: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], **kwargs)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_pool_workers_exit_when_their_parent_dies(sig: signal.Signals) -> None:
    parent = python("""
        import time
        from pfxab_flower.running.parallel import run_in_processes
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


def test_an_objective_process_exits_when_its_parent_dies_even_in_the_middle_of_a_call() -> None:
    """With ``objective_timeout``, the objective's own process (:mod:`pfxab_flower.processes.deadline`) checked for its
    parent only between calls: a SIGKILLed run left it computing for the rest of the call (here 120 s)."""
    parent = python("""
        import time
        import numpy as np
        from pfxab_flower.processes.deadline import call_within
        call_within(300.0, lambda points: time.sleep(120), np.zeros((1, 1)), "objective of client 0")
    """)
    try:
        objective = wait_for(lambda: children(parent.pid), 30, "the objective's process")
        time.sleep(1)  # it is in the call now
        parent.kill()
        assert parent.wait(timeout=patient(10)) == -signal.SIGKILL
        wait_for(lambda: not any(alive(pid) for pid in objective), 10, f"objective process {objective} gone")
    finally:
        parent.kill()
        parent.wait()


#: A stand-in for ``simulate``: a detached process carrying the marker (like the SuperLink, which
#: is not our child), a temporary directory, the watchdog and the signal handlers, and the same
#: clean-up in ``finally``.
SIMULATE_LIKE = """
    import os, subprocess, sys, tempfile, time
    from pfxab_flower.simulations.flower.leftover_processes import Interrupted, clean_up, exit_on_signals, watchdog
    try:
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
    except Interrupted as stop:  # as pfxab's main() ends: the shell's status (143, 129)
        sys.exit(stop.status)
"""


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGKILL, -9), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_killed_parent_leaves_no_marked_process_nor_directory(sig: signal.Signals, status: int) -> None:
    parent = python(SIMULATE_LIKE, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        home, link, watcher = parent.stdout.readline().split()
        assert Path(home).is_dir() and marked_including(home, [int(link)]) == [int(link)] and alive(int(watcher))
        parent.send_signal(sig)
        assert parent.wait(timeout=patient(20)) == status
        wait_for(lambda: not alive(int(link)) and not Path(home).exists(), 20, "marked process and directory gone")
        wait_for(lambda: not alive(int(watcher)), 10, "watcher gone")
    finally:
        parent.kill()
        parent.wait()


#: A stand-in for a test or tool holding a Flower deployment (``simulations.flower.local_deployment``): SuperLink and
#: SuperNode, each in a session of its own (so not in our process group), and nothing that stops them once we are
#: SIGKILLed.
DEPLOYMENT_HOLDER = """
    import sys, time
    from pathlib import Path
    from pfxab_flower.simulations.flower.local_deployment import deployment
    with deployment(1, Path(sys.argv[1])) as running:
        print(running.home, *(process.pid for process in running.processes), flush=True)
        time.sleep(300)
"""


@pytest.mark.slow
@pytest.mark.loopback
@pytest.mark.timeout(200)
def test_a_deployments_superlink_and_supernodes_end_when_their_holder_is_sigkilled(tmp_path: Path) -> None:
    """They were started in sessions of their own and stopped only by the holder's clean-up: a SIGKILLed holder
    left the SuperLink and its SuperNodes running for good (:func:`pfxab_flower.processes.lifetime.with_parent` now)."""
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(DEPLOYMENT_HOLDER), str(tmp_path / "deploy")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        home, *pids = holder.stdout.readline().split()
        started = [int(pid) for pid in pids]
        assert len(started) == 2 and all(alive(pid) for pid in started), (home, pids)
        marked = marked_including(f"FLWR_HOME={home}", started)  # the SuperNode was started last, just now
        holder.kill()
        assert holder.wait(timeout=patient(10)) == -signal.SIGKILL
        wait_for(lambda: not any(alive(pid) for pid in marked) and not processes_with_marker(f"FLWR_HOME={home}"),
                 30, f"SuperLink and SuperNode ({marked}) gone")
    finally:
        holder.kill()
        holder.wait()
        for pid in processes_with_marker(f"FLWR_HOME={tmp_path / 'deploy' / 'flwr-home'}"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def environ_of(pid: int) -> dict[str, str]:
    return psutil.Process(pid).environ()


def flwr_simulation_of(home: Path) -> int | None:
    """The ``flwr-simulation`` process of the run whose FLWR_HOME is ``home`` (Ray starts under it)."""
    for pid in processes_with_marker(str(home)):
        with contextlib.suppress(psutil.Error):  # it ended
            if "flwr-simulation" in " ".join(psutil.Process(pid).cmdline()):
                return pid
    return None


@pytest.mark.ray
@pytest.mark.loopback  # pfxab simulate's local SuperLink
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGKILL, -9), (signal.SIGTERM, 143)])
def test_killed_simulate_stops_superlink_ray_and_removes_its_directories(
        tmp_path: Path, sig: signal.Signals, status: int) -> None:
    before = set(Path("/tmp").glob("pfxab-flwr-*"))
    log = (tmp_path / "log.txt").open("w")
    parent = subprocess.Popen(
        [sys.executable, "-m", "pfxab_flower.simulations.cli.main", "simulate", "--num-clients", "2", "--horizon",
         "2000",
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
    """The watchdog process ``pid`` started (``python -m pfxab_flower.simulations.flower.leftover_processes``)."""
    for child in children(pid):
        with contextlib.suppress(psutil.Error):
            if "pfxab_flower.simulations.flower.leftover_processes" in psutil.Process(child).cmdline():
                return child
    raise AssertionError(f"no watcher among the children of {pid}")


def test_the_next_run_removes_only_our_directories_whose_owner_ended_and_that_no_process_uses(tmp_path: Path) -> None:
    """What a run does first (:func:`remove_abandoned`), without Ray: the SIGKILLed run's directories go, no other."""
    from pfxab_flower.simulations.flower.leftover_processes import owner_token
    from pfxab_flower.simulations.flower.simulation_environment import OWNER_FILE

    ended = subprocess.run([sys.executable, "-c", "from pfxab_flower.simulations.flower.leftover_processes "
                            "import owner_token; print(owner_token())"],
                           capture_output=True, text=True, check=True).stdout
    directories = {name: tmp_path / f"pfxab-ray-{name}" for name in ("abandoned", "live owner", "no owner file",
                                                                     "in use", "a link")}
    for name, path in directories.items():
        if name != "a link":
            path.mkdir()
        if name in ("abandoned", "in use"):
            (path / OWNER_FILE).write_text(ended, encoding="ascii")
        elif name == "live owner":
            (path / OWNER_FILE).write_text(owner_token() + "\n", encoding="ascii")
    directories["a link"].symlink_to(directories["abandoned"], target_is_directory=True)
    user = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            env={**os.environ, "RAY_TMPDIR": str(directories["in use"])})
    try:
        marked_including(str(directories["in use"]), [user.pid])
        assert remove_abandoned(tmp_path, "pfxab-ray-") == [directories["abandoned"]]
    finally:
        user.kill()
        user.wait()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        path.name for name, path in directories.items() if name != "abandoned")
    assert remove_abandoned(tmp_path, "pfxab-flwr-") == []  # another prefix is not looked at


@pytest.mark.exhaustive  # default tier: the parent watch (the deployment's holder above), the removal (above)
@pytest.mark.ray
@pytest.mark.loopback  # pfxab simulate's local SuperLink
@pytest.mark.timeout(300)
def test_simulate_and_its_watcher_both_sigkilled_leave_no_process_and_the_next_run_removes_the_directories(
        tmp_path: Path) -> None:
    """Nothing left to clean up the chain: the SuperLink dies with simulate (its parent watch), the rest with it.

    The run's temporary directories go under a private ``TMPDIR``: another test's run, cleaning up ``/tmp`` as every
    run does first, would otherwise remove them before this test looks (that removal is what is tested here)."""
    private = Path(tempfile.mkdtemp(prefix="pfxab-t", dir="/tmp"))  # short: Ray's socket paths live below it
    log = (tmp_path / "log.txt").open("w")
    parent = subprocess.Popen(
        [sys.executable, "-m", "pfxab_flower.simulations.cli.main", "simulate", "--num-clients", "2", "--horizon",
         "2000",
         "--out", str(tmp_path / "out")], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
        env=dict(os.environ, TMPDIR=str(private)))
    try:
        def started() -> tuple[Path, int] | None:
            assert parent.poll() is None, (tmp_path / "log.txt").read_text()[-2000:]
            for home in private.glob("pfxab-flwr-*"):
                pid = flwr_simulation_of(home)
                if pid is not None:
                    return home, pid
            return None

        home, simulation = wait_for(started, 180, "flwr-simulation started")
        ray_dir = Path(environ_of(simulation)["RAY_TMPDIR"])
        assert ray_dir.parent == private
        marked = processes_with_marker(str(home))
        assert len(marked) >= 4, marked  # SuperLink, superexec, flwr-simulation, flwr run, Ray's
        watcher = watcher_of(parent.pid)
        os.kill(watcher, signal.SIGKILL)
        parent.send_signal(signal.SIGKILL)
        assert parent.wait(timeout=patient(10)) == -9
        wait_for(lambda: not any(alive(pid) for pid in marked) and not processes_with_marker(str(home))
                 and not processes_with_marker(str(ray_dir)), 60, f"every process of the run ({marked}) gone")
        assert home.exists() and ray_dir.exists()  # nobody was left to remove them ...
        removed = remove_abandoned(private, "pfxab-flwr-") + remove_abandoned(private, "pfxab-ray-")
        assert home in removed and ray_dir in removed  # ... the next run does (it calls this first)
        assert not home.exists() and not ray_dir.exists()
    finally:
        parent.kill()
        parent.wait()
        log.close()
        shutil.rmtree(private, ignore_errors=True)


# -- issue 37, class 5: an interrupt ends any command within seconds, with one line, nothing left ---------------


def _interrupt(args: list[str], sig: signal.Signals, started: Callable[[str], bool], tmp_path: Path,
               ) -> tuple[int, list[str], list[int]]:
    """``pfxab ARGS`` in a fresh process (its own session, as a terminal's job is), interrupted by ``sig`` once
    ``started(output so far)``; its status, output lines and the processes still carrying its mark (after a wait
    for them to end: 5 s on an idle machine, stretched on a busy one)."""
    mark = f"pfxab-interrupt-test-{os.getpid()}-{sig.name}-{time.monotonic_ns()}"
    log = tmp_path / "output.txt"
    with log.open("w") as output:
        child = subprocess.Popen([sys.executable, "-m", "pfxab_flower.simulations.cli.main", *args], cwd=tmp_path,
                                 stdout=output, stderr=output, env={**os.environ, "PFXAB_TEST_MARK": mark},
                                 start_new_session=True)
        try:
            wait_for(lambda: started(log.read_text()) or child.poll() is not None, 240, f"{args[0]} started")
            assert child.poll() is None, log.read_text()[-2000:]
            child.send_signal(sig)
            status = child.wait(timeout=patient(20))  # was 40-120 s after Ctrl-C, and SIGABRT after SIGTERM
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
    deadline = time.monotonic() + patient(5)
    while (left := processes_with_marker(mark)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return status, log.read_text().strip().splitlines(), left


@pytest.mark.ray
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [
    # default tier: SIGTERM here; SIGINT through the same handlers (our_signal_handlers) in the sweep's test below
    pytest.param(signal.SIGINT, marks=pytest.mark.exhaustive),
    signal.SIGTERM])
def test_an_interrupted_flower_run_ends_within_seconds_with_one_line_and_nothing_left(tmp_path: Path, sig) -> None:
    """``pfxab run --engine flower``: Ctrl-C printed "interrupted" and the process lived 40-120 s more (a Flower
    ServerApp thread); SIGTERM ended in SIGABRT with Ray's C++ stack (its failure handler)."""
    status, lines, left = _interrupt(["run", "--engine", "flower", "--num-clients", "3", "--horizon", "2000000",
                                      "--out", "out"], sig, lambda err: "phase 1 (depth 1)" in err, tmp_path)
    assert status == 128 + sig and lines[-1] == f"pfxab run: interrupted ({sig.name})", lines[-5:]
    assert not any("Traceback" in line or "SIGTERM received" in line for line in lines)
    assert left == [] and not (tmp_path / "out").exists()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_an_interrupted_sweep_ends_with_one_line_its_status_and_no_worker(tmp_path: Path, sig) -> None:
    """An in-process sweep with two workers: SIGTERM killed it without its clean-up (no line, a run's temporary
    directory left) and no resume note; now every stop signal is an interrupt, as Ctrl-C is."""
    (tmp_path / "s.toml").write_text('[fixed]\nhorizon = 200000000\nnum_clients = 3\n[grid]\nseed = [0, 1, 2, 3]\n')
    status, lines, left = _interrupt(["sweep", "s.toml", "--out", "S", "--workers", "2", "--no-progress"], sig,
                                     lambda err: "runs to do" in err, tmp_path)
    assert status == 128 + sig and lines[-1].startswith(
        f"pfxab sweep: interrupted; 0 of 4 runs complete in {(tmp_path / 'S').resolve()};"), lines[-3:]
    assert left == [] and not [p for p in (tmp_path / "S").rglob("*") if "pfxab-tmp" in p.name]


#: A stop signal handled inside an ``os.register_at_fork`` hook (logging's ran at every fork of a pool worker):
#: Python reports the hook's exception and drops it. Here the hook sends SIGHUP to this process, so the handler
#: runs there at the first fork of the pool, every time.
SIGNAL_IN_A_FORK_HOOK = """
    import os, signal, time
    import psutil
    from pfxab_flower.running.parallel import run_in_processes
    from pfxab_flower.simulations.flower.leftover_processes import Interrupted, alive, exit_on_signals
    os.register_at_fork(after_in_parent=lambda: signal.raise_signal(signal.SIGHUP))
    try:
        with exit_on_signals():
            run_in_processes(time.sleep, [(2,)] * 4, 2, lambda *done: None)
        print("all jobs done", flush=True)
    except Interrupted as stop:
        workers, deadline = psutil.Process().children(), time.monotonic() + 20  # stopped, maybe not yet ended
        while (left := [w for w in workers if alive(w.pid)]) and time.monotonic() < deadline:  # not reaped: the pool's
            time.sleep(0.05)
        print("interrupted", stop.status, "workers left", len(left), flush=True)
"""


def test_a_stop_signal_handled_where_python_drops_exceptions_still_interrupts() -> None:
    """A sweep SIGHUP'ed as its first pool worker was forked printed a traceback (``Exception ignored in
    <function _releaseLock>``, logging's fork hook), ignored the signal and ran every run to its end (status 0)."""
    parent = python(SIGNAL_IN_A_FORK_HOOK, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = parent.communicate(timeout=patient(60))
    assert out.strip() == "interrupted 129 workers left 0" and err == "", (out, err)
