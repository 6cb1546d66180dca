"""The ``ServerApp`` of ``flwr run .``: one strategy per run, results written to ``out-dir``.

``server_fn`` reads the run config (``[tool.flwr.app.config]`` + ``--run-config``),
validates it, and returns the algorithm's strategy with ``num_rounds`` derived
from the horizon. When the clients have sent their final reports, the run is
scored exactly like ``engine.run`` and written (``summary.json`` last) to
``out-dir``, which is resolved against ``PFXAB_BASE_DIR`` (set by ``pfxab
simulate`` to the directory it was started from) or else the working directory.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.server import ServerAppComponents, ServerConfig

from pfxab_flower.config import RunConfig
from pfxab_flower.engine import describe_problem
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.federation import Federation
from pfxab_flower.results import RunResult
from pfxab_flower.simulations.apps import run_config_server_app
from pfxab_flower.simulations.harness import flower_result
from pfxab_flower.strategies.run_config import AppOptions, parse_run_config
from pfxab_flower.strategies.strategy import PhasedStrategy, strategy_for

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


def make_server_fn(
    config: RunConfig | None = None,
    options: AppOptions | None = None,
    *,
    federation: Federation | None = None,
    describe: dict[str, Any] | None = None,
    on_result: Callable[[RunResult], None] | None = None,
    on_stop: Callable[[str], None] | None = None,
    write: bool = True,
) -> Callable[[Context], ServerAppComponents]:
    """A ``server_fn``; without ``config`` it reads ``context.run_config`` (``flwr run``).

    ``on_stop(reason)`` is called instead of ``on_result`` if the server stopped the run
    (fewer than ``min-fraction`` of the clients answered); nothing is written then.
    """

    def server_fn(context: Context) -> ServerAppComponents:
        started = time.perf_counter()
        run, opts = (config, options or AppOptions()) if config is not None else parse_run_config(context.run_config)
        fed = federation if federation is not None else build_federation(run)
        facts = describe if describe is not None else (describe_problem(run) if federation is None else {})

        def finish(strategy: PhasedStrategy) -> None:
            if strategy.stop_reason is not None:
                if on_stop is not None:
                    on_stop(strategy.stop_reason)
                return  # nothing is written for a stopped run
            result = flower_result(strategy, fed, facts, time.perf_counter() - started)
            if write:
                out = result.write(resolve_out_dir(opts.out_dir))
                LOGGER.info("regret %.6g after %d phases; results written to %s",
                            result.summary["regret"], result.summary["phases"], out)
            if on_result is not None:
                on_result(result)

        strategy = strategy_for(run, on_finish=finish, wait_timeout=int(opts.round_timeout),
                                min_fraction=opts.min_fraction)
        LOGGER.info("%s on %s: M=%d alpha=%g T=%d seed=%d, at most %d Flower rounds", run.algorithm, fed.name,
                    run.clients, run.alpha, run.horizon, run.seed, strategy.num_rounds)
        return ServerAppComponents(
            strategy=strategy, config=ServerConfig(num_rounds=strategy.num_rounds, round_timeout=opts.round_timeout)
        )

    return server_fn


def _app_server_fn(context: Context) -> ServerAppComponents:
    show_phase_log()
    return make_server_fn()(context)


app = run_config_server_app(_app_server_fn)  # Message API or legacy, by the run config's `api` key
