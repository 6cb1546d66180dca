"""The one place where core messages become Flower payloads (tensors + config), and back.

Both Flower APIs carry the same *payload*: a list of numpy tensors and a flat config
(``bool | bytes | float | int | str`` values). The legacy API packs it into
``Parameters`` + ``FitIns.config`` / ``FitRes.metrics``; the Message API into a
``RecordDict`` (:mod:`~pfxab_flower.strategies.records`). One phase is two exchanges::

    PhaseInstruction  -> train/fit       [node_ids]                  {phase, global-pulls, local-pulls, param-*}
    LocalReport       <- reply     [node_ids, means, counts(, *statistics)]            {partition-id}
    GlobalUpdate      -> evaluate  [node_ids, means, elim.(, *statistics, holders)]    {phase, phase-length, param-*}
    ActiveSetReport   <- reply           []                          {partition-id, node-ids: int64 bytes}
    FinishInstruction -> train/fit       []                          {phases, param-*}
    FinishReport      <- reply           [[node_id], point]          {partition-id}

The parts in brackets are the per-node statistics the run's confidence bound declares
(``bound.statistics``, in that order: none for ``hoeffding``, ``variance`` for
``bernstein``): each client's up, the pooled ones and the holder counts down. They are
encoded whatever they are; decoding names them from the bound's declaration (the
broadcast's own ``param-confidence``, the server's ``statistics``). ``param-*`` are the run's
:class:`~pfxab_flower.spec.AlgorithmSpec`, sent with every broadcast. A node
that is not one of the run's clients replies ``{partition-id, standby: true}``. In
simulation every reply also carries the client's pull log as ``harness:*`` int64 bytes:
simulation data, not part of the algorithm, and not counted by :func:`wire_size`.

Each message field maps to exactly one tensor or one config value, so the value counts
of :func:`wire_size` equal the core's ``payload_size``; only the bytes differ (each
tensor carries a ``.npy`` header). Decoding never judges content (the core does, in
``ServerMachine``, which logs and skips bad replies): it raises :class:`WireError` only
when no message can be formed at all.
"""

from __future__ import annotations

import io
import math
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from pfxab_flower.algorithms.bounds import BOUNDS
from pfxab_flower.algorithms.messages import (
    ActiveSetReport,
    FinishInstruction,
    FinishReport,
    GlobalUpdate,
    LocalReport,
    PhaseInstruction,
)
from pfxab_flower.errors import ConfigError
from pfxab_flower.session import Instruction, Report
from pfxab_flower.spec import AlgorithmSpec

PARTITION_ID = "partition-id"
NODE_IDS = "node-ids"
STANDBY = "standby"
FINISH_KEY = "phases"  # present only in a FinishInstruction's config
UPDATE_KEY = "phase-length"  # present only in a GlobalUpdate's config
HARNESS_PREFIX = "harness:"
PARAMETER_PREFIX = "param-"  # AlgorithmSpec.to_wire's keys
#: The run's first message (Message API) lists the run's nodes in order: a node without a ``partition-id``
#: is the client of its position in the list (a position past the run's clients stands by).
ASSIGNED_NODES = "assigned-nodes"
#: A reply's ``site`` label, from its node's config (``--node-config 'site="..."'``), recorded by the server.
SITE = "site"
#: The longest site label kept (a longer one is cut: a label is for people, not for data).
MAX_SITE_LENGTH = 64

Arrays = list[np.ndarray]
Config = dict[str, Any]
Payload = tuple[Arrays, Config]


class WireError(ValueError):
    """A Flower message that cannot be read as any core message (the reason is the text)."""


def assignment(nodes: Sequence[int]) -> Config:
    """The config entry that assigns client indices to ``nodes``, in that order (see :data:`ASSIGNED_NODES`)."""
    return {ASSIGNED_NODES: np.asarray(nodes, dtype="<u8").tobytes()}


