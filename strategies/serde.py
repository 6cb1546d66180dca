"""The one place where core messages become Flower wire types, and back.

One phase is two Flower exchanges (see :mod:`pfxab_flower.algorithms.messages`)::

    PhaseInstruction  -> FitIns       [node_ids]                  config {phase, global-pulls, local-pulls}
    LocalReport       <- FitRes       [node_ids, means, counts]   metrics {partition-id}
    GlobalUpdate      -> EvaluateIns  [node_ids, means, elim.]    config {phase, phase-length}
    ActiveSetReport   <- EvaluateRes  (EvaluateRes has none)      metrics {partition-id, node-ids: int64 bytes}
    FinishInstruction -> FitIns       []                          config {phases}
    FinishReport      <- FitRes       [[node_id], *harness]       metrics {partition-id}

Each message field maps to exactly one tensor or one config value, so the
value counts of :func:`wire_size` equal the core's ``payload_size``; only the
bytes differ (each tensor carries a ``.npy`` header). Legacy config values
cannot be lists, so the active set of an ``EvaluateRes`` travels as int64 bytes.

``FinishReport`` may carry *harness* tensors after its own: in simulation the
client's pull log, which the server app scores regret from. They are not part
of the algorithm's message, and :func:`wire_size` does not count them.

Decoding never validates content (that is the core's job, in
``ServerMachine.check_report`` / ``check_active_set``, which logs and skips bad
replies): it only raises :class:`WireError` when no message can be formed at all.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from flwr.common import (
    Code,
    EvaluateIns,
    EvaluateRes,
    FitIns,
    FitRes,
    Parameters,
    Status,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)

from pfxab_flower.algorithms.messages import (
    ActiveSetReport,
    FinishInstruction,
    FinishReport,
    GlobalUpdate,
    LocalReport,
    PhaseInstruction,
)

PARTITION_ID = "partition-id"
NODE_IDS = "node-ids"
FINISH_KEY = "phases"  # present only in a FinishInstruction's config

Arrays = list[np.ndarray]
Config = dict[str, Any]


class WireError(ValueError):
    """A Flower message that cannot be read as any core message (the reason is the text)."""


# -- server -> client ---------------------------------------------------------------


def instruction_payload(instruction: PhaseInstruction | FinishInstruction) -> tuple[Arrays, Config]:
    """The tensors and config that start a phase or the final exploitation (any Flower API)."""
    if isinstance(instruction, FinishInstruction):
        return [], {FINISH_KEY: int(instruction.phases)}
    config = {
        "phase": int(instruction.phase),
        "global-pulls": int(instruction.global_pulls),
        "local-pulls": int(instruction.local_pulls),
    }
    return [_ids(instruction.node_ids)], config


def instruction_to_fit_ins(instruction: PhaseInstruction | FinishInstruction) -> FitIns:
    """The ``FitIns`` that starts a phase or the final exploitation."""
    arrays, config = instruction_payload(instruction)
    return FitIns(ndarrays_to_parameters(arrays), config)


def fit_ins_to_instruction(
    arrays: Sequence[np.ndarray], config: Mapping[str, Any]
) -> PhaseInstruction | FinishInstruction:
    """Client side: what ``NumPyClient.fit(parameters, config)`` received."""
    try:
        if FINISH_KEY in config:
            return FinishInstruction(int(config[FINISH_KEY]))
        return PhaseInstruction(
            int(config["phase"]), _ids(arrays[0]), int(config["global-pulls"]), int(config["local-pulls"])
        )
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise WireError(f"fit instruction is malformed: {exc!r}") from exc


def update_payload(update: GlobalUpdate) -> tuple[Arrays, Config]:
    """The tensors and config of a ``GlobalUpdate`` (any Flower API)."""
    arrays = [_ids(update.node_ids), np.asarray(update.global_means, dtype=float), np.asarray(update.eliminated, bool)]
    return arrays, {"phase": int(update.phase), "phase-length": int(update.phase_length)}


def update_to_evaluate_ins(update: GlobalUpdate) -> EvaluateIns:
    arrays, config = update_payload(update)
    return EvaluateIns(ndarrays_to_parameters(arrays), config)


def evaluate_ins_to_update(arrays: Sequence[np.ndarray], config: Mapping[str, Any]) -> GlobalUpdate:
    """Client side: what ``NumPyClient.evaluate(parameters, config)`` received."""
    try:
        node_ids, means, eliminated = arrays
        return GlobalUpdate(
            int(config["phase"]), _ids(node_ids), np.asarray(means, dtype=float), int(config["phase-length"]),
            np.asarray(eliminated, dtype=bool),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise WireError(f"evaluate instruction is malformed: {exc!r}") from exc


# -- client -> server ---------------------------------------------------------------


def report_to_fit_reply(
    report: LocalReport | FinishReport, harness: Sequence[np.ndarray] = ()
) -> tuple[Arrays, int, Config]:
    """What ``NumPyClient.fit`` returns: ``(arrays, num_examples, metrics)``."""
    metrics: Config = {PARTITION_ID: int(report.client)}
    if isinstance(report, FinishReport):
        return [np.array([report.node_id], dtype=np.int64), *harness], 0, metrics
    arrays = [_ids(report.node_ids), np.asarray(report.means, dtype=float), np.asarray(report.counts)]
    return arrays, int(np.sum(report.counts)), metrics


def fit_res_to_report(res: FitRes, finishing: bool) -> tuple[LocalReport | FinishReport, Arrays]:
    """Server side: the client's report and any harness tensors that followed it.

    The arrays are passed on as they came (wrong lengths, NaN, foreign node ids
    included) for the core to judge; only an unreadable reply is a ``WireError``.
    """
    _partition_id(res.metrics)  # an anonymous reply is refused before its tensors are decoded
    try:
        arrays = parameters_to_ndarrays(res.parameters)
    except Exception as exc:  # any decoding failure of foreign bytes is the peer's fault
        raise WireError(f"parameters cannot be decoded: {exc!r}") from exc
    return reply_to_report(arrays, res.metrics, finishing)


def reply_to_report(
    arrays: Sequence[np.ndarray], metrics: Mapping[str, Any], finishing: bool
) -> tuple[LocalReport | FinishReport, Arrays]:
    """The report in a fit reply's decoded tensors and metrics (any Flower API); see :func:`fit_res_to_report`."""
    client = _partition_id(metrics)
    if finishing:
        if not arrays or np.asarray(arrays[0]).size != 1:
            raise WireError("finish reply does not start with a one-element node id")
        return FinishReport(client, int(np.asarray(arrays[0]).reshape(-1)[0])), list(arrays[1:])
    if len(arrays) != 3:
        raise WireError(f"local report has {len(arrays)} tensors, expected 3 (node ids, means, counts)")
    return LocalReport(client, *arrays), []


