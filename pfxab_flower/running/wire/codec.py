"""Core messages as Flower payloads (named arrays + a flat config), and back: the one codec of both sides.

Arrays are keyed by name, an optional part present or absent by its name; the layout of every
message is the table in docs/flower.md ("How a phase maps onto Flower rounds"). The legacy API's
``Parameters`` carries arrays in order (:func:`positional`, :func:`arrays_to_config`). Decoding
never judges content (the core does): :class:`WireError` only when no message can be formed.
"""

from __future__ import annotations

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
from pfxab_flower.running.client_session import Instruction, Report
from pfxab_flower.running.wire.npy import from_npy, npy_elements, to_npy
from pfxab_flower.schema.spec import AlgorithmSpec

# array names
NODE_IDS, MEANS, COUNTS, ELIMINATED, HOLDERS = "node-ids", "means", "counts", "eliminated", "holders"
NODE_ID, POINT = "node-id", "point"
#: A final reply's best observed point: all four arrays, or none (the client drew no reward)
BEST_NODE_ID, BEST_POINT, BEST_MEAN, BEST_PULLS = "best-node-id", "best-point", "best-mean", "best-pulls"
STATISTIC_PREFIX = "statistic:"
# config keys
PARTITION_ID = "partition-id"
STANDBY = "standby"
FINISH_KEY = "phases"  # present only in a FinishInstruction's config
UPDATE_KEY = "phase-length"  # present only in a GlobalUpdate's config
HARNESS_PREFIX = "harness:"
PARAMETER_PREFIX = "param-"  # AlgorithmSpec.to_wire's keys
#: Legacy API: the names of ``Parameters``' tensors, in order (Flower's addressing: its values are not counted).
ARRAY_NAMES = "arrays"
#: Legacy API: an array carried in the config, as ``.npy`` bytes, under this prefix and its name.
CONFIG_ARRAY_PREFIX = "array:"
#: The run's first message (Message API) lists the run's nodes in order: a node without a ``partition-id``
#: is the client of its position in the list (a position past the run's clients stands by).
ASSIGNED_NODES = "assigned-nodes"
#: A reply's ``site`` label, from its node's config (``--node-config 'site="..."'``), recorded by the server.
SITE = "site"
#: The longest site label kept (a longer one is cut: a label is for people, not for data).
MAX_SITE_LENGTH = 64
#: Config keys that are Flower's addressing, not the algorithm's communication: bytes count, values do not.
ADDRESSING = (ASSIGNED_NODES, SITE, ARRAY_NAMES)

Arrays = dict[str, np.ndarray]
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
    """The named arrays and config of a server message (any Flower API)."""
    parameters = message.parameters.to_wire()
    if isinstance(message, FinishInstruction):
        return {}, {FINISH_KEY: int(message.phases), **parameters}
    if isinstance(message, GlobalUpdate):
        arrays = {NODE_IDS: _ids(message.node_ids), MEANS: np.asarray(message.global_means, dtype=float),
                  ELIMINATED: np.asarray(message.eliminated, dtype=bool)}
        if message.holders is not None:  # pooled statistics, then the holder counts
            arrays |= _statistics(message.statistics)
            arrays[HOLDERS] = np.asarray(message.holders, dtype=float)
        return arrays, {"phase": int(message.phase), UPDATE_KEY: int(message.phase_length), **parameters}
    config = {"phase": int(message.phase), "global-pulls": int(message.global_pulls),
              "local-pulls": int(message.local_pulls), **parameters}
    return {NODE_IDS: _ids(message.node_ids)}, config


def carries_parameters(config: Mapping[str, Any]) -> bool:
    """Whether a config holds any ``param-*`` key: a message of some pfxab-flower strategy, of whatever version."""
    return any(str(key).startswith(PARAMETER_PREFIX) for key in config)


def read_broadcast(arrays: Mapping[str, np.ndarray], config: Mapping[str, Any]) -> Instruction:
    """Client side: the server message in a received payload; :class:`WireError` says what is missing or wrong.

    A message without any ``param-*`` key comes from another strategy (e.g. Flower's
    ``FedAvg``); one with some of them but not all, or mistyped, from another version.
    """
    if not carries_parameters(config):
        raise WireError(f"it carries no pfxab-flower parameters (no {PARAMETER_PREFIX}algorithm; config keys: "
                        f"{describe_keys(config)}; {len(arrays)} array{'' if len(arrays) == 1 else 's'})")
    try:
        parameters = AlgorithmSpec.from_wire(config)
        if FINISH_KEY in config:
            return FinishInstruction(_integer(config, FINISH_KEY), parameters)
        if UPDATE_KEY in config:
            names = _statistic_names(parameters.confidence)
            pooled = [*(STATISTIC_PREFIX + name for name in names), HOLDERS] if names else []
            part = _named(arrays, "global update", [NODE_IDS, MEANS, ELIMINATED, *pooled],
                          f" (confidence={parameters.confidence})")
            statistics = {name: np.asarray(part[STATISTIC_PREFIX + name], dtype=float) for name in names}
            holders = np.asarray(part[HOLDERS], dtype=float) if names else None
            return GlobalUpdate(_integer(config, "phase"), _integer_ids(part[NODE_IDS]),
                                np.asarray(part[MEANS], dtype=float), _integer(config, UPDATE_KEY),
                                np.asarray(part[ELIMINATED], dtype=bool), parameters, statistics, holders)
        part = _named(arrays, "phase instruction", [NODE_IDS])
        return PhaseInstruction(_integer(config, "phase"), _integer_ids(part[NODE_IDS]),
                                _integer(config, "global-pulls"), _integer(config, "local-pulls"), parameters)
    except ConfigError:  # a value out of range: the spec's own one line (another version, or a hostile server)
        raise
    except WireError as exc:
        raise WireError(f"server message is malformed: {exc}") from exc
    except KeyError as exc:
        raise WireError(f"server message is malformed: its config has no {exc.args[0]!r} (config keys: "
                        f"{describe_keys(config)})") from exc
    except (IndexError, TypeError, ValueError) as exc:
        raise WireError(f"server message is malformed: {exc}") from exc


