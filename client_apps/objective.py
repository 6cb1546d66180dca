"""Your own black box as a Flower ``ClientApp``, in one call: :func:`objective_client_app`.

Each node optimises ``objective(points, partition_id)`` (one program runs on every node, so the node
says which client it is), or the ``objective(points)`` that a builder marked
:func:`~pfxab_flower.client_apps.sessions.from_context` makes from the node's ``Context``.
Examples and evaluation modes: docs/flower.md ("Your own app in three files").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flwr.clientapp import ClientApp

from pfxab_flower.arms.domain import Domain
from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.client_apps.message_app import message_client_app
from pfxab_flower.client_apps.sessions import FromContext, UserObjective, objective_sessions
from pfxab_flower.client_apps.site_names import named_sites
from pfxab_flower.errors import ConfigError
from pfxab_flower.problems.federation import VALUE_LIMIT, check_sites, check_value_range
from pfxab_flower.schema.catalogue import check


def objective_client_app(
    objective: UserObjective | FromContext,
    domain: Domain | Mapping[str, tuple[Any, ...]],
    *,
    noise_sigma: float = 0.1,
    noise: str = "uniform",
    evaluation: str | None = None,
    value_range: tuple[float, float] = (-VALUE_LIMIT, VALUE_LIMIT),
    sites: Sequence[str] | None = None,
) -> ClientApp:
    """A Message-API ``ClientApp`` whose nodes optimise ``objective`` on ``domain``.

    ``objective`` is ``objective(points, partition_id)`` or a :func:`from_context` builder; either may
    take ``rng`` (a parameter of that name: the run's stream of the client and phase, docs/flower.md).
    ``evaluation`` (``None``: the run config's ``evaluation`` key, else ``"simulated"``) and
    ``value_range`` are :meth:`Federation.from_callables`'. ``sites`` names the nodes of a simulation
    (``sites[partition-id]``) whose node config declares no ``site`` (without it: the run config's ``sites``
    key, ``"lab-a,lab-b,..."``, if it has one). Its arguments are checked here,
    once, with one :class:`ConfigError` line, rather than on every SuperNode.
    """
    if not callable(objective):
        raise ConfigError(f"objective={type(objective).__name__} is invalid; allowed: a callable "
                          "objective(points, partition_id), or from_context(make_objective)")
    NoiseModel(noise, noise_sigma)  # checks noise and noise_sigma
    if evaluation is not None:
        check("evaluation", evaluation)
    check_value_range(value_range)
    sessions = objective_sessions(objective, domain, noise_sigma=noise_sigma, noise=noise, evaluation=evaluation,
                                  value_range=value_range)
    return message_client_app(sessions, mods=[named_sites(None if sites is None else check_sites(sites))])
