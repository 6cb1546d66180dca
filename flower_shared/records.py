"""The Message API's wire: a payload (:mod:`pfxab_flower.running.wire.codec`) as a ``RecordDict``.

One ``ArrayRecord`` of the codec's named arrays and one ``ConfigRecord``; :func:`record_size` counts
what crossed with the codec's ``wire_size``, so both APIs log the same values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from pfxab_flower.running.wire import codec
from pfxab_flower.running.wire.npy import from_npy

ARRAYS = "arrays"
CONFIG = "config"


def to_record(arrays: Mapping[str, np.ndarray], config: Mapping[str, Any]) -> RecordDict:
    """A payload as a ``RecordDict``."""
    tensors = ArrayRecord({name: Array(np.ascontiguousarray(a)) for name, a in arrays.items()})
    return RecordDict({ARRAYS: tensors, CONFIG: ConfigRecord(dict(config))})


def from_record(record: RecordDict) -> codec.Payload:
    """The payload of a ``RecordDict``; :class:`codec.WireError` (what it holds, what was expected) if it holds none."""
    array_records, config_records = record.array_records, record.config_records  # each a view Flower builds anew
    if ARRAYS not in array_records or CONFIG not in config_records:
        raise codec.WireError(f"message content cannot be read: it holds {describe(record)}; expected records "
                              f"{ARRAYS!r} (ArrayRecord) and {CONFIG!r} (ConfigRecord)")
    try:
        tensors = array_records[ARRAYS]
        config = dict(config_records[CONFIG])
        arrays = {name: array_of(tensors[name]) for name in tensors}
    except Exception as exc:  # any failure to read foreign content is the peer's fault
        raise codec.WireError(f"message content cannot be read: {exc!r}") from exc
    return arrays, config


def array_of(array: Array) -> np.ndarray:
    """An ``Array``'s values: read straight from its ``.npy`` bytes when ``np.save`` wrote them, else ``numpy()``.

    ``Array.numpy()`` runs ``np.load``, whose header parsing (``ast.literal_eval``) was a
    quarter of a client's time per message at M = 1000 (docs/performance.md).
    """
    return from_npy(array.data) if array.stype == "numpy.ndarray" else array.numpy()


def describe(record: RecordDict) -> str:
    """What a foreign message holds, in a few words: its records and their kinds."""
    kinds = [(name, "ArrayRecord") for name in record.array_records]
    kinds += [(name, "ConfigRecord") for name in record.config_records]
    kinds += [(name, "MetricRecord") for name in record.metric_records]
    if not kinds:
        return "no records"
    return "records " + ", ".join(f"{name!r} ({kind})" for name, kind in sorted(kinds))


def record_size(record: RecordDict) -> tuple[int, int]:
    """``(values, bytes)`` of a payload record, counted by :func:`codec.wire_size`."""
    tensors = record.array_records.get(ARRAYS, ArrayRecord())
    config = record.config_records.get(CONFIG, ConfigRecord())
    return codec.wire_size([tensors[key].data for key in tensors], config)
