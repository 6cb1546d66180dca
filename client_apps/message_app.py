"""The Message API's ``ClientApp`` (``@app.train()`` / ``@app.evaluate()``): a codec over a :class:`ClientSession`.

Each message is unpacked (:mod:`pfxab_flower.strategies.records`), decoded into the core
message (:mod:`pfxab_flower.wire.codec`), handed to the node's session, and its reply
packed back. A session that raises (an objective error, an injected failure) makes Flower
send an error reply, which the strategy counts as a failure of that client; its text names
the client, the node's site and the exception (:func:`.sessions.failures_named`). A message
that is not a pfxab-flower server message (another strategy, another version) gets an
error reply saying so, logged once per node (:mod:`.foreign`). A node whose config has a
``state-dir`` keeps its state there too, and takes it back after a restart (:mod:`.site_state`).
The app carries the algorithm registry into the processes it is pickled into
(:class:`~pfxab_flower.algorithms.registry.CarriedAlgorithms`), so an algorithm a script
registered runs on Flower's Ray workers too.
"""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from pfxab_flower.algorithms.registry import CarriedAlgorithms
from pfxab_flower.client_apps.foreign import answer_foreign_messages, read_message
from pfxab_flower.client_apps.sessions import SessionFn, failures_named, remember_assignment, site_label
from pfxab_flower.client_apps.site_state import keep_state_on_disk
from pfxab_flower.strategies import records
from pfxab_flower.wire import codec


def handle_message(session_fn: SessionFn, algorithms: CarriedAlgorithms, message: Message, context: Context) -> Message:
    """The reply to one server message (train or evaluate: the payload says which).

    ``algorithms`` (the app's registry, as pickled into this process) are registered before
    the message, which names its algorithm, is decoded. A node without a ``partition-id``
    keeps the client index the run's first message assigns it
    (:func:`~pfxab_flower.client_apps.sessions.remember_assignment`).
    """
    algorithms.register()
    instruction = read_message(message)
    if "partition-id" not in context.node_config:
        remember_assignment(records.from_record(message.content)[1], context)
    with failures_named(context):
        session = session_fn(context)
        if session.stands_by(instruction.parameters):
            return Message(records.to_record(*codec.standby_payload(session.client)), reply_to=message)
        reply = session.handle(instruction)
    payload = codec.reply_payload(reply.report, reply.harness, site_label(context))
    return Message(records.to_record(*payload), reply_to=message)


def message_client_app(session_fn: SessionFn, algorithms: CarriedAlgorithms | None = None) -> ClientApp:
    """A Message-API ``ClientApp`` running the sessions ``session_fn`` builds (carrying ``algorithms``, or its own)."""
    app = ClientApp(mods=[keep_state_on_disk, answer_foreign_messages])
    algorithms = algorithms if algorithms is not None else CarriedAlgorithms()

    @app.train()
    def train(message: Message, context: Context) -> Message:
        return handle_message(session_fn, algorithms, message, context)

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        return handle_message(session_fn, algorithms, message, context)

    return app
