"""A client's state in Flower's ``context.state``: the :class:`~pfxab_flower.session.ClientStore` of a Flower node.

Flower builds a new client for every message, and module globals are not reliable
either, so what a session keeps between messages (its machine's state and its
environment's, e.g. the pull log) lives in the node's ``context.state``.
"""

from __future__ import annotations

import numpy as np
from flwr.app import ConfigRecord, RecordDict

from pfxab_flower.algorithms.phased import ClientState
from pfxab_flower.session import EnvironmentState

STATE_KEY = "pfxab-client-state"
ENVIRONMENT_KEY = "pfxab-environment"


class FlowerStore:
    """Keeps a session's state in a ``RecordDict`` (a node's ``context.state``)."""

    def __init__(self, state: RecordDict) -> None:
        self.state = state

    def load(self) -> tuple[ClientState, EnvironmentState | None]:
        machine = ClientState.from_arrays(unpack(self.state[STATE_KEY])) if STATE_KEY in self.state else ClientState()
        environment = unpack(self.state[ENVIRONMENT_KEY]) if ENVIRONMENT_KEY in self.state else None
        return machine, environment

    def save(self, state: ClientState, environment: EnvironmentState) -> None:
        self.state[STATE_KEY] = pack(state.to_arrays())
        self.state[ENVIRONMENT_KEY] = pack(environment)


def pack(arrays: dict[str, np.ndarray]) -> ConfigRecord:
    """1-D arrays as raw bytes plus dtype in a ``ConfigRecord``.

    Measured (docs/performance.md): an ``ArrayRecord`` of ``.npy`` arrays costs ~1.5 ms
    per message to write and read back (``np.save`` headers, ``ast`` parsing), more than
    the client's own work in a phase; raw bytes cost a few microseconds.
    """
    record = ConfigRecord()
    for key, value in arrays.items():
        value = np.ascontiguousarray(value).reshape(-1)
        record[key] = value.tobytes()
        record[f"{key}.dtype"] = value.dtype.str
    return record


def unpack(record: ConfigRecord) -> dict[str, np.ndarray]:
    return {key: np.frombuffer(value, dtype=record[f"{key}.dtype"]).copy()
            for key, value in record.items() if not key.endswith(".dtype")}
