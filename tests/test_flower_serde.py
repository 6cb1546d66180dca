"""Round trips of every core message through the payload codec (``serde``) and the Message API's records.

Value counts on the wire equal the core's ``payload_size`` (so every engine logs the same
values); harness data is carried but not counted; unreadable payloads raise ``WireError``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
from flwr.app import ConfigRecord, RecordDict
from flwr.common import ndarrays_to_parameters, parameters_to_ndarrays

from pfxab_flower.algorithms.messages import (
    ActiveSetReport,
    FinishInstruction,
    FinishReport,
    GlobalUpdate,
    LocalReport,
    PhaseInstruction,
)
from pfxab_flower.flower_shared import records
from pfxab_flower.running.engine import payload_size
from pfxab_flower.running.wire import codec
from pfxab_flower.schema.spec import AlgorithmSpec

UNION = np.array([4, 5, 7, 9], dtype=np.int64)
PARAMS = AlgorithmSpec.build("pf-pne", num_clients=5, horizon=10_000, alpha=0.3, seed=7, nu1=2.0, rho=0.4,
                            max_depth=6, pf_pne_eps=0.05, report_pulls=True)
#: A bound with statistics: its broadcasts carry their names in their own parameters (param-confidence).
BERNSTEIN = AlgorithmSpec.build("pf-xab", num_clients=5, horizon=10_000, alpha=0.3, seed=7, confidence="bernstein",
                               reward_range=(-0.1, 1.1))
#: What the version before the spec sent for these parameters (its ``AlgorithmParameters.to_wire``): key, value,
#: type, in order. The spec must send the very same, so the bytes on the wire and the counted values stay.
EARLIER_WIRE = [
    (PARAMS, [
        ['param-algorithm', 'pf-pne', 'str'],
        ['param-num-clients', 5, 'int'],
        ['param-horizon', 10000, 'int'],
        ['param-alpha', 0.3, 'float'],
        ['param-seed', 7, 'int'],
        ['param-nu1', 2.0, 'float'],
        ['param-rho', 0.4, 'float'],
        ['param-max-depth', 6, 'int'],
        ['param-pf-pne-eps', 0.05, 'float'],
        ['param-report-pulls', True, 'bool'],
    ]),
    (BERNSTEIN, [
        ['param-algorithm', 'pf-xab', 'str'],
        ['param-num-clients', 5, 'int'],
        ['param-horizon', 10000, 'int'],
        ['param-alpha', 0.3, 'float'],
        ['param-seed', 7, 'int'],
        ['param-nu1', 1.0, 'float'],
        ['param-rho', 0.5, 'float'],
        ['param-max-depth', 0, 'int'],
        ['param-pf-pne-eps', 0.1, 'float'],
        ['param-report-pulls', False, 'bool'],
        ['param-confidence', 'bernstein', 'str'],
        ['param-reward-low', -0.1, 'float'],
        ['param-reward-high', 1.1, 'float'],
    ]),
    (AlgorithmSpec.build("fed-pne", num_clients=3, horizon=1000), [
        ['param-algorithm', 'fed-pne', 'str'],
        ['param-num-clients', 3, 'int'],
        ['param-horizon', 1000, 'int'],
        ['param-alpha', 0.5, 'float'],
        ['param-seed', 0, 'int'],
        ['param-nu1', 1.0, 'float'],
        ['param-rho', 0.5, 'float'],
        ['param-max-depth', 0, 'int'],
        ['param-pf-pne-eps', 0.1, 'float'],
        ['param-report-pulls', False, 'bool'],
    ]),
    (AlgorithmSpec.build("pf-xab", num_clients=10, horizon=2_000_000, report_pulls=True), [
        ['param-algorithm', 'pf-xab', 'str'],
        ['param-num-clients', 10, 'int'],
        ['param-horizon', 2000000, 'int'],
        ['param-alpha', 0.5, 'float'],
        ['param-seed', 0, 'int'],
        ['param-nu1', 1.0, 'float'],
        ['param-rho', 0.5, 'float'],
        ['param-max-depth', 0, 'int'],
        ['param-pf-pne-eps', 0.1, 'float'],
        ['param-report-pulls', True, 'bool'],
    ]),
]


@pytest.mark.parametrize(("spec", "earlier"), EARLIER_WIRE, ids=["pf-pne", "bernstein", "fed-pne", "pf-xab"])
def test_the_spec_sends_the_keys_values_and_types_of_earlier_versions(spec, earlier) -> None:
    assert [[key, value, type(value).__name__] for key, value in spec.to_wire().items()] == earlier
    assert AlgorithmSpec.from_wire(spec.to_wire()) == spec
    config = records.to_record({}, spec.to_wire())
    assert records.from_record(config)[1] == {key: value for key, value, _ in earlier}


def assert_same(a: object, b: object) -> None:
    assert type(a) is type(b)
    for key, value in vars(a).items():
        other = getattr(b, key)
        if isinstance(value, Mapping):  # named statistics: the same names in the same order, the same values
            assert list(value) == list(other)
            for name, values in value.items():
                np.testing.assert_array_equal(values, other[name])
        elif isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, other)
            assert np.asarray(other).dtype.kind == value.dtype.kind
        else:
            assert value == other


def wire_values(arrays: dict[str, np.ndarray], config: dict) -> int:
    """Values counted as the legacy API sends a payload: its tensors in order, their names in the config."""
    tensors, legacy_config = codec.positional((arrays, config))
    return codec.wire_size(list(ndarrays_to_parameters(tensors).tensors), legacy_config)[0]


def legacy_round_trip(payload: codec.Payload) -> codec.Payload:
    """A payload through the legacy API's ``Parameters`` (tensors in order, names in the config)."""
    tensors, config = codec.positional(payload)
    return codec.from_positional(parameters_to_ndarrays(ndarrays_to_parameters(tensors)), config)


