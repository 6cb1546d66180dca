"""The legacy API's client: a Flower ``NumPyClient`` that is a codec over a ``ClientSession``.

``fit`` carries the phase (or final) instruction, ``evaluate`` the global update. With
``secure_aggregation`` the local means go out as the vector SecAgg+ sums (:mod:`pfxab_flower.running.wire.summed`);
foreign messages and ``state-dir`` are handled as on the Message API (:mod:`.foreign`, :mod:`.site_state`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from flwr.app import Context
from flwr.client import Client, ClientApp, NumPyClient
from flwr.client.mod import secaggplus_mod
from flwr.clientapp.typing import Mod

from pfxab_flower.algorithms.messages import FinishInstruction, LocalReport
from pfxab_flower.algorithms.registry import CarriedAlgorithms
from pfxab_flower.client_apps.failure_replies import reply_with_failure
from pfxab_flower.client_apps.foreign import answer_foreign_messages, read_instruction, require_legacy_records
from pfxab_flower.client_apps.sessions import SessionFn, failures_named, remember_assignment, site_label
from pfxab_flower.client_apps.site_state import keep_state_on_disk
from pfxab_flower.running.client_session import ClientSession
from pfxab_flower.running.wire import codec, summed


class PhasedNumPyClient(NumPyClient):
    """One message of one node: decode, hand to the node's session, encode its reply.

    The session is built from the node's ``context`` when the message has been read, not
    before: a node without a ``partition-id`` learns its client index from the run's first
    message (:func:`~pfxab_flower.client_apps.sessions.remember_assignment`), and its session
    needs that index. Replies carry the node config's ``site`` label, if it declares one.
    """

    def __init__(self, session_fn: SessionFn, context: Context, secure_aggregation: bool = False) -> None:
        self.session_fn = session_fn
        self.node = context  # not ``self.context``: NumPyClient keeps its own there
        self.secure_aggregation = secure_aggregation

    def _session(self, config: dict[str, Any]) -> ClientSession:
        """The node's session, once the message's client assignment (if any) is kept."""
        remember_assignment(config, self.node)
        return self.session_fn(self.node)

    def fit(self, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[list[np.ndarray], int, dict[str, Any]]:
        instruction = read_instruction("legacy API", "train", parameters, config)
        with failures_named(self.node):
            session = self._session(config)
            if session.stands_by(instruction.parameters):
                arrays, metrics = codec.positional(codec.standby_payload(session.client))
                return arrays, 0, metrics
            reply = session.handle(instruction)
        payload = codec.reply_payload(reply.report, reply.harness, site_label(self.node))
        if self.secure_aggregation and isinstance(instruction, FinishInstruction):
            return [np.zeros(1)], 1, codec.arrays_to_config(payload)  # SecAgg+ sums every fit reply's tensors
        if self.secure_aggregation:
            assert isinstance(reply.report, LocalReport)
            return [summed.local_vector(reply.report)], 1, payload[1]
        arrays, metrics = codec.positional(payload)
        return arrays, 1, metrics

    def evaluate(self, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[float, int, dict[str, Any]]:
        update = read_instruction("legacy API", "evaluate", parameters, config)
        with failures_named(self.node):
            session = self._session(config)
            if session.stands_by(update.parameters):
                return 0.0, 0, codec.standby_payload(session.client)[1]
            reply = session.handle(update)
        payload = codec.reply_payload(reply.report, reply.harness, site_label(self.node))
        return 0.0, 1, codec.arrays_to_config(payload)  # no tensors back


def legacy_client_app(
    session_fn: SessionFn, secure_aggregation: bool = False, algorithms: CarriedAlgorithms | None = None
) -> ClientApp:
    """A legacy ``ClientApp`` of the sessions ``session_fn`` builds (through ``secaggplus_mod`` if secure).

    Like the Message API's app, it carries the algorithm registry into the processes it is
    pickled into (:class:`~pfxab_flower.algorithms.registry.CarriedAlgorithms`).
    """
    algorithms = algorithms if algorithms is not None else CarriedAlgorithms()

    def client_fn(context: Context) -> Client:
        algorithms.register()  # before the client decodes a message naming its algorithm
        return PhasedNumPyClient(session_fn, context, secure_aggregation).to_client()

    secure = [secaggplus_mod] if secure_aggregation else []
    mods: list[Mod] = [keep_state_on_disk, answer_foreign_messages, reply_with_failure, *secure, require_legacy_records]
    return ClientApp(client_fn=client_fn, mods=mods)
