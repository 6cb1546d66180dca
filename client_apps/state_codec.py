"""A node's ``context.state`` (a ``RecordDict``) as bytes and back, over Flower's public record types.

Flower's own record encoding is internal, so this one is ours: one ``.npz`` file (arrays and bytes
as entries, read with ``allow_pickle=False``) plus a JSON layout of the records and their other values.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict

#: The record types a state holds, by the name the layout gives them.
KINDS: dict[str, type[ArrayRecord | ConfigRecord | MetricRecord]] = {
    "arrays": ArrayRecord, "config": ConfigRecord, "metrics": MetricRecord}
#: The entry that holds the layout: ``[[record name, kind, {key: value}], ...]``.
LAYOUT = "layout"


def encode(state: RecordDict) -> bytes:
    """``state`` as the bytes of one ``.npz`` file; :func:`decode` gives back an equal ``RecordDict``."""
    entries: dict[str, np.ndarray] = {}

    def entry(array: np.ndarray) -> dict[str, str]:
        name = f"entry-{len(entries)}"
        entries[name] = array
        return {"entry": name}  # a value is never a dict: this marks an entry

    def value(item: Any) -> Any:
        if isinstance(item, bytes):
            return entry(np.frombuffer(item, dtype=np.uint8))
        return [value(element) for element in item] if isinstance(item, list) else item

    layout = []
    for name, record in state.items():
        kind = next(kind for kind, record_type in KINDS.items() if isinstance(record, record_type))
        if isinstance(record, ArrayRecord):
            values = {key: entry(array.numpy()) for key, array in record.items()}
        else:
            values = {key: value(item) for key, item in record.items()}
        layout.append([name, kind, values])
    entries[LAYOUT] = np.frombuffer(json.dumps(layout).encode("utf-8"), dtype=np.uint8)
    buffer = io.BytesIO()
    savez: Callable[..., None] = np.savez  # its stub takes **entries for its allow_pickle flag (numpy >= 2.1)
    savez(buffer, **entries)
    return buffer.getvalue()


def decode(data: bytes) -> RecordDict:
    """The ``RecordDict`` that :func:`encode` wrote; ``ValueError`` (saying why) for any other bytes."""
    if not data.startswith(b"PK"):  # every .npz file is a zip file
        raise ValueError("not a node state written by pfxab-flower (not an .npz file)")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as entries:

            def value(item: Any) -> Any:
                if isinstance(item, dict):
                    return entries[item["entry"]].tobytes()
                return [value(element) for element in item] if isinstance(item, list) else item

            state = RecordDict()
            for name, kind, values in json.loads(entries[LAYOUT].tobytes().decode("utf-8")):
                if kind == "arrays":
                    state[name] = ArrayRecord({key: Array(entries[item["entry"]]) for key, item in values.items()})
                else:
                    state[name] = KINDS[kind]({key: value(item) for key, item in values.items()})
            return state
    except Exception as exc:  # any failure to read foreign bytes is the bytes' fault
        raise ValueError(f"not a node state written by pfxab-flower ({type(exc).__name__}: {exc})") from None
