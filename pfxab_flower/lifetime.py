"""The one way a Python process we start ends with the process that started it: :func:`exit_with_parent`.

Pool workers, fitting workers and objective processes call it at their start: a daemon thread
exits the process once its parent has gone. Why not ``PR_SET_PDEATHSIG``: docs/reliability.md.
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