BROADCASTS = [
    PhaseInstruction(3, UNION, 12, 40, PARAMS),
    GlobalUpdate(3, UNION, np.array([0.5, np.nan, 0.25, 1.0]), 1234, np.array([False, True, False, False]), PARAMS),
    FinishInstruction(5, PARAMS),
    GlobalUpdate(3, UNION, np.array([0.5, np.nan, 0.25, 1.0]), 1234, np.array([False, True, False, False]), BERNSTEIN,
                 {"variance": np.array([0.01, np.nan, 0.2, 0.0])}, np.array([3.0, 0.0, 1.0, 5.0])),
]


@pytest.mark.parametrize("message", BROADCASTS, ids=["phase", "update", "finish", "update-with-statistics"])
def test_broadcasts_round_trip_with_the_parameters_and_count_as_the_core(message) -> None:
    arrays, config = codec.broadcast_payload(message)
    assert_same(codec.read_broadcast(arrays, config), message)
    assert_same(codec.read_broadcast(*records.from_record(records.to_record(arrays, config))), message)
    assert_same(codec.read_broadcast(*legacy_round_trip((arrays, config))), message)
    assert wire_values(arrays, config) == payload_size(message)[0]
    assert records.record_size(records.to_record(arrays, config))[0] == payload_size(message)[0]


REPLIES = [
    LocalReport(2, UNION, np.array([0.1, 0.2, 0.0, 0.4]), np.array([10, 10, 0, 30], dtype=np.int64)),
    ActiveSetReport(4, np.array([8, 9, 14, 15], dtype=np.int64)),
    FinishReport(1, 37, np.array([0.25, 0.75])),
    LocalReport(2, UNION, np.array([0.1, 0.2, 0.0, 0.4]), np.array([10, 10, 0, 30], dtype=np.int64),
                {"variance": np.array([0.01, 0.02, 0.0, 0.04])}),
    FinishReport(1, 37, np.array([0.25, 0.75]), 38, np.array([0.75, 0.75]), 0.8125, 12),
]


@pytest.mark.parametrize("report", REPLIES, ids=["local", "active-set", "finish", "local-with-statistics",
                                                 "finish-with-best"])
