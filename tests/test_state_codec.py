"""A node's state on disk (``client_apps.state_codec``): every record type and value back exactly, nothing else read.

The codec stands in for Flower's own encoding of records (``flwr.proto``/``flwr.common.serde``,
not public API); what a node keeps is ours (``FlowerStore``) and Flower's SecAgg+ mod's
(bytes, lists of bytes, node ids beyond int64).
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, MetricRecord, RecordDict

from pfxab_flower.client_apps.site_state import STATE_DIR, restore_state, save_state
from pfxab_flower.client_apps.state_codec import decode, encode
from pfxab_flower.errors import ConfigError


def every_kind() -> RecordDict:
    config = ConfigRecord({
        "int": -3, "node": 2**64 - 5, "float": 0.1, "nan": math.nan, "inf": -math.inf, "str": "séance",
        "bytes": b"\0\1", "empty-bytes": b"", "bool": True, "ints": [1, 2**63], "floats": [1.0, 2.5], "strs": ["a", ""],
        "bytes-list": [b"x", b"\xff" * 3], "bools": [True, False], "empty": []})
    metrics = MetricRecord({"count": 4, "mean": 2.5, "means": [1.5, -0.0]})
    arrays = ArrayRecord({"points": Array(np.arange(6, dtype=np.float32).reshape(2, 3)),
                          "ids": Array(np.array([2**64 - 1], dtype=np.uint64)), "none": Array(np.zeros(0))})
    return RecordDict({"config": config, "metrics": metrics, "arrays": arrays})


def test_every_record_type_and_value_kind_comes_back_exactly() -> None:
    state = every_kind()
    back = decode(encode(state))
    assert list(back) == list(state)
    assert [type(record) for record in back.values()] == [ConfigRecord, MetricRecord, ArrayRecord]
    for name in ("config", "metrics"):
        original, copy = dict(state[name]), dict(back[name])
        assert list(copy) == list(original)
        for key, value in original.items():
            assert type(copy[key]) is type(value), key
            assert repr(copy[key]) == repr(value), key  # repr: NaN equal to NaN, -0.0 told from 0.0
            if isinstance(value, list):
                assert [type(v) for v in copy[key]] == [type(v) for v in value], key
    for key, array in state["arrays"].items():
        copied = back["arrays"][key].numpy()
        assert copied.dtype == array.numpy().dtype and copied.shape == array.numpy().shape
        assert np.array_equal(copied, array.numpy())


def test_other_bytes_are_refused_and_nothing_is_unpickled() -> None:
    with pytest.raises(ValueError, match=r"^not a node state written by pfxab-flower \(not an \.npz file\)$"):
        decode(b"\x08\x01")  # e.g. an earlier version's protobuf file
    buffer = io.BytesIO()
    np.savez(buffer, layout=np.array([{"a": 1}], dtype=object))  # a pickled object where the layout goes
    with pytest.raises(ValueError, match=r"^not a node state written by pfxab-flower \(ValueError: "):
        decode(buffer.getvalue())


def test_a_state_file_that_cannot_be_read_is_one_line(tmp_path: Path) -> None:
    context = Context(run_id=1, node_id=1, node_config={STATE_DIR: str(tmp_path)}, state=RecordDict(), run_config={})
    (tmp_path / "run-1.state").write_bytes(b"not a state")
    with pytest.raises(ConfigError, match=r"^state-dir='.*' is invalid: run-1.state cannot be read \(not a node "
                                          r"state written by pfxab-flower \(not an \.npz file\)\); allowed: a "
                                          r"directory whose run files this node wrote$"):
        restore_state(context, tmp_path / "run-1.state")


def test_a_saved_state_is_restored_into_an_empty_context(tmp_path: Path) -> None:
    saved = Context(run_id=1, node_id=1, node_config={}, state=every_kind(), run_config={})
    save_state(saved, tmp_path / "run-1.state")
    fresh = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
    assert restore_state(fresh, tmp_path / "run-1.state")
    assert repr(dict(fresh.state["config"])) == repr(dict(saved.state["config"]))
    assert not restore_state(fresh, tmp_path / "run-1.state")  # a state already there is kept
