"""A Message-API ``ClientApp`` (``@app.train()`` / ``@app.evaluate()``) over the same clients.

The work of a message is done by the very client the legacy path uses: the
``client_fn`` (:func:`pfxab_flower.client_apps.make_client_fn` and friends) builds the
``PhasedClient`` around ``ClientMachine``, with its state in ``context.state``; this
module only unpacks the ``RecordDict`` into the payload its ``fit``/``evaluate`` take
and packs their reply (:mod:`pfxab_flower.strategies.records`). A client that raises makes Flower
send an error reply, which the strategy logs, as on the legacy path.
"""

from __future__ import annotations

from collections.abc import Callable

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from pfxab_flower.client_apps.factory import ClientFn
from pfxab_flower.strategies import records


def _numpy_client(client_fn: ClientFn, context: Context):
    """The ``NumPyClient`` behind ``client_fn`` (its ``to_client()`` wrapper keeps it)."""
    client = client_fn(context)
    return getattr(client, "numpy_client", client)


def train_handler(client_fn: ClientFn) -> Callable[[Message, Context], Message]:
    """``train`` messages: exploration, or the final exploitation (``fit``)."""

    def train(message: Message, context: Context) -> Message:
        arrays, config = records.from_record(message.content)
        out, _, metrics = _numpy_client(client_fn, context).fit(arrays, config)
        return Message(records.to_record(out, metrics), reply_to=message)

    return train


def evaluate_handler(client_fn: ClientFn) -> Callable[[Message, Context], Message]:
    """``evaluate`` messages: exploitation while waiting, elimination (``evaluate``)."""

    def evaluate(message: Message, context: Context) -> Message:
        arrays, config = records.from_record(message.content)
        _, _, metrics = _numpy_client(client_fn, context).evaluate(arrays, config)
        return Message(records.to_record([], metrics), reply_to=message)

    return evaluate


def message_client_app(client_fn: ClientFn) -> ClientApp:
    """A Message-API ``ClientApp`` running the clients ``client_fn`` builds."""
    app = ClientApp()
    app.train()(train_handler(client_fn))
    app.evaluate()(evaluate_handler(client_fn))
    return app
