"""A server message this ClientApp cannot read: one error reply naming what was expected, logged once per node.

Another strategy, version or Flower API may send messages we cannot run; instead of a traceback per
message, :func:`answer_foreign_messages` turns :class:`ForeignMessageError` into Flower's error reply
(counted as a failed reply) and logs the reason once per node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from logging import ERROR
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, Context, Error, Message, MessageType
from flwr.clientapp.typing import ClientAppCallable
from flwr.common import log

from pfxab_flower import __version__
from pfxab_flower.errors import ConfigError
from pfxab_flower.flower_shared import records
from pfxab_flower.flower_shared.flower_internals import CLIENT_APP_RAISED
from pfxab_flower.printable import printable
from pfxab_flower.running.client_session import Instruction
from pfxab_flower.running.wire import codec

#: The node's ``context.state`` entry that marks the reason as logged.
LOGGED_KEY = "pfxab-foreign-message"
#: Where the legacy API's ``FitIns`` / ``EvaluateIns`` travel in a Flower message (``flwr.compat``'s names).
LEGACY_RECORDS = {MessageType.TRAIN: "fitins", MessageType.EVALUATE: "evaluateins"}
EXPECTED = {
    "Message API": "pfxab-flower's PFXAB, FedPNE or PFPNE strategy (Message API)",
    "legacy API": "pfxab-flower's PFXABStrategy, FedPNEStrategy or PFPNEStrategy (legacy API)",
}


class ForeignMessageError(ValueError):
    """A server message this ClientApp cannot read; the text is the error reply's reason."""

    def __init__(self, api: str, message_type: str, problem: str) -> None:
        super().__init__(  # the problem names what the server sent (its keys): printable before it is logged
            f"pfxab-flower {__version__} ClientApp cannot read this {printable(message_type, 80)} message: "
            f"{printable(problem)}; it answers only {EXPECTED[api]} of the same version"
        )


def read_instruction(
    api: str, message_type: str, arrays: Mapping[str, np.ndarray] | Sequence[np.ndarray], config: Mapping[str, Any]
) -> Instruction:
    """The server message in a payload, its parameters checked (by their decoding, ``AlgorithmSpec.from_wire``);
    :class:`ForeignMessageError` if there is none. ``arrays`` is the legacy API's tensor list or the
    Message API's named arrays."""
    try:
        if not isinstance(arrays, Mapping):  # the legacy API: names in the config, if it is one of ours
            arrays, config = codec.from_positional(arrays, config) if codec.carries_parameters(config) else \
                ({f"tensor {i}": a for i, a in enumerate(arrays)}, config)
        instruction = codec.read_broadcast(arrays, config)
    except (codec.WireError, ConfigError) as exc:
        raise ForeignMessageError(api, message_type, str(exc)) from None
    return instruction


def read_message(message: Message) -> Instruction:
    """The server message a Message-API message carries (records ``arrays`` + ``config``)."""
    message_type = message.metadata.message_type
    try:
        payload = records.from_record(message.content)
    except codec.WireError as exc:
        raise ForeignMessageError("Message API", message_type, str(exc)) from None
    return read_instruction("Message API", message_type, *payload)


def require_legacy_records(message: Message, context: Context, call_next: ClientAppCallable) -> Message:
    """A mod: a train/evaluate message must hold the legacy ``FitIns``/``EvaluateIns`` records.

    Flower's legacy conversion would fail with a ``KeyError`` (and a traceback) before
    our client sees the message; this says what the message holds instead.
    """
    prefix = LEGACY_RECORDS.get(message.metadata.message_type)
    content = message.content if message.has_content() else None
    if prefix is not None and content is not None and (
            f"{prefix}.parameters" not in content.array_records or f"{prefix}.config" not in content.config_records):
        raise ForeignMessageError("legacy API", message.metadata.message_type,
                                  f"it holds {records.describe(content)}; expected records "
                                  f"'{prefix}.parameters' (ArrayRecord) and '{prefix}.config' (ConfigRecord)")
    return call_next(message, context)


def answer_foreign_messages(message: Message, context: Context, call_next: ClientAppCallable) -> Message:
    """A mod: a message the app cannot read gets an error reply with the reason, logged once per node."""
    try:
        return call_next(message, context)
    except ForeignMessageError as exc:
        reason = str(exc)
    if LOGGED_KEY not in context.state:
        context.state[LOGGED_KEY] = ConfigRecord({"reason": reason})
        partition = context.node_config.get("partition-id")
        log(ERROR, "pfxab: Flower node %s (partition-id %s): %s (logged once per node; each such message gets "
            "this error reply)", context.node_id, partition, reason)
    return Message(Error(code=CLIENT_APP_RAISED, reason=reason), reply_to=message)
