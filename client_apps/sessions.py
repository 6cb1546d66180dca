"""Which objective a Flower node optimises: functions from a node's ``Context`` to its ``ClientSession``.

A session function reads only the node's ``partition-id`` and, for the bundled app, the problem's
own run-config keys; the algorithm's parameters come with every message. A user's objective is one
function for every node or built per node by :func:`from_context`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache, update_wrapper
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, Context

from pfxab_flower.arms.domain import Domain
from pfxab_flower.client_apps.sent_once import SentOnce
from pfxab_flower.client_apps.store import FlowerStore
from pfxab_flower.errors import ClientFailedError, ConfigError, client_failure_text, spelled_as
from pfxab_flower.faults import NO_FAULTS, FaultPlan
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.federation import VALUE_LIMIT, Federation, Objective
from pfxab_flower.problems.sampling import SimulatedEnvironment
from pfxab_flower.running.client_session import ClientSession
from pfxab_flower.running.wire import codec
from pfxab_flower.schema.catalogue import parse
from pfxab_flower.schema.run_config import AppOptions, RunConfig

#: A node's session, built for every message from its context.
SessionFn = Callable[[Context], ClientSession]
#: ``objective(points, partition_id)``: values of an ``(n, d)`` array of points in the user's units.
UserObjective = Callable[[np.ndarray, int], np.ndarray]
#: Objectives built from a context kept per process, by (run, node): a node builds its objective once, not per message.
_BUILT_LIMIT = 64


class FromContext:
    """``make_objective(context)`` marked as a builder: it returns the node's ``objective(points)``.

    What tells the two forms of :func:`~pfxab_flower.client_apps.objective_client_app`'s objective
    apart: a :class:`FromContext` is called with the node's ``Context`` (once per node and run,
    in each process), any other callable with ``(points, partition_id)`` on every evaluation.
    Calling it calls ``make_objective``.
    """

    def __init__(self, make_objective: Callable[[Context], Objective]) -> None:
        if not callable(make_objective) or isinstance(make_objective, FromContext):
            raise ConfigError(f"make_objective={make_objective!r} is invalid; allowed: a callable "
                              "make_objective(context) returning objective(points)")
        self.make_objective = make_objective
        update_wrapper(self, make_objective)
        self._built: OrderedDict[tuple[int, int], Objective] = OrderedDict()

    def __call__(self, context: Context) -> Objective:
        return self.make_objective(context)

    def objective_of(self, context: Context) -> Objective:
        """The node's objective, built by ``make_objective(context)`` on its first message of a run."""
        key = (int(context.run_id), int(context.node_id))
        if key not in self._built:
            made = self.make_objective(context)
            if not callable(made):
                raise ConfigError(f"make_objective(context) returned {type(made).__name__}; allowed: a callable "
                                  "objective(points) giving one value per row of an (n, d) array")
            self._built[key] = made
            if len(self._built) > _BUILT_LIMIT:
                self._built.popitem(last=False)
        return self._built[key]


def from_context(make_objective: Callable[[Context], Objective]) -> FromContext:
    """Mark ``make_objective(context) -> objective(points)`` for ``objective_client_app`` (also as a decorator)."""
    return FromContext(make_objective)

#: The run-config keys that define the bundled app's problem (everything else is ignored by clients).
PROBLEM_KEYS = ("problem", "clients", "noise", "noise-sigma", "evaluation", "spread", "landmine-data", "fields",
                "seed")  # a seeded problem's federation (the shifted ones: their translation) depends on the seed
FAULT_KEYS = ("fail-rate", "fail-clients", "straggle-seconds", "round-timeout")


#: Where a node without a ``partition-id`` keeps the client index the server assigned it.
ASSIGNED_STATE = "pfxab-assigned-client"


def partition_id(node_config: Mapping[str, object]) -> int:
    """The node's client index, ``partition-id`` (a node beyond the run's clients will stand by)."""
    value = node_config.get("partition-id")
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ConfigError(f"partition-id={value!r} is invalid; allowed: an integer >= 0 (node config)")
    return int(value)


def client_index(context: Context) -> int:
    """The node's client index: its ``partition-id`` if its node config has one, else the index the server
    assigned it in the run's first message (Message API; :func:`remember_assignment`)."""
    if "partition-id" in context.node_config:
        return partition_id(context.node_config)
    if ASSIGNED_STATE not in context.state:
        raise ConfigError("this node has no partition-id and no client index from the server (it was not "
                          "connected when the run's first message went out, or it restarted since); allowed: "
                          "--node-config partition-id=N, or a node connected from the run's start")
    index = context.state.config_records[ASSIGNED_STATE]["client-index"]  # what remember_assignment wrote
    assert isinstance(index, int)
    return index