def test_replies_round_trip_and_harness_is_carried_but_not_counted(report) -> None:
    harness = {"pull-nodes": np.array([2, 5, 37]), "pull-counts": np.array([10, 20, 970])}
    names = tuple(getattr(report, "statistics", ()))  # what the server's bound declares
    arrays, config = codec.reply_payload(report)
    assert_same(codec.read_reply(arrays, config, type(report), names), report)
    assert wire_values(arrays, config) == payload_size(report)[0]
    with_harness = codec.reply_payload(report, harness)
    back_arrays, back_config = records.from_record(records.to_record(*with_harness))
    assert_same(codec.read_reply(back_arrays, back_config, type(report), names), report)
    for key, value in codec.read_harness(back_config).items():
        np.testing.assert_array_equal(value, harness[key])
    assert wire_values(*with_harness) == payload_size(report)[0]
    assert records.record_size(records.to_record(*with_harness))[0] == payload_size(report)[0]
    assert_same(codec.read_reply(*legacy_round_trip(with_harness), type(report), names), report)
    in_config = codec.arrays_to_config(with_harness)  # a legacy evaluate reply, or a final reply under SecAgg+
    assert_same(codec.read_reply(*codec.from_positional([], in_config), type(report), names), report)
    assert codec.wire_size([], in_config)[0] == payload_size(report)[0]


def test_wire_bytes_are_the_serialised_tensors() -> None:
    arrays, config = codec.positional(codec.broadcast_payload(BROADCASTS[0]))
    tensors = list(ndarrays_to_parameters(arrays).tensors)
    _, nbytes = codec.wire_size(tensors, config)
    config_bytes = sum(len(v.encode()) if isinstance(v, str) else 1 if isinstance(v, bool) else 8
                       for v in config.values())
    assert nbytes == sum(len(t) for t in tensors) + config_bytes


def test_a_stand_by_reply_is_recognised() -> None:
    arrays, config = codec.standby_payload(12)
    assert arrays == {} and codec.is_standby(config) and codec.partition_id(config) == 12


@pytest.mark.parametrize(
    ("arrays", "config", "expected", "match"),
    [
        ({codec.NODE_IDS: UNION}, {}, LocalReport, "partition-id"),
        ({codec.NODE_IDS: UNION}, {codec.PARTITION_ID: "2"}, LocalReport, "not an integer"),
        ({codec.NODE_IDS: UNION}, {codec.PARTITION_ID: True}, LocalReport, "not an integer"),
        ({codec.NODE_IDS: UNION, codec.MEANS: UNION}, {codec.PARTITION_ID: 2}, LocalReport,
         "local report has no 'counts' array"),
        ({"0000": UNION, "0001": UNION, "0002": UNION}, {codec.PARTITION_ID: 2}, LocalReport,
         r"no 'node-ids' array \(arrays: 0000, 0001, 0002\)"),
        ({codec.NODE_ID: np.array([1, 2]), codec.POINT: np.array([0.5])}, {codec.PARTITION_ID: 2}, FinishReport,
         "not one integer"),
        ({codec.NODE_ID: np.array([1.5]), codec.POINT: np.array([0.5])}, {codec.PARTITION_ID: 2}, FinishReport,
         "not one integer"),
        ({codec.NODE_ID: np.array([1])}, {codec.PARTITION_ID: 2}, FinishReport, "final reply has no 'point' array"),
        ({codec.NODE_ID: np.array([1]), codec.POINT: np.array([0.5]), codec.BEST_NODE_ID: np.array([2]),
          codec.BEST_POINT: np.array([0.25]), codec.BEST_MEAN: np.array([0.5])}, {codec.PARTITION_ID: 2},
         FinishReport, "final reply has no 'best-pulls' array"),
        ({codec.NODE_ID: np.array([1]), codec.POINT: np.array([0.5]), codec.BEST_NODE_ID: np.array([2]),
          codec.BEST_POINT: np.array([0.25]), codec.BEST_MEAN: np.array([1]), codec.BEST_PULLS: np.array([3])},
         {codec.PARTITION_ID: 2}, FinishReport, "'best-mean' is not one float"),
        ({codec.NODE_IDS: np.array([0.5])}, {codec.PARTITION_ID: 2}, ActiveSetReport, "not integers"),
        ({}, {codec.PARTITION_ID: 2}, ActiveSetReport, "active-set reply has no 'node-ids' array"),
    ],
)
def test_unreadable_replies_raise_wire_error(arrays, config, expected, match) -> None:
    with pytest.raises(codec.WireError, match=match):
        codec.read_reply(arrays, config, expected)