def assigned_index(config: Mapping[str, Any], node: int) -> int | None:
    """The client index a message's assignment gives ``node`` (``None``: the message assigns none to it)."""
    value = config.get(ASSIGNED_NODES)
    if not isinstance(value, bytes) or len(value) % 8:
        return None
    where = np.flatnonzero(np.frombuffer(value, dtype="<u8") == np.uint64(node))
    return int(where[0]) if where.size else None


# -- server -> client ---------------------------------------------------------------


def broadcast_payload(message: Instruction) -> Payload:
    """The tensors and config of a server message (any Flower API)."""
    parameters = message.parameters.to_wire()
    if isinstance(message, FinishInstruction):
        return [], {FINISH_KEY: int(message.phases), **parameters}
    if isinstance(message, GlobalUpdate):
        arrays = [_ids(message.node_ids), np.asarray(message.global_means, dtype=float),
                  np.asarray(message.eliminated, dtype=bool)]
        if message.holders is not None:  # pooled statistics, then the holder counts
            arrays += [np.asarray(values, dtype=float) for values in message.statistics.values()]
            arrays.append(np.asarray(message.holders, dtype=float))
        return arrays, {"phase": int(message.phase), UPDATE_KEY: int(message.phase_length), **parameters}
    config = {"phase": int(message.phase), "global-pulls": int(message.global_pulls),
              "local-pulls": int(message.local_pulls), **parameters}
    return [_ids(message.node_ids)], config


def read_broadcast(arrays: Sequence[np.ndarray], config: Mapping[str, Any]) -> Instruction:
    """Client side: the server message in a received payload; :class:`WireError` says what is missing or wrong.

    A message without any ``param-*`` key comes from another strategy (e.g. Flower's
    ``FedAvg``); one with some of them but not all, or mistyped, from another version.
    """
    if not any(str(key).startswith(PARAMETER_PREFIX) for key in config):
        raise WireError(f"it carries no pfxab-flower parameters (no {PARAMETER_PREFIX}algorithm; config keys: "
                        f"{describe_keys(config)}; {len(arrays)} array{'' if len(arrays) == 1 else 's'})")
    try:
        parameters = AlgorithmSpec.from_wire(config)
        if FINISH_KEY in config:
            return FinishInstruction(int(config[FINISH_KEY]), parameters)
        if UPDATE_KEY in config:
            names = _statistic_names(parameters.confidence)
            expected = 3 + (len(names) + 1 if names else 0)
            if len(arrays) != expected:
                raise ValueError(f"global update has {len(arrays)} tensors, expected {expected} under "
                                 f"confidence={parameters.confidence}")
            node_ids, means, eliminated = arrays[:3]
            statistics = {name: np.asarray(a, dtype=float) for name, a in zip(names, arrays[3:], strict=False)}
            holders = np.asarray(arrays[-1], dtype=float) if names else None
            return GlobalUpdate(int(config["phase"]), _ids(node_ids), np.asarray(means, dtype=float),
                                int(config[UPDATE_KEY]), np.asarray(eliminated, dtype=bool), parameters, statistics,
                                holders)
        return PhaseInstruction(int(config["phase"]), _ids(arrays[0]), int(config["global-pulls"]),
                                int(config["local-pulls"]), parameters)
    except ConfigError:  # a value out of range: the spec's own one line (another version, or a hostile server)
        raise
    except KeyError as exc:
        raise WireError(f"server message is malformed: its config has no {exc.args[0]!r} (config keys: "
                        f"{describe_keys(config)})") from exc
    except (IndexError, TypeError, ValueError) as exc:
        raise WireError(f"server message is malformed: {exc}") from exc


# -- client -> server ---------------------------------------------------------------