# -- client -> server ---------------------------------------------------------------


def reply_payload(report: Report, harness: Mapping[str, np.ndarray] | None = None,
                  site: str | None = None) -> Payload:
    """The named arrays and config of a client's reply, with its harness data and its node's site label if any."""
    config: Config = {PARTITION_ID: int(report.client)}
    if site is not None:
        config[SITE] = site
    for key, value in (harness or {}).items():
        config[HARNESS_PREFIX + key] = np.asarray(value, dtype="<i8").tobytes()
    if isinstance(report, FinishReport):
        final = {NODE_ID: np.array([report.node_id], dtype=np.int64), POINT: np.asarray(report.point, dtype=float)}
        if report.best_node_id is not None:
            final |= {BEST_NODE_ID: np.array([report.best_node_id], dtype=np.int64),
                      BEST_POINT: np.asarray(report.best_point, dtype=float),
                      BEST_MEAN: np.array([report.best_mean], dtype=float),
                      BEST_PULLS: np.array([report.best_pulls], dtype=np.int64)}
        return final, config
    if isinstance(report, ActiveSetReport):
        return {NODE_IDS: _ids(report.node_ids)}, config
    arrays = {NODE_IDS: _ids(report.node_ids), MEANS: np.asarray(report.means, dtype=float),
              COUNTS: np.asarray(report.counts)}
    return arrays | _statistics(report.statistics), config


def standby_payload(partition_id: int) -> Payload:
    """The reply of a node that is not one of the run's clients: it stands by, no error."""
    return {}, {PARTITION_ID: int(partition_id), STANDBY: True}


def is_standby(config: Mapping[str, Any]) -> bool:
    return config.get(STANDBY) is True


def read_reply(
    arrays: Mapping[str, np.ndarray], config: Mapping[str, Any], expected: type, statistics: Sequence[str] = ()
) -> Report:
    """Server side: the report of type ``expected`` in a reply's payload (content passed on as it came).

    ``statistics`` names the per-node statistics a local report carries (the run's
    ``bound.statistics``). Wrong lengths, NaN or foreign node ids are left for the core to
    judge; only a reply from which no report can be formed is a :class:`WireError`.
    """
    client = partition_id(config)
    if expected is FinishReport:
        best = [BEST_NODE_ID, BEST_POINT, BEST_MEAN, BEST_PULLS] if BEST_NODE_ID in arrays else []
        part = _named(arrays, "final reply", [NODE_ID, POINT, *best])
        node, point = int(_one(part, NODE_ID, integer=True)), np.asarray(part[POINT]).reshape(-1)
        if not best:
            return FinishReport(client, node, point)
        return FinishReport(client, node, point, int(_one(part, BEST_NODE_ID, integer=True)),
                            np.asarray(part[BEST_POINT]).reshape(-1), float(_one(part, BEST_MEAN, integer=False)),
                            int(_one(part, BEST_PULLS, integer=True)))
    if expected is ActiveSetReport:
        node_ids = np.asarray(_named(arrays, "active-set reply", [NODE_IDS])[NODE_IDS])
        if not np.issubdtype(node_ids.dtype, np.integer):
            raise WireError(f"active-set reply's {NODE_IDS!r} are {node_ids.dtype}, not integers")
        return ActiveSetReport(client, node_ids.reshape(-1).astype(np.int64))
    names = [STATISTIC_PREFIX + name for name in statistics]
    part = _named(arrays, "local report", [NODE_IDS, MEANS, COUNTS, *names])
    return LocalReport(client, part[NODE_IDS], part[MEANS], part[COUNTS],
                       {name: part[STATISTIC_PREFIX + name] for name in statistics})


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


# -- the legacy API's containers ------------------------------------------------------