@pytest.mark.parametrize("drop", ["param-alpha", "phase", "param-algorithm"])
def test_a_malformed_broadcast_raises_wire_error(drop: str) -> None:
    arrays, config = codec.broadcast_payload(BROADCASTS[0])
    del config[drop]
    with pytest.raises(codec.WireError, match="malformed"):
        codec.read_broadcast(arrays, config)
    arrays, config = codec.broadcast_payload(BROADCASTS[0])
    with pytest.raises(codec.WireError, match="malformed"):
        codec.read_broadcast(arrays, {**config, "param-horizon": "many"})


def test_a_global_update_without_its_bounds_statistics_raises_wire_error() -> None:
    arrays, config = codec.broadcast_payload(BROADCASTS[-1])
    without = {name: values for name, values in arrays.items() if name != "statistic:variance"}
    with pytest.raises(codec.WireError, match=r"no 'statistic:variance' array \(confidence=bernstein\)"):
        codec.read_broadcast(without, config)
    _, plain_config = codec.broadcast_payload(BROADCASTS[1])  # parts a bound does not declare are not read
    update = codec.read_broadcast(arrays, plain_config)
    assert update.holders is None and dict(update.statistics) == {}


def test_a_local_report_without_a_declared_statistic_raises_wire_error() -> None:
    arrays, config = codec.reply_payload(REPLIES[0])
    with pytest.raises(codec.WireError, match="local report has no 'statistic:variance' array"):
        codec.read_reply(arrays, config, LocalReport, ("variance",))


def test_legacy_tensors_must_come_with_their_names() -> None:
    with pytest.raises(codec.WireError, match="2 tensors but 0 names in 'arrays'"):
        codec.from_positional([UNION, UNION], {codec.PARTITION_ID: 2})
    with pytest.raises(codec.WireError, match="'array:point' cannot be read as an array"):
        codec.from_positional([], {codec.PARTITION_ID: 2, "array:point": b"not npy"})


def test_unreadable_record_content_is_a_wire_error() -> None:
    with pytest.raises(codec.WireError, match="cannot be read"):
        records.from_record(RecordDict({"config": ConfigRecord({"phase": 1})}))


@pytest.mark.parametrize("values", [
    np.arange(5), np.zeros((3, 2)), np.array([], dtype=np.int64), np.array(3.5), np.array([True, False]),
    np.arange(6, dtype=np.uint8).reshape(2, 3), np.asfortranarray(np.arange(6.0).reshape(2, 3)),
    np.array(["a", "b"]), np.arange(1000, dtype=">f4"),
], ids=lambda a: f"{a.dtype.str}{a.shape}")
def test_an_array_is_read_fast_exactly_as_numpy_reads_it(values: np.ndarray) -> None:
    """The fast reading of ``.npy`` bytes (records.array_of) gives what ``Array.numpy()`` gives, or falls back to it."""
    from flwr.app import Array

    from pfxab_flower.flower_shared.records import array_of

    array = Array(values)
    got, expected = array_of(array), array.numpy()
    assert got.dtype == expected.dtype and got.shape == expected.shape and got.flags.writeable
    np.testing.assert_array_equal(got, expected)


def test_a_truncated_array_is_not_read_fast_but_fails_as_numpy_fails() -> None:
    from flwr.app import Array

    from pfxab_flower.flower_shared.records import array_of

    good = Array(np.arange(10.0))
    short = Array(dtype=good.dtype, shape=good.shape, stype=good.stype, data=good.data[:-8])
    with pytest.raises(ValueError):
        short.numpy()
    with pytest.raises(ValueError):
        array_of(short)


def test_an_npy_header_declaring_more_data_than_it_carries_is_refused_before_numpy_allocates_it() -> None:
    """A peer's ``.npy`` bytes (the legacy API carries arrays in the config) claiming 10**9 float64 values in
    144 bytes: numpy allocated the 8 GB the header claims before finding the data short (issue 37, class 6)."""
    import struct
    import tracemalloc

    from pfxab_flower.running.wire.npy import from_npy

    header = "{'descr': '<f8', 'fortran_order': True, 'shape': (1000000000,), }"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    data = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(16)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="declares 8000000000 bytes of data, but only 144 bytes came"):
            from_npy(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    with pytest.raises(codec.WireError, match="cannot be read as an array"):  # what the legacy codec makes of it
        codec.from_positional([], {codec.CONFIG_ARRAY_PREFIX + "means": data})
