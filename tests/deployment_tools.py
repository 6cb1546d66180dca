"""What the deployment tests do to a running :class:`~pfxab_flower.simulations.deployment.Deployment`.

Streaming ``flwr run``'s log to react to it, killing a SuperNode as a machine dies, and the
processes' log tails for a failing assertion's message: only tests need them, so they live here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from pfxab_flower.simulations.deployment import FEDERATION, Deployment
from pfxab_flower.simulations.flwr_run import flwr_executable


def flwr_run_streaming(
    running: Deployment, app_dir: Path, run_config: str, timeout: float, on_line: Callable[[str], None]
) -> tuple[int, str]:
    """Like :meth:`Deployment.flwr_run`, calling ``on_line`` on each line of the streamed log as it comes."""
    command = [flwr_executable(), "run", str(app_dir), FEDERATION, "--stream", "--run-config", run_config]
    process = subprocess.Popen(command, cwd=app_dir, env=running.env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            on_line(line)
            if time.monotonic() > deadline:
                raise TimeoutError(f"flwr run took more than {timeout:.0f} s")
        return process.wait(timeout=max(1.0, deadline - time.monotonic())), "".join(lines)
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def kill_node(running: Deployment, partition_id: int) -> None:
    """SIGKILL SuperNode ``partition_id`` and everything in its process group (a machine that dies)."""
    process = running.processes[1 + partition_id]  # processes[0] is the SuperLink
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def log_tail(running: Deployment, lines: int = 20) -> str:
    """The last lines of every process log (for a failing test's message)."""
    parts = []
    for path in sorted(running.logs.glob("*.log")):
        text = path.read_text(errors="replace").splitlines()[-lines:]
        parts.append(f"== {path.name}\n" + "\n".join(text))
    return "\n".join(parts)
