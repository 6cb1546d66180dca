"""The Message API's wire: a payload (tensors + config, :mod:`.serde`) as a ``RecordDict``, and back.

::

    RecordDict {"arrays": ArrayRecord {"0000": tensor 0, "0001": tensor 1, ...},
                "config": ConfigRecord {config or metrics}}

Tensors are numpy ``Array``s (``.npy`` bytes, as in the legacy ``Parameters``), keyed by
their position so that their order survives; config values are the legacy ones
(``bool | bytes | float | int | str``). :func:`record_size` counts what crossed Flower with
:func:`serde.wire_size`, so both APIs log the same values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from pfxab_flower.strategies import serde

ARRAYS = "arrays"
CONFIG = "config"


def to_record(arrays: Sequence[np.ndarray], config: Mapping[str, Any]) -> RecordDict:
    """A payload as a ``RecordDict``."""
    tensors = ArrayRecord({f"{i:04d}": Array(np.ascontiguousarray(a)) for i, a in enumerate(arrays)})
    return RecordDict({ARRAYS: tensors, CONFIG: ConfigRecord(dict(config))})


def from_record(record: RecordDict) -> tuple[list[np.ndarray], dict[str, Any]]:
    """The payload of a ``RecordDict``; :class:`serde.WireError` (what it holds, what was expected) if it holds none."""
    array_records, config_records = record.array_records, record.config_records  # each a view Flower builds anew
    if ARRAYS not in array_records or CONFIG not in config_records:
        raise serde.WireError(f"message content cannot be read: it holds {describe(record)}; expected records "
                              f"{ARRAYS!r} (ArrayRecord) and {CONFIG!r} (ConfigRecord)")
    try:
        tensors = array_records[ARRAYS]
        config = dict(config_records[CONFIG])
        arrays = [array_of(tensors[key]) for key in sorted(tensors)]
    except Exception as exc:  # any failure to read foreign content is the peer's fault
        raise serde.WireError(f"message content cannot be read: {exc!r}") from exc
    return arrays, config


def array_of(array: Array) -> np.ndarray:
    """An ``Array``'s values: read straight from its ``.npy`` bytes when ``np.save`` wrote them, else ``numpy()``.

    ``Array.numpy()`` runs ``np.load``, which parses the header with ``ast.literal_eval``:
    measured at M = 1000 (docs/performance.md) that was a quarter of a client's time per
    message. The header ``np.save`` writes for a C-ordered array of booleans or numbers is
    matched exactly, and the data must be exactly as long as its shape says; anything else
    (another writer, another version, a foreign sender) goes through ``numpy()`` unchanged.
    """
    layout = serde.npy_layout(array.data) if array.stype == "numpy.ndarray" else None
    if layout is not None:
        dtype, shape, offset = layout
        return np.frombuffer(array.data, dtype=dtype, offset=offset).reshape(shape).copy()
    return array.numpy()


def describe(record: RecordDict) -> str:
    """What a foreign message holds, in a few words: its records and their kinds."""
    kinds = [(name, "ArrayRecord") for name in record.array_records]
    kinds += [(name, "ConfigRecord") for name in record.config_records]
    kinds += [(name, "MetricRecord") for name in record.metric_records]
    if not kinds:
        return "no records"
    return "records " + ", ".join(f"{name!r} ({kind})" for name, kind in sorted(kinds))


def record_size(record: RecordDict) -> tuple[int, int]:
    """``(values, bytes)`` of a payload record, counted by :func:`serde.wire_size`."""
    tensors = record.array_records.get(ARRAYS, ArrayRecord())
    config = record.config_records.get(CONFIG, ConfigRecord())
    return serde.wire_size([tensors[key].data for key in sorted(tensors)], config)
