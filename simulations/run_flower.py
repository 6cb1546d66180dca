"""``pfxab run --engine flower``: one run on Flower's Ray simulation engine, in this process.

It uses ``flwr.simulation.run_simulation`` with the same ``ServerApp``/``ClientApp``
wiring as ``flwr run .`` (parameters passed by closure, as ``context.run_config``
is empty there) and returns the same :class:`RunResult` as the in-process engine
for the same seed (only ``engine``, the bytes, which include Flower's tensor
headers, and the wall time differ). The config is validated before Ray starts.
"""

from __future__ import annotations

import logging
import warnings

from flwr.client import ClientApp
from flwr.server import ServerApp

from client_apps.factory import ClientFn, federation_client_fn
from pfxab_flower.config import RunConfig
from pfxab_flower.engine import describe_problem
from pfxab_flower.errors import ConfigError
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.federation import Federation
from pfxab_flower.results import RunResult
from simulations.environment import backend_config, check_num_cpus, ray_environment
from simulations.harness import IncompleteRunError
from simulations.server_app import make_server_fn, show_phase_log
from strategies.run_config import AppOptions


def run_flower_simulation(config: RunConfig, *, round_timeout: float = 600.0, num_cpus: float = 1.0) -> RunResult:
    """Run a validated :class:`RunConfig` on Flower's simulation engine (its built-in problem)."""
    return run_flower(build_federation(config), config, describe=describe_problem(config),
                      round_timeout=round_timeout, num_cpus=num_cpus)


def run_flower(
    federation: Federation,
    config: RunConfig,
    *,
    describe: dict | None = None,
    client_fn: ClientFn | None = None,
    round_timeout: float = 600.0,
    num_cpus: float = 1.0,
) -> RunResult:
    """Run ``config``'s algorithm on ``federation`` with one Flower SuperNode per client.

    ``client_fn`` defaults to simulated clients of ``federation``; pass
    :func:`client_apps.objective_client_fn` (or your own) to change what clients pull.
    """
    if config.clients != federation.num_clients:
        raise ConfigError(f"clients={config.clients} is invalid; allowed: {federation.num_clients} "
                          f"(the federation's number of objectives)")
    check_num_cpus(num_cpus)
    options = AppOptions(round_timeout=round_timeout)  # validated the same way as a run config's
    results: list[RunResult] = []
    server_app = ServerApp(server_fn=make_server_fn(
        config, options, federation=federation, describe=describe or {}, on_result=results.append, write=False
    ))
    client_app = ClientApp(client_fn=client_fn or federation_client_fn(federation, config))
    show_phase_log()
    from flwr.simulation import run_simulation

    flwr_logger = logging.getLogger("flwr")
    level = flwr_logger.level
    flwr_logger.setLevel(logging.WARNING)
    flwr_logger.addFilter(_drop_run_simulation_deprecation)
    try:
        with ray_environment() as ray_dir, warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            run_simulation(server_app, client_app, num_supernodes=config.clients,
                           backend_config=backend_config(num_cpus, ray_dir))
    finally:
        flwr_logger.removeFilter(_drop_run_simulation_deprecation)
        flwr_logger.setLevel(level)
    if not results:
        raise IncompleteRunError("the Flower simulation ended without a result (see the log above)")
    return results[0]


def _drop_run_simulation_deprecation(record: logging.LogRecord) -> bool:
    """``run_simulation`` logs a deprecation on every call; it is the documented in-process entry point."""
    return "run_simulation" not in record.getMessage()