def reply_payload(report: Report, harness: Mapping[str, np.ndarray] | None = None,
                  site: str | None = None) -> Payload:
    """The tensors and config of a client's reply, with its harness data and its node's site label if any."""
    config: Config = {PARTITION_ID: int(report.client)}
    if site is not None:
        config[SITE] = site
    for key, value in (harness or {}).items():
        config[HARNESS_PREFIX + key] = np.asarray(value, dtype="<i8").tobytes()
    if isinstance(report, FinishReport):
        return [np.array([report.node_id], dtype=np.int64), np.asarray(report.point, dtype=float)], config
    if isinstance(report, ActiveSetReport):
        return [], {**config, NODE_IDS: _ids(report.node_ids).tobytes()}
    arrays = [_ids(report.node_ids), np.asarray(report.means, dtype=float), np.asarray(report.counts)]
    arrays += [np.asarray(values, dtype=float) for values in report.statistics.values()]
    return arrays, config


def standby_payload(partition_id: int) -> Payload:
    """The reply of a node that is not one of the run's clients: it stands by, no error."""
    return [], {PARTITION_ID: int(partition_id), STANDBY: True}


def is_standby(config: Mapping[str, Any]) -> bool:
    return config.get(STANDBY) is True


def read_reply(
    arrays: Sequence[np.ndarray], config: Mapping[str, Any], expected: type, statistics: Sequence[str] = ()
) -> Report:
    """Server side: the report of type ``expected`` in a reply's payload (content passed on as it came).

    ``statistics`` names the per-node statistics a local report carries after its counts
    (the run's ``bound.statistics``). Wrong lengths, NaN or foreign node ids are left for
    the core to judge; only a reply from which no report can be formed is a :class:`WireError`.
    """
    client = partition_id(config)
    if expected is FinishReport:
        if len(arrays) != 2 or np.asarray(arrays[0]).size != 1:
            raise WireError("final reply is not [one node id, point]")
        node = np.asarray(arrays[0]).reshape(-1)[0]
        if not np.issubdtype(np.asarray(node).dtype, np.integer):
            raise WireError("final node id is not an integer")
        return FinishReport(client, int(node), np.asarray(arrays[1]).reshape(-1))
    if expected is ActiveSetReport:
        raw = config.get(NODE_IDS)
        if not isinstance(raw, bytes) or len(raw) % 8:
            raise WireError(f"{NODE_IDS!r} is not int64 bytes")
        return ActiveSetReport(client, np.frombuffer(raw, dtype="<i8").astype(np.int64))
    if len(arrays) != 3 + len(statistics):
        raise WireError(f"local report has {len(arrays)} tensors, expected {3 + len(statistics)} "
                        f"({', '.join(['node ids', 'means', 'counts', *statistics])})")
    return LocalReport(client, *arrays[:3], dict(zip(statistics, arrays[3:], strict=True)))


