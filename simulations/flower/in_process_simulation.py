"""``pfxab run --engine flower``: one run on Flower's Ray simulation engine, in this process.

``flwr.simulation.run_simulation`` with the same ``ServerApp``/``ClientApp`` wiring as ``flwr run .``;
the result equals the in-process engine's for the same seed (only the engine, byte counts and
timings differ). The config is checked before Ray starts.
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any

from pfxab_flower.client_apps import federation_sessions
from pfxab_flower.client_apps.sessions import SessionFn
from pfxab_flower.errors import ConfigError, IncompleteRunError, RunStoppedError
from pfxab_flower.faults import DEFAULT_ROUND_TIMEOUT
from pfxab_flower.printable import printable
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.federation import Federation
from pfxab_flower.running.engine import describe_problem
from pfxab_flower.running.results import RunResult
from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.simulations.flower.app_builders import client_app, server_app
from pfxab_flower.simulations.flower.interrupted_backend import workers_leave_before_shutdown
from pfxab_flower.simulations.flower.ray_cluster import check_ray_address, fits_on
from pfxab_flower.simulations.flower.simulation_environment import (
    backend_config,
    check_num_cpus,
    logger_settings,
    our_signal_handlers,
    ray_environment,
    short_temp_root,
)
from pfxab_flower.strategies.base import show_phase_log
from pfxab_flower.strategies.common import failure_reason


def run_flower_simulation(
    config: RunConfig, *, round_timeout: float = DEFAULT_ROUND_TIMEOUT, num_cpus: float = 1.0,
    options: AppOptions | None = None, ray_address: str | None = None,
) -> RunResult:
    """Run a validated :class:`RunConfig` on Flower's simulation engine (its built-in problem).

    The clients carry the config, not the federation: each Ray worker builds the problem once
    (see :func:`~pfxab_flower.client_apps.federation_sessions`).
    """
    short_temp_root()  # a TMPDIR too long for Ray's sockets is one line before the problem is built
    options = options or AppOptions(round_timeout=round_timeout)
    sessions = federation_sessions(faults=options.faults(config.seed), config=config)
    return run_flower(build_federation(config), config, describe=describe_problem(config), session_fn=sessions,
                      num_cpus=num_cpus, options=options, ray_address=ray_address)


def run_flower(
    federation: Federation,
    config: RunConfig,
    *,
    describe: dict[str, Any] | None = None,
    session_fn: SessionFn | None = None,
    round_timeout: float = DEFAULT_ROUND_TIMEOUT,
    num_cpus: float = 1.0,
    options: AppOptions | None = None,
    ray_address: str | None = None,
) -> RunResult:
    """Run ``config``'s algorithm on ``federation`` with one Flower SuperNode per client.

    ``ray_address`` (``HOST:PORT``, checked reachable first) runs the clients on that
    existing Ray cluster instead of a private Ray on this machine.

    ``session_fn`` defaults to simulated clients of ``federation``; pass
    :func:`~pfxab_flower.client_apps.objective_sessions` (or your own) to change what clients pull.
    ``options`` (validated app options: API, injected failures, ``min-fraction``) override
    ``round_timeout``. Raises :class:`RunStoppedError` if the server stopped the run.
    """
    if config.num_clients != federation.num_clients:
        raise ConfigError(f"num_clients={config.num_clients} is invalid; allowed: {federation.num_clients} "
                          f"(the federation's number of objectives)")
    if ray_address is not None:
        ray_address = check_ray_address(ray_address)
    check_num_cpus(num_cpus, ray_address)
    started = time.perf_counter()
    options = options or AppOptions(round_timeout=round_timeout)
    results: list[RunResult] = []
    stopped: list[str] = []
    server = server_app(config, options, federation=federation, describe=describe or {},
                        on_result=results.append, on_stop=stopped.append)
    client = client_app(session_fn or federation_sessions(federation, options.faults(config.seed)), options)
    show_phase_log()
    from flwr.simulation import run_simulation

    with logger_settings(("flwr",), logging.WARNING, (_drop_run_simulation_deprecation, _one_line_client_errors)), \
            ray_environment() as ray_dir, warnings.catch_warnings(), fits_on(ray_address), \
            our_signal_handlers(ray_dir), workers_leave_before_shutdown():  # fits_on: landmine's optimum grid;
        # our_signal_handlers, workers_leave_before_shutdown: an interrupt cleans up (see there)
        warnings.simplefilter("ignore", DeprecationWarning)
        run_simulation(server, client, num_supernodes=config.num_clients,
                       backend_config=backend_config(num_cpus, ray_dir, ray_address))
    if stopped:
        raise RunStoppedError(stopped[0])
    if not results:
        raise IncompleteRunError("the Flower simulation ended without a result (see the log above)")
    result = results[0]
    # the whole call, Ray's start and stop included; run_seconds is the run itself (first round to the last
    # reply), scoring_seconds the scoring after it, setup_seconds the rest (Ray's start and stop)
    wall = time.perf_counter() - started
    run_seconds, scoring_seconds = result.summary["run_seconds"], result.summary["scoring_seconds"]
    result.summary.update(wall_seconds=wall, setup_seconds=wall - run_seconds - scoring_seconds)
    return result


def _one_line_client_errors(record: logging.LogRecord) -> bool:
    """A ClientApp that raised (e.g. an ObjectiveError) is one line, not a Ray traceback.

    Flower logs the exception and then ``traceback.format_exc()``; the strategy logs the
    failure again with its phase, so the traceback is dropped and the exception shortened.
    """
    if isinstance(record.msg, BaseException):
        record.msg, record.args = f"a ClientApp raised: {printable(failure_reason(record.msg))}", ()
        return True
    text = record.msg if isinstance(record.msg, str) else ""
    return not text.startswith(("Traceback (most recent call last)", "An exception was raised when processing"))


def _drop_run_simulation_deprecation(record: logging.LogRecord) -> bool:
    """``run_simulation`` logs a deprecation on every call; it is the documented in-process entry point."""
    return "run_simulation" not in record.getMessage()