def active_set_to_evaluate_reply(report: ActiveSetReport) -> tuple[float, int, Config]:
    """What ``NumPyClient.evaluate`` returns: ``(loss, num_examples, metrics)``."""
    ids = _ids(report.node_ids)
    return 0.0, int(ids.size), {PARTITION_ID: int(report.client), NODE_IDS: ids.tobytes()}


def evaluate_res_to_active_set(res: EvaluateRes) -> ActiveSetReport:
    return metrics_to_active_set(res.metrics)


def metrics_to_active_set(metrics: Mapping[str, Any]) -> ActiveSetReport:
    """The active set in an evaluate reply's metrics (any Flower API)."""
    client = _partition_id(metrics)
    raw = metrics.get(NODE_IDS)
    if not isinstance(raw, bytes) or len(raw) % 8:
        raise WireError(f"{NODE_IDS!r} is not int64 bytes")
    return ActiveSetReport(client, np.frombuffer(raw, dtype="<i8").astype(np.int64))


def ok_fit_res(arrays: Arrays, num_examples: int, metrics: Config) -> FitRes:
    """The ``FitRes`` Flower's NumPyClient wrapper makes of a ``fit`` return (for tests and tools)."""
    return FitRes(Status(Code.OK, "Success"), ndarrays_to_parameters(arrays), num_examples, metrics)


def ok_evaluate_res(loss: float, num_examples: int, metrics: Config) -> EvaluateRes:
    return EvaluateRes(Status(Code.OK, "Success"), loss, num_examples, metrics)


# -- accounting ---------------------------------------------------------------------


def wire_size(
    parameters: Parameters | None, config: Mapping[str, Any], skip_tensors_after: int | None = None
) -> tuple[int, int]:
    """``(values, bytes)`` that crossed Flower: tensor elements and serialised bytes, config values.

    Tensors from index ``skip_tensors_after`` on (harness data) are not counted.
    A config value counts as one value of 8 bytes (int, float), 1 (bool), or
    its length (str, bytes: ``node-ids`` counts as ``len / 8`` values).
    """
    values = nbytes = 0
    tensors = list(parameters.tensors) if parameters is not None else []
    if skip_tensors_after is not None:
        tensors = tensors[:skip_tensors_after]
    for tensor in tensors:
        nbytes += len(tensor)
        values += _npy_elements(tensor)
    for key, value in config.items():
        if isinstance(value, bytes):
            nbytes += len(value)
            values += len(value) // 8 if key == NODE_IDS else 1
        elif isinstance(value, str):
            nbytes += len(value.encode())
            values += 1
        else:
            nbytes += 1 if isinstance(value, bool) else 8
            values += 1
    return values, nbytes


# -- helpers ------------------------------------------------------------------------


def _ids(node_ids: object) -> np.ndarray:
    return np.asarray(node_ids, dtype=np.int64)


def _partition_id(metrics: Mapping[str, Any]) -> int:
    value = metrics.get(PARTITION_ID)
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireError(f"{PARTITION_ID!r} is {value!r}, not an integer")
    return value


def _npy_elements(tensor: bytes) -> int:
    """Elements of one ``.npy`` tensor, read from its header only."""
    buffer = io.BytesIO(tensor)
    try:
        version = np.lib.format.read_magic(buffer)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, _ = read(buffer)
    except Exception:  # an unreadable tensor still costs its bytes
        return 0
    return int(np.prod(shape, dtype=np.int64))