def read_harness(config: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The harness data of a reply (empty if none, or unreadable: harness data is never judged)."""
    harness = {}
    for key, value in config.items():
        if key.startswith(HARNESS_PREFIX) and isinstance(value, bytes) and len(value) % 8 == 0:
            harness[key[len(HARNESS_PREFIX):]] = np.frombuffer(value, dtype="<i8").astype(np.int64)
    return harness


def site_of(config: Mapping[str, Any]) -> str | None:
    """A reply's site label (``None`` if it has none, or one that is not text), at most :data:`MAX_SITE_LENGTH`."""
    value = config.get(SITE)
    return value[:MAX_SITE_LENGTH] if isinstance(value, str) and value else None


def partition_id(config: Mapping[str, Any]) -> int:
    """The client a reply claims to come from; :class:`WireError` if it claims none."""
    value = config.get(PARTITION_ID)
    if value is None:
        raise WireError(f"the reply has no {PARTITION_ID!r} (config keys: {describe_keys(config)}): it is not a "
                        "pfxab-flower client's reply")
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireError(f"{PARTITION_ID!r} is {value!r}, not an integer")
    return value


# -- accounting ---------------------------------------------------------------------


def wire_size(tensors: Sequence[bytes], config: Mapping[str, Any]) -> tuple[int, int]:
    """``(values, bytes)`` that crossed Flower: serialised tensors, and the config without harness data.

    A config value counts as one value of 8 bytes (int, float), 1 (bool), or its length
    (str, bytes: ``node-ids`` counts as ``len / 8`` values). The node list of the run's
    first message (:data:`ASSIGNED_NODES`) and a reply's :data:`SITE` label are Flower's
    addressing, not the algorithm's communication: their bytes count, their values do not
    (so every engine counts the same values).
    """
    values = nbytes = 0
    for tensor in tensors:
        nbytes += len(tensor)
        values += _npy_elements(tensor)
    for key, value in config.items():
        if key.startswith(HARNESS_PREFIX):
            continue
        if isinstance(value, bytes):
            nbytes += len(value)
            values += len(value) // 8 if key == NODE_IDS else 0 if key == ASSIGNED_NODES else 1
        elif isinstance(value, str):
            nbytes += len(value.encode())
            values += 0 if key == SITE else 1
        else:
            nbytes += 1 if isinstance(value, bool) else 8
            values += 1
    return values, nbytes


# -- helpers ------------------------------------------------------------------------


def describe_keys(keys: Iterable[object], limit: int = 8) -> str:
    """Keys of a foreign message or reply, for a one-line reason: sorted, at most ``limit``."""
    names = sorted(str(key) for key in keys)
    shown = ", ".join(names[:limit]) + (f", ... ({len(names)} in all)" if len(names) > limit else "")
    return shown or "none"


def _statistic_names(confidence: str) -> tuple[str, ...]:
    """The statistics a broadcast of ``confidence``'s bound carries (none for a name no bound has:
    the client's own check of the parameters refuses that name)."""
    bound = BOUNDS.get(confidence)
    return bound.statistics if bound is not None else ()


def _ids(node_ids: object) -> np.ndarray:
    return np.asarray(node_ids, dtype=np.int64)


#: The ``.npy`` header ``np.save`` writes for a C-ordered array of a plain dtype (version 1.0).
NPY_HEADER = re.compile(rb"\{'descr': '([<>|=]?[biuf]\d{1,2})', 'fortran_order': False, 'shape': \(([\d, ]*)\), \} *\n")
NPY_MAGIC = b"\x93NUMPY\x01\x00"


def npy_layout(data: bytes) -> tuple[np.dtype, tuple[int, ...], int] | None:
    """``(dtype, shape, data offset)`` of ``.npy`` bytes that ``np.save`` wrote for a C-ordered array of
    booleans or numbers, whose data is exactly as long as the shape says; ``None`` for anything else.

    Why not ``np.lib.format``: it parses the header with ``ast.literal_eval``, which was a
    quarter of a client's time per message at M = 1000 (docs/performance.md); a caller falls
    back to numpy's own reading when this gives ``None``.
    """
    if data[:8] != NPY_MAGIC or len(data) < 10:
        return None
    (length,) = struct.unpack_from("<H", data, 8)
    header = NPY_HEADER.fullmatch(data[10:10 + length])
    if header is None:
        return None
    shape = tuple(int(n) for n in header.group(2).split(b",") if n.strip())
    dtype = np.dtype(header.group(1).decode())
    if len(data) - 10 - length != math.prod(shape) * dtype.itemsize:
        return None
    return dtype, shape, 10 + length


def _npy_elements(tensor: bytes) -> int:
    """Elements of one ``.npy`` tensor, read from its header only."""
    layout = npy_layout(tensor)
    if layout is not None:
        return math.prod(layout[1])
    buffer = io.BytesIO(tensor)
    try:
        version = np.lib.format.read_magic(buffer)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, _ = read(buffer)
    except Exception:  # an unreadable tensor still costs its bytes
        return 0
    return int(np.prod(shape, dtype=np.int64))
