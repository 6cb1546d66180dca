"""Flower's Message-API ``Strategy.start`` loop over an in-process grid: the Message adapters without Ray.

Each node keeps one ``Context`` (its ``context.state`` persists across messages,
as in simulation) and the ``ClientApp`` handles every message, as Flower does; the
replies come back shuffled (a seeded order), as over a network. A legacy ``ClientApp``
works too, under Flower's legacy workflow (``run_legacy_workflow``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from types import SimpleNamespace

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.constant import ErrorCode
from flwr.server import History
from flwr.serverapp.strategy import Result
from flwr.supercore.task_identity import TaskIdentity
from ray import cloudpickle  # what Flower's Ray engine pickles the ClientApp with (importing it starts no Ray)

from pfxab_flower.strategies import LegacyPhasedEliminationStrategy, PhasedEliminationStrategy
from pfxab_flower.strategies.secure import run_legacy_workflow


class LoopbackGrid:
    """The part of ``flwr.serverapp.Grid`` a strategy uses: node ids and ``send_and_receive``."""

    def __init__(self, num_nodes: int, app: ClientApp, seed: int = 0,
                 tamper: Callable[[Message, Message], Message] | None = None, repickle: bool = False) -> None:
        self.app = app
        self.repickle = repickle  # a fresh copy of the app for every message, as Flower's Ray engine unpickles one
        self.rng = random.Random(seed)
        self.tamper = tamper
        self.sent = 0
        self.run = SimpleNamespace(run_id=1)  # what Flower's legacy workflow reads of a grid
        self.contexts = {
            100 + m: Context(run_id=1, node_id=100 + m, node_config={"partition-id": m, "num-partitions": num_nodes},
                             state=RecordDict(), run_config={})
            for m in range(num_nodes)
        }

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        replies = []
        for message in messages:
            self.sent += 1
            message.metadata.__dict__["_message_id"] = f"m{self.sent}"
            TaskIdentity.node_id = message.metadata.dst_node_id  # what each SuperNode process sets
            app = cloudpickle.loads(cloudpickle.dumps(self.app)) if self.repickle else self.app
            try:
                reply = app(message, self.contexts[message.metadata.dst_node_id])
            except Exception as exc:  # Flower replies with an error when a ClientApp raises
                reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=str(exc)), reply_to=message)
            replies.append(self.tamper(message, reply) if self.tamper else reply)
        TaskIdentity.node_id = 1  # back to the ServerApp's
        self.rng.shuffle(replies)
        return replies


def as_a_serverapp_process() -> None:
    """Set what a ServerApp process sets before it builds messages: Flower's ``Message`` reads its run, node and task
    from ``TaskIdentity`` (each test starts with them unset, ``tests/conftest.py``)."""
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 1, 1


def run_loopback(strategy: PhasedEliminationStrategy, grid: LoopbackGrid) -> Result:
    """Flower's own ``Strategy.start`` over the loopback grid, for the strategy's number of rounds."""
    as_a_serverapp_process()
    return strategy.start(grid, timeout=60.0)  # type: ignore[arg-type]


def run_legacy_workflow_loopback(strategy: LegacyPhasedEliminationStrategy, grid: LoopbackGrid) -> History:
    """Flower's legacy workflow (as the bundled app runs a legacy strategy) over the loopback grid of messages; not
    ``tests.flower_loopback.run_loopback``, Flower's legacy ``Server`` over client proxies."""
    as_a_serverapp_process()
    context = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
    return run_legacy_workflow(grid, context, strategy, strategy.num_rounds, 60.0)  # type: ignore[arg-type]
