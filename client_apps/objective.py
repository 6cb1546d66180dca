"""Your own black box as a Flower ``ClientApp``, in one call.

::

    from pfxab_flower.client_apps import from_context, objective_client_app

    def objective(points, partition_id):          # (n, d) array in your units -> n values
        return 1 - np.abs(points[:, 0] - 0.2 - 0.1 * partition_id)

    app = objective_client_app(objective, {"x": (0.0, 1.0)}, noise_sigma=0.1)

    @from_context
    def make_objective(context):                  # each site builds its own objective(points)
        data = np.load(context.node_config["data-path"])
        return lambda points: score(points, data)

    app = objective_client_app(make_objective, {"x": (0.0, 1.0)}, evaluation="deterministic")

Each node optimises ``objective(points, partition_id)`` (its ``partition-id`` from the node
config), or the ``objective(points)`` that ``make_objective(context)`` built from the node's
``Context`` (its ``node_config`` and ``run_config``): :func:`from_context` marks the builder,
so the two forms are told apart by what they are, not by guessing from their arguments.
``evaluation`` says what the objective is (docs/flower.md#evaluation-modes): ``simulated``,
the mean reward with ``noise`` of scale ``noise_sigma`` added to every reward;
``deterministic``, an exact value (each point evaluated once); ``stochastic``, one real trial
per pull (no noise added; ``value_range`` bounds the values). The algorithm and its
parameters come from the server's strategy (``PFXAB``, ``FedPNE`` or ``PFPNE``).

Why ``partition_id``, when :meth:`pfxab_flower.Federation.from_callables` takes one ``f(x)`` per
client: a ``ClientApp`` is one program that every node runs, so it gets one function for all
of them, and a node tells it which client it is. In Python the list position says that.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flwr.clientapp import ClientApp

from pfxab_flower.client_apps.message_app import message_client_app
from pfxab_flower.client_apps.sessions import FromContext, UserObjective, objective_sessions
from pfxab_flower.config import check
from pfxab_flower.domain import Domain
from pfxab_flower.errors import ConfigError
from pfxab_flower.noise import NoiseModel
from pfxab_flower.problems.federation import VALUE_LIMIT, check_value_range


def objective_client_app(
    objective: UserObjective | FromContext,
    domain: Domain | Mapping[str, tuple[Any, ...]],
    *,
    noise_sigma: float = 0.1,
    noise: str = "uniform",
    evaluation: str | None = None,
    value_range: tuple[float, float] = (-VALUE_LIMIT, VALUE_LIMIT),
) -> ClientApp:
    """A Message-API ``ClientApp`` whose nodes optimise ``objective`` on ``domain``.

    ``objective`` is ``objective(points, partition_id)`` or a :func:`from_context` builder.
    ``evaluation`` (``None``: the run config's ``evaluation`` key, else ``"simulated"``) and
    ``value_range`` are :meth:`Federation.from_callables`'. Its arguments are checked here, once,
    with one :class:`ConfigError` line, rather than on every SuperNode.
    """
    if not callable(objective):
        raise ConfigError(f"objective={type(objective).__name__} is invalid; allowed: a callable "
                          "objective(points, partition_id), or from_context(make_objective)")
    NoiseModel(noise, noise_sigma)  # checks noise and noise_sigma
    if evaluation is not None:
        check("evaluation", evaluation)
    check_value_range(value_range)
    return message_client_app(objective_sessions(objective, domain, noise_sigma=noise_sigma, noise=noise,
                                                 evaluation=evaluation, value_range=value_range))
