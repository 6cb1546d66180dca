"""The bundled Flower apps: one run of a :class:`RunConfig` on either Flower API, results written.

``message`` (default): a Message-API strategy and :func:`~pfxab_flower.client_apps.message_client_app`;
``legacy``: a legacy strategy in Flower's legacy workflow and :func:`~pfxab_flower.client_apps.legacy_client_app`
(with SecAgg+ when ``secure-aggregation = true``). The ServerApp reads the whole run config, the
ClientApp only the problem's and the fault plan's keys.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from pfxab_flower.algorithms.registry import CarriedAlgorithms
from pfxab_flower.client_apps import federation_sessions, legacy_client_app, message_client_app
from pfxab_flower.client_apps.sessions import SessionFn
from pfxab_flower.errors import RunStoppedError
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.federation import Federation
from pfxab_flower.running.engine import describe_problem
from pfxab_flower.running.results import RunResult
from pfxab_flower.schema.run_config import AppOptions, RunConfig, parse_run_config
from pfxab_flower.schema.spec import FULL_RANGE, AlgorithmSpec
from pfxab_flower.strategies import LEGACY_STRATEGIES, STRATEGIES
from pfxab_flower.strategies.secure import run_legacy_workflow

#: Called with the run's result, or with the reason the server stopped it.
ResultFn = Callable[[RunResult], None]
StopFn = Callable[[str], None]


def strategy_of(config: RunConfig, options: AppOptions, federation: Federation | None) -> Any:
    """The strategy of a run config on the API its options name (``message``, or ``legacy`` / secure)."""
    spec = AlgorithmSpec.from_config(config, federation.reward_range if federation is not None else FULL_RANGE,
                                     federation.domain.ndim if federation is not None else None)
    kwargs: dict[str, Any] = dict(spec=spec, min_fraction=options.min_fraction, round_timeout=options.round_timeout,
                                  federation=federation)
    if options.api == "legacy" or options.secure_aggregation:
        return LEGACY_STRATEGIES[config.algorithm](secure_aggregation=options.secure_aggregation, **kwargs)
    return STRATEGIES[config.algorithm](**kwargs)


def run_server(
    grid: Grid, context: Context, config: RunConfig, options: AppOptions, federation: Federation,
    describe: dict[str, Any],
) -> RunResult | str:
    """One run on ``grid``: its scored result, or the reason the server stopped it."""
    strategy = strategy_of(config, options, federation)
    if options.api == "legacy" or options.secure_aggregation:
        run_legacy_workflow(grid, context, strategy, strategy.num_rounds, options.round_timeout)
    else:
        with contextlib.suppress(RunStoppedError):  # the reason is kept by the strategy
            strategy.start(grid=grid)
    reason: str | None = strategy.stop_reason
    if reason is not None:
        return reason
    result: RunResult = strategy.run_result(describe)
    return result


def server_app(
    config: RunConfig | None = None,
    options: AppOptions | None = None,
    *,
    federation: Federation | None = None,
    describe: dict[str, Any] | None = None,
    on_result: ResultFn | None = None,
    on_stop: StopFn | None = None,
) -> ServerApp:
    """The ServerApp of a run; without ``config`` it reads ``context.run_config`` (``flwr run``)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        run, opts = (config, options or AppOptions()) if config is not None else parse_run_config(context.run_config)
        fed = federation if federation is not None else build_federation(run)
        facts = describe if describe is not None else (describe_problem(run) if federation is None else {})
        outcome = run_server(grid, context, run, opts, fed, facts)
        if isinstance(outcome, str):
            if on_stop is not None:
                on_stop(outcome)
        elif on_result is not None:
            on_result(outcome)

    return app


class BuiltClientApp(ClientApp):
    """A ``ClientApp`` that pickles as the call that built it: ``build(*arguments)``.

    Flower's Ray engine pickles the ClientApp with every message it hands a worker. Pickled
    as itself, ours carried its three API apps and every closure's code (9.6 KB, ~0.4 ms per
    message at M = 1000, docs/performance.md); pickled as the call, only the builder's name
    and its arguments, and each worker builds the app again when it unpickles it.
    """

    def __init__(self, build: Callable[..., ClientApp], *arguments: Any) -> None:
        super().__init__()
        self._built_by = (build, arguments)

    def __reduce__(self) -> tuple[Any, ...]:
        return self._built_by


def client_app(
    session_fn: SessionFn | None = None, options: AppOptions | None = None, algorithms: CarriedAlgorithms | None = None
) -> ClientApp:
    """The ClientApp of a run: the API ``options`` name or, without them, the run config's ``api`` key.

    ``algorithms`` is the registry it carries into Flower's workers (default: this process's).
    """
    sessions = session_fn or federation_sessions()
    algorithms = algorithms if algorithms is not None else CarriedAlgorithms()
    apps = {"message": message_client_app(sessions, algorithms),
            "legacy": legacy_client_app(sessions, False, algorithms),
            "secure": legacy_client_app(sessions, True, algorithms)}

    def api_of(context: Context) -> str:
        opts = options if options is not None else parse_run_config(
            {k: v for k, v in context.run_config.items() if k in ("api", "secure-aggregation")})[1]
        return "secure" if opts.secure_aggregation else opts.api

    app = BuiltClientApp(client_app, session_fn, options, algorithms)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        return apps[api_of(context)](message, context)

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        return apps[api_of(context)](message, context)

    return app
