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

import math
import re
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from pfxab_flower.strategies import serde

ARRAYS = "arrays"
CONFIG = "config"
#: The ``.npy`` header ``np.save`` writes for a C-ordered array of a plain dtype (version 1.0).
NPY_HEADER = re.compile(rb"\{'descr': '([<>|=]?[biuf]\d{1,2})', 'fortran_order': False, 'shape': \(([\d, ]*)\), \} *\n")
NPY_MAGIC = b"\x93NUMPY\x01\x00"


def to_record(arrays: Sequence[np.ndarray], config: Mapping[str, Any]) -> RecordDict:
    """A payload as a ``RecordDict``."""
    tensors = ArrayRecord({f"{i:04d}": Array(np.ascontiguousarray(a)) for i, a in enumerate(arrays)})
    return RecordDict({ARRAYS: tensors, CONFIG: ConfigRecord(dict(config))})


def from_record(record: RecordDict) -> tuple[list[np.ndarray], dict[str, Any]]:
    """The payload of a ``RecordDict``; :class:`serde.WireError` (what it holds, what was expected) if it holds none."""
    if ARRAYS not in record.array_records or CONFIG not in record.config_records:
        raise serde.WireError(f"message content cannot be read: it holds {describe(record)}; expected records "
                              f"{ARRAYS!r} (ArrayRecord) and {CONFIG!r} (ConfigRecord)")
    try:
        tensors = record.array_records[ARRAYS]
        config = dict(record.config_records[CONFIG])
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
    data = array.data
    if array.stype == "numpy.ndarray" and data[:8] == NPY_MAGIC and len(data) >= 10:
        (length,) = struct.unpack_from("<H", data, 8)
        header = NPY_HEADER.fullmatch(data[10:10 + length])
        if header is not None:
            shape = tuple(int(n) for n in header.group(2).split(b",") if n.strip())
            dtype = np.dtype(header.group(1).decode())
            if len(data) - 10 - length == math.prod(shape) * dtype.itemsize:
                return np.frombuffer(data, dtype=dtype, offset=10 + length).reshape(shape).copy()
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
