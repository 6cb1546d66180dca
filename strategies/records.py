"""The one place where the Message API's ``RecordDict`` becomes tensors and config, and back.

The Message API carries a ``RecordDict``; the legacy API carries ``Parameters`` plus a
config dict. Both carry the same *payload*, which :mod:`pfxab_flower.strategies.serde` defines once
for every core message (``instruction_payload``, ``update_payload``,
``report_to_fit_reply``, ``active_set_to_evaluate_reply``; and back ``fit_ins_to_instruction``,
``evaluate_ins_to_update``, ``reply_to_report``, ``metrics_to_active_set``). This module
only packs a payload into a record and unpacks it::

    RecordDict {"arrays": ArrayRecord {"0000": tensor 0, "0001": tensor 1, ...},
                "config": ConfigRecord {config or metrics}}

Tensors are numpy ``Array``s (``.npy`` bytes, as in the legacy ``Parameters``), keyed by
their position so that their order survives; config values are the legacy ones
(``bool | bytes | float | int | str``). :func:`record_size` counts what crossed Flower with
the same rule as :func:`serde.wire_size`, so both APIs log the same values and bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict
from flwr.common import Parameters

from pfxab_flower.strategies import serde

ARRAYS = "arrays"
CONFIG = "config"


def to_record(arrays: Sequence[np.ndarray], config: Mapping[str, Any]) -> RecordDict:
    """A payload as a ``RecordDict``."""
    tensors = ArrayRecord({f"{i:04d}": Array(np.ascontiguousarray(a)) for i, a in enumerate(arrays)})
    return RecordDict({ARRAYS: tensors, CONFIG: ConfigRecord(dict(config))})


def from_record(record: RecordDict) -> tuple[list[np.ndarray], dict[str, Any]]:
    """The payload of a ``RecordDict``; :class:`serde.WireError` if it holds none."""
    try:
        tensors = record.array_records[ARRAYS]
        config = dict(record.config_records[CONFIG])
        arrays = [tensors[key].numpy() for key in sorted(tensors)]
    except Exception as exc:  # any failure to read foreign content is the peer's fault
        raise serde.WireError(f"message content cannot be read: {exc!r}") from exc
    return arrays, config


def record_size(record: RecordDict, skip_tensors_after: int | None = None) -> tuple[int, int]:
    """``(values, bytes)`` of a payload, counted as :func:`serde.wire_size` counts a legacy one."""
    tensors = record.array_records.get(ARRAYS, ArrayRecord())
    config = record.config_records.get(CONFIG, ConfigRecord())
    parameters = Parameters(tensors=[tensors[key].data for key in sorted(tensors)], tensor_type="numpy.ndarray")
    return serde.wire_size(parameters, config, skip_tensors_after)
