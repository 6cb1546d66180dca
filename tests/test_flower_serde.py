"""Round trips of every core message through the Flower wire types (strategies/serde.py)."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.common import Parameters, parameters_to_ndarrays

from pfxab_flower.algorithms.messages import (
    ActiveSetReport,
    FinishInstruction,
    FinishReport,
    GlobalUpdate,
    LocalReport,
    PhaseInstruction,
    payload_size,
)
from pfxab_flower.strategies import serde

UNION = np.array([4, 5, 7, 9], dtype=np.int64)


def assert_same(a: object, b: object) -> None:
    assert type(a) is type(b)
    for key, value in vars(a).items():
        other = getattr(b, key)
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, other)
            assert np.asarray(other).dtype.kind == value.dtype.kind
        else:
            assert value == other


@pytest.mark.parametrize(
    "instruction", [PhaseInstruction(3, UNION, 12, 40), FinishInstruction(5)], ids=["phase", "finish"]
)
def test_instruction_round_trip(instruction) -> None:
    ins = serde.instruction_to_fit_ins(instruction)
    back = serde.fit_ins_to_instruction(parameters_to_ndarrays(ins.parameters), ins.config)
    assert_same(instruction, back)
    assert serde.wire_size(ins.parameters, ins.config)[0] == payload_size(instruction)[0]


def test_global_update_round_trip_keeps_nan_and_mask() -> None:
    update = GlobalUpdate(3, UNION, np.array([0.5, np.nan, 0.25, 1.0]), 1234, np.array([False, True, False, False]))
    ins = serde.update_to_evaluate_ins(update)
    back = serde.evaluate_ins_to_update(parameters_to_ndarrays(ins.parameters), ins.config)
    assert_same(update, back)
    assert serde.wire_size(ins.parameters, ins.config)[0] == payload_size(update)[0]


def test_local_report_round_trip() -> None:
    report = LocalReport(2, UNION, np.array([0.1, 0.2, 0.0, 0.4]), np.array([10, 10, 0, 30], dtype=np.int64))
    res = serde.ok_fit_res(*serde.report_to_fit_reply(report))
    back, harness = serde.fit_res_to_report(res, finishing=False)
    assert_same(report, back)
    assert harness == []
    assert serde.wire_size(res.parameters, res.metrics)[0] == payload_size(report)[0]


def test_finish_report_round_trip_with_harness_not_counted() -> None:
    report = FinishReport(1, 37)
    log = [np.array([2, 5, 37], dtype=np.int64), np.array([10, 20, 970], dtype=np.int64)]
    res = serde.ok_fit_res(*serde.report_to_fit_reply(report, log))
    back, harness = serde.fit_res_to_report(res, finishing=True)
    assert_same(report, back)
    for sent, received in zip(log, harness, strict=True):
        np.testing.assert_array_equal(sent, received)
    assert serde.wire_size(res.parameters, res.metrics, skip_tensors_after=1)[0] == payload_size(report)[0]


def test_active_set_round_trip() -> None:
    report = ActiveSetReport(4, np.array([8, 9, 14, 15], dtype=np.int64))
    res = serde.ok_evaluate_res(*serde.active_set_to_evaluate_reply(report))
    back = serde.evaluate_res_to_active_set(res)
    assert_same(report, back)
    values, nbytes = serde.wire_size(None, res.metrics)
    assert (values, nbytes) == payload_size(report)


def test_wire_bytes_are_the_serialised_tensors() -> None:
    ins = serde.instruction_to_fit_ins(PhaseInstruction(1, UNION, 1, 1))
    _, nbytes = serde.wire_size(ins.parameters, ins.config)
    assert nbytes == len(ins.parameters.tensors[0]) + 3 * 8
    assert len(ins.parameters.tensors[0]) > UNION.nbytes  # the .npy header crosses too


@pytest.mark.parametrize(
    ("metrics", "tensors", "finishing", "match"),
    [
        ({}, [], False, "partition-id"),
        ({"partition-id": "3"}, [], False, "partition-id"),
        ({"partition-id": 1}, [b"not a npy file"], False, "cannot be decoded"),
        ({"partition-id": 1}, [], False, "0 tensors"),
        ({"partition-id": 1}, [], True, "one-element node id"),
    ],
)
def test_unreadable_fit_replies_raise_wire_error(metrics, tensors, finishing, match) -> None:
    res = serde.ok_fit_res([], 0, metrics)
    res.parameters = Parameters(tensors=tensors, tensor_type="numpy.ndarray")
    with pytest.raises(serde.WireError, match=match):
        serde.fit_res_to_report(res, finishing)


def test_unreadable_active_set_raises_wire_error() -> None:
    with pytest.raises(serde.WireError, match="int64 bytes"):
        serde.evaluate_res_to_active_set(serde.ok_evaluate_res(0.0, 0, {"partition-id": 0, "node-ids": b"abc"}))


def test_malformed_instruction_raises_wire_error() -> None:
    with pytest.raises(serde.WireError):
        serde.fit_ins_to_instruction([], {"phase": 1})