@contextmanager
def failures_named(context: Context) -> Iterator[None]:
    """Inside, an exception (an objective's, a builder's) leaves as a :class:`ClientFailedError` naming the client,
    the node's site and the exception's type and message (:func:`~pfxab_flower.errors.client_failure_text`).

    Flower still sends its error reply (and keeps no state change of the failed message); the
    server reads the one line whatever Flower wrapped around it.
    """
    try:
        yield
    except Exception as exc:
        try:
            client: int | None = client_index(context)
        except ConfigError:
            client = None
        raise ClientFailedError(client_failure_text(exc, client, site_label(context))) from exc


def site_label(context: Context) -> str | None:
    """The ``site`` label the node's config declares (``--node-config 'site="..."'``), if it is text."""
    site = context.node_config.get(codec.SITE)
    return site if isinstance(site, str) else None


def remember_assignment(config: Mapping[str, Any], context: Context) -> None:
    """Keep the client index the run's first message assigns this node (only a node without a partition-id)."""
    if "partition-id" in context.node_config:
        return
    index = codec.assigned_index(config, context.node_id)
    if index is not None:
        context.state[ASSIGNED_STATE] = ConfigRecord({"client-index": index})


def federation_sessions(
    federation: Federation | None = None, faults: FaultPlan | None = None, *, config: RunConfig | None = None
) -> SessionFn:
    """Simulation nodes of ``federation``, of the problem ``config`` names, or of the run config's (``flwr run``).

    ``config`` instead of ``federation`` builds the problem once in each process that runs a
    node (:func:`cached_federation`): Flower's Ray engine pickles the ClientApp, closure
    included, with every message, and a closure over a federation of ``M`` clients made each
    message cost O(M) (60 KB and ~2.5 ms to pickle at M = 1000, then as much to unpickle:
    docs/performance.md); a ``RunConfig`` is a few hundred bytes. A ``federation`` given as
    itself is put in Ray's object store once and fetched once per worker
    (:class:`~pfxab_flower.client_apps.sent_once.SentOnce`). ``faults`` (or the run
    config's ``fail-rate``, ``fail-clients``, ``straggle-seconds``) injects dropouts and
    stragglers, as the in-process engine does with the same plan.
    """

    shared = SentOnce(federation) if federation is not None else None  # pickled once under Ray, not per message

    def session_fn(context: Context) -> ClientSession:
        fed, plan = (shared.value if shared is not None else None), faults
        if fed is None and config is not None:
            fed = cached_federation(config)
        if fed is None or plan is None:
            run_config, options = problem_of(context.run_config)
            fed = fed if fed is not None else cached_federation(run_config)
            plan = plan if plan is not None else options.faults(run_config.seed)
        client = client_index(context)
        make_env = lambda saved: SimulatedEnvironment.restored(fed, client, saved)  # noqa: E731
        return ClientSession(client, FlowerStore(context.state), make_env, plan)

    return session_fn


def objective_sessions(
    objective: UserObjective | FromContext, domain: Domain | Mapping[str, tuple[Any, ...]], *, noise_sigma: float = 0.1,
    noise: str = "uniform", evaluation: str | None = None,
    value_range: tuple[float, float] = (-VALUE_LIMIT, VALUE_LIMIT),
) -> SessionFn:
    """Nodes optimising ``objective`` on ``domain`` as ``evaluation`` says (``None``: the run config's, else simulated).

    ``objective`` is ``objective(points, partition_id)``, or a :class:`FromContext` builder of each
    node's ``objective(points)``.
    """
    domain = domain if isinstance(domain, Domain) else Domain.from_mapping(domain)

    def session_fn(context: Context) -> ClientSession:
        client = client_index(context)
        if isinstance(objective, FromContext):
            own = objective.objective_of(context)
        else:
            own = lambda points: objective(points, client)  # noqa: E731
        mode = evaluation if evaluation is not None else run_config_evaluation(context.run_config)
        # sitting at index ``client`` keeps the noise stream and an ObjectiveError's client number the node's
        fed = Federation.from_callables([own] * (client + 1), domain, noise_sigma=noise_sigma, noise=noise,
                                        name="custom", value_range=value_range, evaluation=mode)
        make_env = lambda saved: SimulatedEnvironment.restored(fed, client, saved)  # noqa: E731
        return ClientSession(client, FlowerStore(context.state), make_env, NO_FAULTS)

    return session_fn


def run_config_evaluation(run_config: Mapping[str, Any]) -> str:
    """The run config's ``evaluation`` key, checked (``simulated`` when it has none)."""
    with spelled_as("key", unless_set=True):
        evaluation: str = parse("evaluation", run_config.get("evaluation", "simulated"))
    return evaluation


def problem_of(run_config: Mapping[str, Any]) -> tuple[RunConfig, AppOptions]:
    """The problem and fault options of a run config, from their own keys only (others ignored)."""
    from pfxab_flower.schema.run_config import parse_run_config

    mine = {k: v for k, v in run_config.items() if k in PROBLEM_KEYS or k in FAULT_KEYS}
    return parse_run_config(mine)


@lru_cache(maxsize=4)
def cached_federation(config: RunConfig) -> Federation:
    """The run config's federation, built once per process (a cache only: sessions never rely on it)."""
    return build_federation(config)
