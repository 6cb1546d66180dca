"""The one way a Python process we start ends with the process that started it: :func:`exit_with_parent`.

A parent killed by SIGKILL cannot stop its pool workers, fitting workers or objective
processes, which would wait or work for ever. Each of them calls :func:`exit_with_parent`
at its start: a daemon thread polls the parent pid and exits once the process has been
re-parented. Chosen over ``PR_SET_PDEATHSIG``, which fires when the *thread* that forked
the process ends (not the process), is Linux-only and needs ctypes; that remains only for
a program that is not ours (``simulations.processes.die_with_parent``), where no thread of
ours can run.
"""

from __future__ import annotations

import os
import threading
import time

#: How often a process checks that its parent is still there (seconds).
PARENT_POLL_SECONDS = 0.2


def exit_with_parent(parent_pid: int, status: int = 1) -> None:
    """Make this process exit with ``status`` as soon as ``parent_pid`` (its parent) is gone."""
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(status)

    threading.Thread(target=watch, name="pfxab-exit-with-parent", daemon=True).start()
