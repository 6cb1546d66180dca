"""The ``ServerApp``/``ClientApp`` of a run on either Flower API, chosen by the ``api`` run-config key.

* ``message`` (default): :class:`pfxab_flower.strategies.message_strategy.MessagePhasedStrategy` driven
  by ``Strategy.start`` in the ServerApp's ``main``, and :func:`message_client_app`;
* ``legacy``: the ``server_fn`` / ``client_fn`` apps (``PhasedStrategy`` + ``PhasedClient``).

Both are built from the same ``server_fn`` (:func:`pfxab_flower.simulations.server_app.make_server_fn`:
run config, federation, legacy strategy with its ``on_finish``) and ``client_fn``: the
Message-API strategy takes the legacy strategy's machine and callbacks
(:meth:`MessagePhasedStrategy.from_legacy`), and the Message-API client app calls the
legacy client's ``fit``/``evaluate``. So the two paths differ only in transport.
Under ``flwr run`` the apps read ``api`` from ``context.run_config`` for every run.
"""

from __future__ import annotations

from collections.abc import Callable

from flwr.app import ArrayRecord, Context, Message
from flwr.client import ClientApp
from flwr.server import ServerApp, ServerAppComponents
from flwr.serverapp import Grid

from pfxab_flower.client_apps.factory import ClientFn
from pfxab_flower.client_apps.message_app import evaluate_handler, message_client_app, train_handler
from pfxab_flower.strategies.message_strategy import MessagePhasedStrategy
from pfxab_flower.strategies.run_config import parse_run_config
from pfxab_flower.strategies.secure import secure_client_app, secure_server_app

ServerFn = Callable[[Context], ServerAppComponents]

#: Seconds between two polls for replies of the simulation's in-memory grid (Flower: 0.1 s).
#: Measured (docs/performance.md): ~0.05 s less per phase at M = 10; no cost seen at M = 100.
PULL_INTERVAL = 0.01


def message_main(server_fn: ServerFn) -> Callable[[Grid, Context], None]:
    """A ServerApp ``main`` running the Message-API twin of ``server_fn``'s strategy."""

    def main(grid: Grid, context: Context) -> None:
        if hasattr(grid, "pull_interval"):  # the simulation's in-memory grid polls for replies
            grid.pull_interval = min(grid.pull_interval, PULL_INTERVAL)
        components = server_fn(context)
        strategy = MessagePhasedStrategy.from_legacy(components.strategy)
        config = components.config
        strategy.start(grid, ArrayRecord(), num_rounds=config.num_rounds, timeout=config.round_timeout or 3600.0)

    return main


def server_app_for(api: str, server_fn: ServerFn) -> ServerApp:
    """The ServerApp of ``api`` (``message`` or ``legacy``) around ``server_fn``."""
    if api == "legacy":
        return ServerApp(server_fn=server_fn)
    app = ServerApp()
    app.main()(message_main(server_fn))
    return app


def client_app_for(api: str, client_fn: ClientFn) -> ClientApp:
    """The ClientApp of ``api`` (``message`` or ``legacy``) around ``client_fn``."""
    return ClientApp(client_fn=client_fn) if api == "legacy" else message_client_app(client_fn)


def _api(context: Context) -> str:
    """``secure`` (SecAgg+, on the legacy API), ``legacy`` or ``message``, from the run config."""
    options = parse_run_config(context.run_config)[1]
    return "secure" if options.secure_aggregation else options.api


def run_config_server_app(server_fn: ServerFn) -> ServerApp:
    """The ServerApp of ``flwr run``: the API named by the run config's ``api`` key."""
    apps = {"legacy": ServerApp(server_fn=server_fn), "secure": secure_server_app(server_fn)}
    main_of_message = message_main(server_fn)
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        api = _api(context)
        if api in apps:
            apps[api](grid, context)
        else:
            main_of_message(grid, context)

    return app


def run_config_client_app(client_fn: ClientFn) -> ClientApp:
    """The ClientApp of ``flwr run``: the API named by the run config's ``api`` key."""
    apps = {"legacy": ClientApp(client_fn=client_fn), "secure": secure_client_app(client_fn)}
    handlers = {"train": train_handler(client_fn), "evaluate": evaluate_handler(client_fn)}
    app = ClientApp()

    def dispatch(kind: str) -> Callable[[Message, Context], Message]:
        def handle(message: Message, context: Context) -> Message:
            api = _api(context)
            return apps[api](message, context) if api in apps else handlers[kind](message, context)

        return handle

    app.train()(dispatch("train"))
    app.evaluate()(dispatch("evaluate"))
    return app
