"""``client_fn`` factories: which objective a Flower client optimises.

* :func:`federation_client_fn`: simulation; client ``partition-id`` of a
  :class:`Federation` (a built-in problem from the run config, or one you pass).
* :func:`objective_client_fn`: your own objective callable (one per client, or
  one chosen by ``partition-id``), with simulated noise, e.g. in a deployment
  where each SuperNode is started with ``--node-config "partition-id=3"``.

The run's parameters (algorithm, clients, alpha, horizon, seed, ...) come from
the ``config`` you pass or, under ``flwr run``, from ``context.run_config``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache

from flwr.app import Context
from flwr.client import Client

from pfxab_flower.client_apps.client import EnvironmentFactory, PhasedClient
from pfxab_flower.config import RunConfig
from pfxab_flower.domain import Domain
from pfxab_flower.engine import settings_of
from pfxab_flower.errors import ConfigError
from pfxab_flower.faults import FaultPlan
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.federation import Federation, Objective
from pfxab_flower.sampling import SimulatedEnvironment
from pfxab_flower.strategies.run_config import parse_run_config

ClientFn = Callable[[Context], Client]


def make_client_fn(
    make_env: Callable[[int, RunConfig], EnvironmentFactory],
    config: RunConfig | None = None,
    send_pull_log: bool = True,
    faults: FaultPlan | None = None,
    secure_aggregation: bool | None = None,
) -> ClientFn:
    """A ``client_fn`` whose client ``partition-id`` gets the environment ``make_env(partition_id, config)``.

    Injected failures come from ``faults`` or, without ``config``, from the run config
    (``fail-rate``, ``fail-clients``).
    """

    def client_fn(context: Context) -> Client:
        if config is not None:
            run, plan, secure = config, faults or FaultPlan(seed=config.seed), bool(secure_aggregation)
        else:
            run, options = parse_run_config(context.run_config)
            plan, secure = options.faults(run.seed), options.secure_aggregation
        client = partition_id(context.node_config, run.clients)
        return PhasedClient(
            run.algorithm, settings_of(run), client, make_env(client, run), context.state, send_pull_log, plan,
            secure,
        ).to_client()

    return client_fn


def federation_client_fn(
    federation: Federation | None = None, config: RunConfig | None = None, faults: FaultPlan | None = None,
    secure_aggregation: bool | None = None,
) -> ClientFn:
    """Simulation clients of ``federation`` (default: the run config's built-in problem)."""

    def make_env(client: int, run: RunConfig) -> EnvironmentFactory:
        fed = federation if federation is not None else cached_federation(run)
        return lambda log: SimulatedEnvironment(fed, client, log)

    return make_client_fn(make_env, config, faults=faults, secure_aggregation=secure_aggregation)


def objective_client_fn(
    objective: Objective | Callable[[int], Objective],
    domain: Domain | Mapping[str, tuple],
    config: RunConfig | None = None,
    *,
    per_client: bool = False,
    noise_sigma: float = 0.1,
    noise: str = "uniform",
    send_pull_log: bool = False,
) -> ClientFn:
    """Clients optimising your own ``objective(points (n, d)) -> values (n,)`` on ``domain``.

    With ``per_client=True``, ``objective(partition_id)`` returns that client's
    objective. Rewards are the objective plus ``noise`` of scale ``noise_sigma``
    (as in :meth:`Federation.from_callables`); the objective is checked on every
    call (finite values, one per point).
    """

    def make_env(client: int, run: RunConfig) -> EnvironmentFactory:
        fn = objective(client) if per_client else objective
        # the objective sits at index `client` (the others are never called), so an
        # ObjectiveError names this client's partition id, not 0
        own = Federation.from_callables([fn] * (client + 1), domain, noise_sigma=noise_sigma, noise=noise,
                                        name="custom")
        return lambda log: SimulatedEnvironment(own, client, log)

    return make_client_fn(make_env, config, send_pull_log)


def partition_id(node_config: Mapping[str, object], num_clients: int) -> int:
    """The node's client index from its ``partition-id`` (checked against ``clients``)."""
    value = node_config.get("partition-id")
    try:
        client = int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        client = -1
    if not 0 <= client < num_clients:
        raise ConfigError(f"partition-id={value!r} is invalid; allowed: an integer in [0, {num_clients})")
    return client


@lru_cache(maxsize=4)
def cached_federation(config: RunConfig) -> Federation:
    """The run config's federation, built once per process (a cache only: clients never rely on it)."""
    return build_federation(config)
