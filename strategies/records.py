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
    if ARRAYS not in record.array_records or CONFIG not in record.config_records:
        raise serde.WireError(f"message content cannot be read: it holds {describe(record)}; expected records "
                              f"{ARRAYS!r} (ArrayRecord) and {CONFIG!r} (ConfigRecord)")
    try:
        tensors = record.array_records[ARRAYS]
        config = dict(record.config_records[CONFIG])
        arrays = [tensors[key].numpy() for key in sorted(tensors)]
    except Exception as exc:  # any failure to read foreign content is the peer's fault
        raise serde.WireError(f"message content cannot be read: {exc!r}") from exc
    return arrays, config


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
