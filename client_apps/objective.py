"""Your own black box as a Flower ``ClientApp``, in one call.

::

    from pfxab_flower.client_apps import objective_client_app

    def objective(points, partition_id):          # (n, d) array in your units -> n values
        return 1 - np.abs(points[:, 0] - 0.2 - 0.1 * partition_id)

    app = objective_client_app(objective, {"x": (0.0, 1.0)}, noise_sigma=0.1)

Each node optimises ``objective(points, partition_id)`` (its ``partition-id`` from the node
config) with ``noise`` of scale ``noise_sigma`` added to every reward. The algorithm and
its parameters come from the server's strategy (``PFXAB``, ``FedPNE`` or ``PFPNE``).

Why ``partition_id``, when :meth:`pfxab_flower.Federation.from_callables` takes one ``f(x)`` per
client: a ``ClientApp`` is one program that every node runs, so it gets one function for all
of them, and a node tells it which client it is. In Python the list position says that.
"""

from __future__ import annotations

from collections.abc import Mapping

from flwr.clientapp import ClientApp

from pfxab_flower.client_apps.message_app import message_client_app
from pfxab_flower.client_apps.sessions import UserObjective, objective_sessions
from pfxab_flower.domain import Domain
from pfxab_flower.errors import ConfigError
from pfxab_flower.noise import NoiseModel


def objective_client_app(
    objective: UserObjective,
    domain: Domain | Mapping[str, tuple],
    *,
    noise_sigma: float = 0.1,
    noise: str = "uniform",
) -> ClientApp:
    """A Message-API ``ClientApp`` whose nodes optimise ``objective(points, partition_id)`` on ``domain``.

    Its arguments are checked here, once, with one :class:`ConfigError` line, rather than on every SuperNode.
    """
    if not callable(objective):
        raise ConfigError(f"objective={type(objective).__name__} is invalid; allowed: a callable "
                          "objective(points, partition_id)")
    NoiseModel(noise, noise_sigma)  # checks noise and noise_sigma
    return message_client_app(objective_sessions(objective, domain, noise_sigma=noise_sigma, noise=noise))