def positional(payload: Payload) -> tuple[list[np.ndarray], Config]:
    """A payload as the legacy API's tensor list, with the arrays' names in the config (:data:`ARRAY_NAMES`)."""
    arrays, config = payload
    return list(arrays.values()), {**config, ARRAY_NAMES: ",".join(arrays)} if arrays else dict(config)


def from_positional(tensors: Sequence[np.ndarray], config: Mapping[str, Any]) -> Payload:
    """The payload of a legacy tensor list and config (inverse of :func:`positional` and :func:`arrays_to_config`)."""
    names = config.get(ARRAY_NAMES, "")
    listed = names.split(",") if isinstance(names, str) and names else []
    if len(listed) != len(tensors):
        raise WireError(f"{len(tensors)} tensors but {len(listed)} names in {ARRAY_NAMES!r}: not a pfxab-flower "
                        "payload")
    arrays = dict(zip(listed, tensors, strict=True))
    rest = {}
    for key, value in config.items():
        if key.startswith(CONFIG_ARRAY_PREFIX):
            if not isinstance(value, bytes):
                raise WireError(f"{key!r} is {type(value).__name__}, not the .npy bytes of an array")
            try:
                arrays[key[len(CONFIG_ARRAY_PREFIX):]] = from_npy(value)
            except Exception as exc:  # foreign bytes: any failure is the sender's
                raise WireError(f"{key!r} cannot be read as an array: {exc!r}") from exc
        elif key != ARRAY_NAMES:
            rest[key] = value
    return arrays, rest


def arrays_to_config(payload: Payload) -> Config:
    """A payload's config with its arrays in it as ``.npy`` bytes (legacy replies without tensors of their own)."""
    arrays, config = payload
    return {**config, **{CONFIG_ARRAY_PREFIX + name: to_npy(array) for name, array in arrays.items()}}


# -- accounting ---------------------------------------------------------------------


def wire_size(tensors: Sequence[bytes], config: Mapping[str, Any]) -> tuple[int, int]:
    """``(values, bytes)`` that crossed Flower: serialised tensors, and the config without harness data.

    A config value counts as one value of 8 bytes (int, float), 1 (bool), or its length
    (str, bytes); an array carried in the config counts its elements. The config keys of
    :data:`ADDRESSING` (the node list of the run's first message, a reply's site label,
    the legacy tensors' names) are Flower's addressing, not the algorithm's
    communication: their bytes count, their values do not (so every engine counts the
    same values).
    """
    values = nbytes = 0
    for tensor in tensors:
        nbytes += len(tensor)
        values += npy_elements(tensor)
    for key, value in config.items():
        if key.startswith(HARNESS_PREFIX):
            continue
        if isinstance(value, bytes):
            nbytes += len(value)
            values += npy_elements(value) if key.startswith(CONFIG_ARRAY_PREFIX) else 0 if key in ADDRESSING else 1
        elif isinstance(value, str):
            nbytes += len(value.encode())
            values += 0 if key in ADDRESSING else 1
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


def _named(arrays: Mapping[str, np.ndarray], what: str, names: Sequence[str], why: str = "") -> Arrays:
    """The arrays ``names`` of a payload; :class:`WireError` naming the first one missing."""
    missing = [name for name in names if name not in arrays]
    if missing:
        raise WireError(f"{what} has no {missing[0]!r} array{why} (arrays: {describe_keys(arrays)})")
    return {name: arrays[name] for name in names}


def _one(part: Arrays, name: str, integer: bool) -> int | float:
    """The single value of a reply's array ``name``; :class:`WireError` unless it is one integer (one float)."""
    values = np.asarray(part[name]).reshape(-1)
    what = "integer" if integer else "float"
    if values.size != 1 or not np.issubdtype(values.dtype, np.integer if integer else np.floating):
        raise WireError(f"final reply's {name!r} is not one {what}")
    return int(values[0]) if integer else float(values[0])


def _statistics(statistics: Mapping[str, np.ndarray]) -> Arrays:
    return {STATISTIC_PREFIX + name: np.asarray(values, dtype=float) for name, values in statistics.items()}


def _statistic_names(confidence: str) -> tuple[str, ...]:
    """The statistics a broadcast of ``confidence``'s bound carries (none for a name no bound has:
    the client's own check of the parameters refuses that name)."""
    bound = BOUNDS.get(confidence)
    return bound.statistics if bound is not None else ()


def _ids(node_ids: object) -> np.ndarray:
    return np.asarray(node_ids, dtype=np.int64)


def _integer(config: Mapping[str, Any], key: str) -> int:
    """An integer of a server's config, as sent: ``1.9`` or ``"1"`` is no phase (a cast made them 1)."""
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise WireError(f"{key!r} is {value!r}, not an integer")
    return int(value)


def _integer_ids(values: object) -> np.ndarray:
    """Node ids of a server's message, as sent: floats (``2.5``) are no node ids (a cast made 2.5 node 2)."""
    ids = np.asarray(values)
    if not np.issubdtype(ids.dtype, np.integer):
        raise WireError(f"node ids are {ids.dtype}, not integers")
    return ids.astype(np.int64)
