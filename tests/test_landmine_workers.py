"""A cold landmine run killed with SIGKILL leaves no fitting worker behind.

The parent cannot clean up after SIGKILL, so the workers must notice by
themselves (:func:`pfxab_flower.processes.lifetime.exit_with_parent`). The test
starts a cold run (no table, empty cache: thousands of fits in loky workers; the
generated landmine-format file is enough, 24,573 fits of a few milliseconds each),
waits for its workers, kills the parent and checks by pid that every one of its
child processes is gone within a bounded wait.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import psutil

from tests.landmine_files import NOWHERE, LandmineFile, accepting_cli
from tests.patience import patient

#: Bounded waits (seconds): for the workers to start, and for them to be gone after the kill.
START_WAIT, EXIT_WAIT = 90.0, 10.0


def _children(pid: int) -> list[int]:
    """Pids whose parent is ``pid``."""
    try:
        return [child.pid for child in psutil.Process(pid).children()]
    except psutil.Error:  # it ended
        return []


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper does no work and counts as gone)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_sigkill_of_a_cold_run_leaves_no_worker(tmp_path, landmine_file: LandmineFile):
    env = dict(os.environ, PFXAB_CACHE_DIR=str(tmp_path / "cache"), PFXAB_LANDMINE_TABLE="none",
               PFXAB_LANDMINE_DATA=str(landmine_file.path), PFXAB_LANDMINE_URL=NOWHERE)
    proc = subprocess.Popen(
        [*accepting_cli(landmine_file), "run", "--problem", "landmine", "--num-clients", "3", "--horizon", "1000"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + patient(START_WAIT)
        workers: list[int] = []
        while time.monotonic() < deadline and proc.poll() is None:
            workers = [k for k in _children(proc.pid) if _alive(k)]
            if len(workers) >= 2:  # the loky workers (and its resource tracker) are up and fitting
                break
            time.sleep(0.2)
        assert proc.poll() is None and len(workers) >= 2, "the cold run never started its fitting workers"
        time.sleep(1.0)  # let them take work
        workers = [k for k in _children(proc.pid) if _alive(k)]
        assert proc.poll() is None, "the cold run ended before it was killed: nothing was tested"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=patient(10))
        deadline = time.monotonic() + patient(EXIT_WAIT)
        while time.monotonic() < deadline and any(_alive(k) for k in workers):
            time.sleep(0.1)
        assert [k for k in workers if _alive(k)] == [], "workers outlived their killed parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for k in workers:  # never leave a stray process behind, even when the test fails
            if _alive(k):
                os.kill(k, signal.SIGKILL)
