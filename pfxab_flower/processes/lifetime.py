"""The one way a process we start ends with the process that started it: it watches for its parent's end.

Our own Python processes call :func:`exit_with_parent` at their start; a program that is not ours (the
SuperLink, SuperNodes, ``flwr run``) starts through :func:`with_parent`, under the same watch of its
parent pid. Why not ``PR_SET_PDEATHSIG``: docs/reliability.md.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from pfxab_flower.errors import ConfigError

#: How often a process checks that its parent is still there (seconds).
PARENT_POLL_SECONDS = 0.2
#: Seconds a program started by :func:`with_parent` has, after its SIGTERM, to shut down before it is ended.
TERMINATE_GRACE_SECONDS = 10.0


def wait_for_parent_exit(parent_pid: int) -> None:
    """Return once ``parent_pid``, this process's parent, is gone (this process has been re-parented)."""
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_SECONDS)


def exit_with_parent(parent_pid: int, status: int = 1, grace: float | None = None) -> None:
    """Make this process exit with ``status`` as soon as ``parent_pid`` (its parent) is gone.

    With ``grace``, it first gets SIGTERM (its own shutdown runs, as on ``kill``) and is ended
    ``grace`` seconds later if it is still there.
    """
    def watch() -> None:
        wait_for_parent_exit(parent_pid)
        if grace is not None:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(grace)
        os._exit(status)

    threading.Thread(target=watch, name="pfxab-exit-with-parent", daemon=True).start()


def with_parent(command: Sequence[str]) -> list[str]:
    """``command`` (a console script of this Python environment, by name or path, and its arguments) as a
    command line whose process ends when this one does, however this one ends.

    The script's entry point runs in ``python -m pfxab_flower.processes.lifetime``, which watches for this
    process as :func:`exit_with_parent` does; its command line still names the script and its arguments.
    """
    from importlib.metadata import entry_points  # here: every ``pfxab`` start loads this module, few start programs

    name = Path(command[0]).name
    if not entry_points(group="console_scripts", name=name):
        raise ConfigError(f"{name!r} is not a console script of {sys.executable}; allowed: one installed in this "
                          "environment (pip install -e .)")
    return [sys.executable, "-m", "pfxab_flower.processes.lifetime", str(os.getpid()), name, *command[1:]]


def _run_console_script(parent_pid: int, name: str, arguments: list[str]) -> int | str | None:
    """Run console script ``name`` with ``arguments`` here, ended (SIGTERM, then exit) when ``parent_pid`` is gone."""
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name=name)
    exit_with_parent(parent_pid, grace=TERMINATE_GRACE_SECONDS)
    sys.argv = [name, *arguments]
    status = script.load()()
    return status if status is None or isinstance(status, (int, str)) else 0


if __name__ == "__main__":  # a program started by with_parent()
    sys.exit(_run_console_script(int(sys.argv[1]), sys.argv[2], sys.argv[3:]))
