"""Which objective a Flower node optimises: functions from a node's ``Context`` to its :class:`ClientSession`.

A client needs only its objective: the algorithm's parameters arrive with every
message from the server. So a session function reads just the node's
``partition-id`` (``context.node_config``) and, for the bundled simulation app, the
problem's own run-config keys (``problem``, ``noise``, ...); every other key of the
run config is the app's business and is ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np
from flwr.app import Context

from pfxab_flower.client_apps.store import FlowerStore
from pfxab_flower.domain import Domain
from pfxab_flower.errors import ConfigError
from pfxab_flower.faults import NO_FAULTS, FaultPlan
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.federation import Federation
from pfxab_flower.run_parameters import RunConfig
from pfxab_flower.sampling import SimulatedEnvironment
from pfxab_flower.session import ClientSession

#: A node's session, built for every message from its context.
SessionFn = Callable[[Context], ClientSession]
#: ``objective(points, partition_id)``: values of an ``(n, d)`` array of points in the user's units.
UserObjective = Callable[[np.ndarray, int], np.ndarray]

#: The run-config keys that define the bundled app's problem (everything else is ignored by clients).
PROBLEM_KEYS = ("problem", "clients", "noise", "noise-sigma", "spread", "landmine-data", "fields")
FAULT_KEYS = ("fail-rate", "fail-clients", "straggle-seconds", "round-timeout")


def partition_id(node_config: Mapping[str, object]) -> int:
    """The node's client index, ``partition-id`` (a node beyond the run's clients will stand by)."""
    value = node_config.get("partition-id")
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ConfigError(f"partition-id={value!r} is invalid; allowed: an integer >= 0 (node config)")
    return int(value)


def federation_sessions(federation: Federation | None = None, faults: FaultPlan | None = None) -> SessionFn:
    """Simulation nodes of ``federation``, or of the built-in problem the run config names (``flwr run``).

    ``faults`` (or the run config's ``fail-rate``, ``fail-clients``, ``straggle-seconds``)
    injects dropouts and stragglers, as the in-process engine does with the same plan.
    """

    def session_fn(context: Context) -> ClientSession:
        fed, plan = federation, faults
        if fed is None or plan is None:
            config, options = problem_of(context.run_config)
            fed = fed if fed is not None else cached_federation(config)
            plan = plan if plan is not None else options.faults(config.seed)
        client = partition_id(context.node_config)
        make_env = lambda saved: SimulatedEnvironment.restored(fed, client, saved)  # noqa: E731
        return ClientSession(client, FlowerStore(context.state), make_env, plan)

    return session_fn


def objective_sessions(
    objective: UserObjective, domain: Domain | Mapping[str, tuple], *, noise_sigma: float = 0.1, noise: str = "uniform"
) -> SessionFn:
    """Nodes optimising ``objective(points, partition_id)`` on ``domain``, rewards plus simulated ``noise``."""
    domain = domain if isinstance(domain, Domain) else Domain.from_mapping(domain)

    def session_fn(context: Context) -> ClientSession:
        client = partition_id(context.node_config)
        own = _own_federation(objective, domain, client, noise_sigma, noise)
        make_env = lambda saved: SimulatedEnvironment.restored(own, client, saved)  # noqa: E731
        return ClientSession(client, FlowerStore(context.state), make_env, NO_FAULTS)

    return session_fn


def _own_federation(
    objective: UserObjective, domain: Domain, client: int, noise_sigma: float, noise: str
) -> Federation:
    """A federation whose objective ``client`` is the user's (the others are never called).

    Sitting at index ``client`` keeps the noise stream and an ``ObjectiveError``'s client
    number those of the node's ``partition-id``.
    """
    own = lambda points: objective(points, client)  # noqa: E731
    return Federation.from_callables([own] * (client + 1), domain, noise_sigma=noise_sigma, noise=noise,
                                     name="custom")


def problem_of(run_config: Mapping[str, Any]):
    """The problem and fault options of a run config, from their own keys only (others ignored)."""
    from pfxab_flower.run_parameters import parse_run_config

    mine = {k: v for k, v in run_config.items() if k in PROBLEM_KEYS or k in FAULT_KEYS}
    return parse_run_config(mine)


@lru_cache(maxsize=4)
def cached_federation(config: RunConfig) -> Federation:
    """The run config's federation, built once per process (a cache only: sessions never rely on it)."""
    return build_federation(config)
