"""Hostile rewrites of a client's reply on the Message API's wire, shared by the loopback and the Ray tests.

Each takes the server's message and the honest reply and returns what a malicious node
sends instead: its pull log changed, or its reply for another client. They edit only the
encoded payload (what a node controls), never the server.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from flwr.app import Message

from pfxab_flower.flower_shared import records
from pfxab_flower.running.wire import codec

PULL_NODES = codec.HARNESS_PREFIX + "pull-nodes"
PULL_COUNTS = codec.HARNESS_PREFIX + "pull-counts"


def is_final(message: Message) -> bool:
    """Whether the server's message is the final exchange's."""
    return codec.FINISH_KEY in message.content.config_records[records.CONFIG]


def phase_of(message: Message) -> int:
    """The phase of a server message (the final exchange's: a large number, after every phase)."""
    config = message.content.config_records[records.CONFIG]
    return 1_000_000 if codec.FINISH_KEY in config else int(config["phase"])


def rewrite(reply: Message, message: Message, edit: Callable[[list[np.ndarray], dict], None]) -> Message:
    """``reply`` with its payload edited in place by ``edit(arrays, config)``."""
    if reply.has_error():
        return reply
    arrays, config = records.from_record(reply.content)
    edit(arrays, config)
    return Message(records.to_record(arrays, config), reply_to=message)


def edit_pull_log(message: Message, reply: Message,
                  change: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]) -> Message:
    """The reply with its pull log ``(node ids, counts)`` replaced by ``change(node ids, counts)``."""

    def edit(arrays: list[np.ndarray], config: dict) -> None:
        nodes, counts = (np.frombuffer(config[key], dtype="<i8").copy() for key in (PULL_NODES, PULL_COUNTS))
        nodes, counts = change(nodes, counts)
        config[PULL_NODES] = np.asarray(nodes).astype("<i8").tobytes()
        config[PULL_COUNTS] = np.asarray(counts).astype("<i8").tobytes()

    return rewrite(reply, message, edit)


def claim(client: int) -> Callable[[Message, Message], Message]:
    """A rewrite that makes a reply claim to come from ``client``."""

    def edit(arrays: list[np.ndarray], config: dict) -> None:
        config[codec.PARTITION_ID] = client

    return lambda message, reply: rewrite(reply, message, edit)


def from_node(node: int, rewrite_reply: Callable[[Message, Message], Message], first_phase: int = 1,
              finals: bool = True) -> Callable[[Message, Message], Message]:
    """``rewrite_reply`` applied to node ``node``'s replies from ``first_phase`` on (the final one if ``finals``)."""

    def tamper(message: Message, reply: Message) -> Message:
        if message.metadata.dst_node_id != node or phase_of(message) < first_phase:
            return reply
        if is_final(message) and not finals:
            return reply
        return rewrite_reply(message, reply)

    return tamper
