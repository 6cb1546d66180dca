"""The ``ServerApp`` of ``flwr run`` / ``pfxab simulate``: one run of the run config, results written to ``out-dir``.

The run config (``[tool.flwr.app.config]`` + ``--run-config``) is validated first; the
strategy runs Flower rounds until the run is over (one per phase, one for the final
exchange; the horizon bounds them). When the clients have sent their final reports
the run is scored exactly like ``engine.run`` and written (``summary.json`` last) to
``out-dir``, resolved against ``PFXAB_BASE_DIR`` (set by ``pfxab simulate`` to the
directory it was started from) or else the working directory. A run the server stopped
(too few replies, too few nodes) writes nothing and says why in one log line.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from pfxab_flower.config import parse_run_config
from pfxab_flower.engine import describe_problem
from pfxab_flower.problems import build_federation
from pfxab_flower.simulations.apps import run_server

LOGGER = logging.getLogger("pfxab_flower")
BASE_DIR_ENV = "PFXAB_BASE_DIR"


def resolve_out_dir(out_dir: str) -> Path:
    """An absolute results directory (the ServerApp may run in another process and directory)."""
    path = Path(out_dir).expanduser()
    if path.is_absolute():
        return path
    return Path(os.environ.get(BASE_DIR_ENV) or os.getcwd()) / path


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted.

    A plain ``StreamHandler(sys.stderr)`` keeps the stream it was given; if ``sys.stderr``
    is replaced later (by a test runner, or a caller capturing output), it would write
    to a closed file.
    """

    @property
    def stream(self) -> Any:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def show_phase_log(stream: Any = None) -> None:
    """Make the core's one line per phase (logger ``pfxab_flower``, INFO) visible, once."""
    if not LOGGER.handlers:
        handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
        handler.setFormatter(logging.Formatter("pfxab: %(message)s"))
        LOGGER.addHandler(handler)
        LOGGER.setLevel(logging.INFO)


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    show_phase_log()
    config, options = parse_run_config(context.run_config)
    federation = build_federation(config)
    LOGGER.info("%s on %s: M=%d alpha=%g T=%d seed=%d", config.algorithm, federation.name, config.clients,
                config.alpha, config.horizon, config.seed)
    outcome = run_server(grid, context, config, options, federation, describe_problem(config))
    if isinstance(outcome, str):
        return  # the driver has logged why; nothing is written for a stopped run
    out = outcome.write(resolve_out_dir(options.out_dir))
    LOGGER.info("regret %.6g after %d phases (%d exchanges); results written to %s",
                outcome.summary["regret"], outcome.summary["phases"], outcome.summary["communication_rounds"], out)
