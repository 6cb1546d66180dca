"""The Message API's ``ClientApp`` (``@app.train()`` / ``@app.evaluate()``): a codec over a ``ClientSession``.

Each message is unpacked, decoded, handed to the node's session and its reply packed back. A failing
session becomes an error reply naming the client and its site; foreign messages are answered by
:mod:`.foreign`; a ``state-dir`` keeps the state across restarts (:mod:`.site_state`). The app carries
the algorithm registry to Ray's workers (:class:`~pfxab_flower.algorithms.registry.CarriedAlgorithms`).
"""

from __future__ import annotations

from collections.abc import Sequence

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.clientapp.typing import Mod

from pfxab_flower.algorithms.registry import CarriedAlgorithms
from pfxab_flower.client_apps.failure_replies import reply_with_failure
from pfxab_flower.client_apps.foreign import answer_foreign_messages, read_message
from pfxab_flower.client_apps.sessions import SessionFn, failures_named, remember_assignment, site_label
from pfxab_flower.client_apps.site_state import keep_state_on_disk
from pfxab_flower.flower_shared import records
from pfxab_flower.running.wire import codec


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


def message_client_app(
    session_fn: SessionFn, algorithms: CarriedAlgorithms | None = None, mods: Sequence[Mod] = ()
) -> ClientApp:
    """A Message-API ``ClientApp`` running the sessions ``session_fn`` builds (carrying ``algorithms``, or its own).

    ``mods`` run first (e.g. :func:`~pfxab_flower.client_apps.site_names.named_sites`); a failure of the node's
    objective is an error reply, without Flower's traceback (:mod:`.failure_replies`).
    """
    app = ClientApp(mods=[*mods, keep_state_on_disk, answer_foreign_messages, reply_with_failure])
    algorithms = algorithms if algorithms is not None else CarriedAlgorithms()

    @app.train()
    def train(message: Message, context: Context) -> Message:
        return handle_message(session_fn, algorithms, message, context)

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        return handle_message(session_fn, algorithms, message, context)

    return app
