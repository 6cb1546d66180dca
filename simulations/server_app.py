"""The ``ServerApp`` of ``flwr run`` / ``pfxab simulate``: one run of the run config, results written to ``out-dir``.

The run config is checked first; Flower rounds run until the run is over, then the run is scored
like ``engine.run`` and written (``summary.json`` last). A stopped run writes nothing and says why;
a result that cannot be written goes into the log on one line (:data:`UNSAVED_MARK`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from pfxab_flower.problems import build_federation
from pfxab_flower.running.engine import describe_problem
from pfxab_flower.running.results import RunResult
from pfxab_flower.schema.run_config import parse_run_config
from pfxab_flower.simulations.flower.app_builders import run_server
from pfxab_flower.storage.outputs import OutputError
from pfxab_flower.strategies.base import LOGGER, show_phase_log

BASE_DIR_ENV = "PFXAB_BASE_DIR"
#: Starts the log line of a result that could not be written; a JSON object follows: ``error``, ``summary``.
UNSAVED_MARK = "result not written: "


def resolve_out_dir(out_dir: str) -> Path:
    """An absolute results directory (the ServerApp may run in another process and directory)."""
    path = Path(out_dir).expanduser()
    if path.is_absolute():
        return path
    return Path(os.environ.get(BASE_DIR_ENV) or os.getcwd()) / path


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    show_phase_log()
    config, options = parse_run_config(context.run_config)
    federation = build_federation(config)
    LOGGER.info("%s on %s: M=%d alpha=%g T=%d seed=%d", config.algorithm, federation.name, config.num_clients,
                config.alpha, config.horizon, config.seed)
    outcome = run_server(grid, context, config, options, federation, describe_problem(config))
    if isinstance(outcome, str):
        return  # the driver has logged why; nothing is written for a stopped run
    write_or_log(outcome, resolve_out_dir(options.out_dir))


def write_or_log(result: RunResult, out_dir: Path) -> Path | None:
    """Write the result to ``out_dir``; if that fails, log its summary on one line (never lose a finished run)."""
    try:
        out = result.write(out_dir)
    except OutputError as exc:
        LOGGER.error("%s%s", UNSAVED_MARK, json.dumps({"error": str(exc), "summary": result.summary}))
        return None
    LOGGER.info("regret %.6g after %d phases (%d exchanges); results written to %s",
                result.summary["regret"], result.summary["phases"], result.summary["communication_rounds"], out)
    return out
