"""A client's state in Flower's ``context.state``: a Flower node's
:class:`~pfxab_flower.running.client_session.ClientStore`.

Flower builds a new client for every message, so what a session keeps between messages lives in
the node's ``context.state``.
"""

from __future__ import annotations

import numpy as np
from flwr.app import ConfigRecord, RecordDict

from pfxab_flower.algorithms.phased import ClientState
from pfxab_flower.running.client_session import EnvironmentState

STATE_KEY = "pfxab-client-state"
ENVIRONMENT_KEY = "pfxab-environment"


class FlowerStore:
    """Keeps a session's state in a ``RecordDict`` (a node's ``context.state``)."""

    def __init__(self, state: RecordDict) -> None:
        self.state = state

    def load(self) -> tuple[ClientState, EnvironmentState | None]:
        records = self.state.config_records  # what :meth:`save` writes
        machine = ClientState.from_arrays(unpack(records[STATE_KEY])) if STATE_KEY in records else ClientState()
        environment = unpack(records[ENVIRONMENT_KEY]) if ENVIRONMENT_KEY in records else None
        return machine, environment

    def save(self, state: ClientState, environment: EnvironmentState) -> None:
        self.state[STATE_KEY] = pack(state.to_arrays())
        self.state[ENVIRONMENT_KEY] = pack(environment)


#: The two keys of a packed record: where each array lies in the data, and the data.
LAYOUT, DATA = "layout", "data"


def pack(arrays: dict[str, np.ndarray]) -> ConfigRecord:
    """1-D arrays as one bytes value plus their layout (``key:dtype:count;...``) in a ``ConfigRecord``.

    Measured (docs/performance.md): an ``ArrayRecord`` of ``.npy`` arrays costs ~1.5 ms
    per message to write and read back (``np.save`` headers, ``ast`` parsing), more than
    the client's own work in a phase; raw bytes cost a few microseconds. One value for all
    arrays, not one per array: Flower checks every value set in a record (~7 us each),
    which at M = 1000 was a fifth of a client's time per message.
    """
    parts, layout = [], []
    for key, value in arrays.items():
        if ";" in key:
            raise ValueError(f"state key {key!r} is invalid; allowed: a name without ';'")
        value = np.ascontiguousarray(value).reshape(-1)
        parts.append(value.tobytes())
        layout.append(f"{key}:{value.dtype.str}:{value.size}")
    return ConfigRecord({LAYOUT: ";".join(layout), DATA: b"".join(parts)})


def unpack(record: ConfigRecord) -> dict[str, np.ndarray]:
    """The arrays :func:`pack` packed, each a writable copy."""
    data, layout = record[DATA], record[LAYOUT]
    assert isinstance(data, bytes) and isinstance(layout, str)
    arrays, offset = {}, 0
    for entry in layout.split(";") if layout else []:
        key, dtype_name, count = entry.rsplit(":", 2)
        dtype, size = np.dtype(dtype_name), int(count)
        arrays[key] = np.frombuffer(data, dtype=dtype, count=size, offset=offset).copy()
        offset += size * dtype.itemsize
    return arrays
