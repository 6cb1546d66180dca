"""Fuzz the strategy with random malformed replies: it never crashes and never averages an invalid value.

Each trial sends phase 1 to ``M`` in-process clients, then breaks a random subset of
their replies in a random way (shapes, dtypes, NaN/inf, garbage bytes, missing or
wrong ``partition-id``, duplicates, extra or missing tensors, Flower failures). The
global means must be exactly the pooled means of the untouched replies, every broken
reply must be rejected, and the same holds for the active sets of the second exchange
and for the final replies (node ids out of the partition or off the client's branch,
non-integer ids, NaN/inf or wrong-length points, duplicates), sent through the legacy
wire at the end of a real run. Seeded numpy draws keep every trial reproducible.
"""

from __future__ import annotations

import numpy as np
import pytest
from flwr.common import Code, FitRes, Parameters, Status, parameters_to_ndarrays
from flwr.server import SimpleClientManager

from pfxab_flower.algorithms.messages import ActiveSetReport, FinishReport, LocalReport
from pfxab_flower.algorithms.phased import FIRST_ACTIVE_SET, pooled_means
from pfxab_flower.arms.partition import children
from pfxab_flower.client_apps import federation_sessions
from pfxab_flower.problems import build_federation
from pfxab_flower.running.wire import codec
from pfxab_flower.running.wire.npy import to_npy
from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.simulations.flower.app_builders import strategy_of
from tests.flower_loopback import (
    LoopbackProxy,
    legacy_fit_res,
    legacy_payload,
    numpy_client_fn,
    ok_evaluate_res,
    ok_fit_res,
)
from tests.test_hostile_replies import finish_with

M = 6
FIT_BREAKS = (
    "short", "long", "2d", "nan", "inf", "-inf", "int-means", "str-means", "bool-means", "complex-means",
    "garbage-bytes", "no-metrics", "pid-str", "pid-bool", "pid-float", "pid-negative", "pid-too-large",
    "duplicate", "negative-counts", "float-counts", "ids-shifted", "no-counts", "means-renamed", "no-tensors",
    "unnamed-tensors",
)
SET_BREAKS = ("garbage", "odd-bytes", "not-children", "duplicate-ids", "empty", "no-pid", "pid-str", "twice")


def sent_phase(seed: int):
    config = RunConfig(num_clients=M, horizon=50_000, seed=seed)
    federation = build_federation(config)
    strategy = strategy_of(config, AppOptions(api="legacy", min_fraction=0.0), federation)  # never stop
    manager = SimpleClientManager()
    client_fn = numpy_client_fn(federation_sessions(federation))
    for m in range(M):
        manager.register(LoopbackProxy(m, M, client_fn))
    instructions = strategy.configure_fit(1, Parameters([], ""), manager)
    return strategy, [(proxy, proxy.fit(ins, None, None)) for proxy, ins in instructions]


def report_of(res: FitRes) -> LocalReport:
    return codec.read_reply(*legacy_payload(res), LocalReport)


def broken_fit(kind: str, res: FitRes, rng: np.random.Generator, valid: list) -> FitRes:
    arrays, metrics = legacy_payload(res)
    ids, means, counts = (np.array(arrays[name]) for name in (codec.NODE_IDS, codec.MEANS, codec.COUNTS))
    pid = metrics[codec.PARTITION_ID]
    if kind == "short":
        arrays[codec.MEANS] = means[:-1]
    elif kind == "long":
        arrays[codec.MEANS] = np.append(means, 0.5)
    elif kind == "2d":
        arrays[codec.MEANS] = means.reshape(1, -1)
    elif kind in ("nan", "inf", "-inf"):
        arrays[codec.MEANS] = means.copy()
        arrays[codec.MEANS][rng.integers(means.size)] = float(kind)
    elif kind.endswith("-means"):
        dtype = {"int-means": np.int64, "str-means": str, "bool-means": bool, "complex-means": complex}[kind]
        arrays[codec.MEANS] = means.astype(dtype)
    elif kind == "garbage-bytes":
        metrics[codec.ARRAY_NAMES] = ",".join(arrays)
        return FitRes(Status(Code.OK, ""), Parameters([rng.bytes(40) for _ in arrays], "numpy.ndarray"), 1, metrics)
    elif kind == "no-metrics":
        metrics = {}
    elif kind.startswith("pid-"):
        metrics[codec.PARTITION_ID] = {"pid-str": str(pid), "pid-bool": True, "pid-float": float(pid),
                                       "pid-negative": -1, "pid-too-large": M + 3}[kind]
    elif kind == "duplicate":  # a second copy of a valid client's reply
        return valid[int(rng.integers(len(valid)))]
    elif kind == "negative-counts":
        arrays[codec.COUNTS] = -counts
    elif kind == "float-counts":
        arrays[codec.COUNTS] = counts.astype(float)
    elif kind == "ids-shifted":
        arrays[codec.NODE_IDS] = ids + 2
    elif kind == "no-counts":
        del arrays[codec.COUNTS]
    elif kind == "means-renamed":  # the means under another name (an earlier or later version's)
        arrays["local-means"] = arrays.pop(codec.MEANS)
    elif kind == "no-tensors":
        arrays = {}
    elif kind == "unnamed-tensors":  # an earlier version's reply: tensors by position, no names
        return ok_fit_res([ids, means, counts], 1, metrics)
    return legacy_fit_res(arrays, metrics)


@pytest.mark.parametrize("seed", range(12))
def test_random_malformed_local_reports_are_never_averaged(seed: int) -> None:
    rng = np.random.default_rng(seed)
    strategy, results = sent_phase(seed)
    broken = set(rng.choice(M, size=int(rng.integers(1, M)), replace=False).tolist())
    valid_res = [res for _, res in results if res.metrics[codec.PARTITION_ID] not in broken]
    replies, failures = [], []
    for proxy, res in results:
        pid = res.metrics[codec.PARTITION_ID]
        if pid not in broken:
            replies.append((proxy, res))
        elif rng.random() < 0.15:
            failures.append(RuntimeError(f"client {pid} lost"))
        else:
            replies.append((proxy, broken_fit(str(rng.choice(FIT_BREAKS)), res, rng, valid_res)))
    order = rng.permutation(len(replies))
    strategy.aggregate_fit(1, [replies[i] for i in order], failures)
    update = strategy.driver.global_update
    assert update is not None
    # a copy of a valid reply sent by another node disputes that client: no node holds it yet, so neither is used
    disputed = {res.metrics[codec.PARTITION_ID] for proxy, res in replies
                if res in valid_res and proxy.node_id != 100 + res.metrics[codec.PARTITION_ID]}
    used = [r for r in valid_res if r.metrics[codec.PARTITION_ID] not in disputed]
    expected = pooled_means(update.node_ids, [report_of(r) for r in used])
    np.testing.assert_array_equal(update.global_means, expected)
    assert len(strategy.driver.machine.rejected) == len(replies) - len(used)
    assert strategy.driver.machine.plan.failed_local_means == len(broken) + len(disputed)


def broken_set(kind: str, res, rng: np.random.Generator, pid: int):
    metrics = dict(res.metrics)
    key = codec.CONFIG_ARRAY_PREFIX + codec.NODE_IDS  # a legacy evaluate reply carries its arrays in its metrics
    if kind == "garbage":
        metrics[key] = to_npy(rng.integers(-2**62, 2**62, size=2))  # 2 random int64s: not children of the set
    elif kind == "odd-bytes":
        metrics[key] = b"\x01\x02\x03"
    elif kind == "not-children":
        metrics[key] = to_npy(np.array([1, 2], dtype="<i8"))
    elif kind == "duplicate-ids":
        metrics[key] = to_npy(np.array([4, 4], dtype="<i8"))
    elif kind == "empty":
        metrics[key] = to_npy(np.array([], dtype="<i8"))
    elif kind == "no-pid":
        del metrics[codec.PARTITION_ID]
    elif kind == "pid-str":
        metrics[codec.PARTITION_ID] = str(pid)
    return ok_evaluate_res(0.0, 1, metrics)


@pytest.mark.parametrize("seed", range(8))
def test_random_malformed_active_sets_fall_back_to_the_superset(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    strategy, results = sent_phase(seed)
    strategy.aggregate_fit(1, results, [])
    evaluations = strategy.configure_evaluate(1, Parameters([], ""), SimpleClientManager())
    replies = [(proxy, proxy.evaluate(ins, None, None)) for proxy, ins in evaluations]
    good = {res.metrics[codec.PARTITION_ID]: res for _, res in replies}
    broken = set(rng.choice(M, size=int(rng.integers(1, M)), replace=False).tolist())
    sent = []
    for proxy, res in replies:
        pid = res.metrics[codec.PARTITION_ID]
        kind = str(rng.choice(SET_BREAKS))
        if pid not in broken:
            sent.append((proxy, res))
        elif kind == "twice":  # a second reply claiming another (valid) client's id
            other = next(m for m in range(M) if m not in broken)
            sent.append((proxy, good[other]))
        else:
            sent.append((proxy, broken_set(kind, res, rng, pid)))
    strategy.aggregate_evaluate(1, sent, [])
    server = strategy.driver.machine
    assert server.completed == 1
    for m in range(M):
        if m in broken:
            np.testing.assert_array_equal(server.client_sets[m], children(FIRST_ACTIVE_SET))
        else:
            reported = np.sort(codec.read_reply(*legacy_payload(good[m]), ActiveSetReport).node_ids)
            np.testing.assert_array_equal(server.client_sets[m], reported)
    assert server.history[0]["failed_active_sets"] == len(broken)


@pytest.mark.parametrize("kind", FIT_BREAKS)
def test_every_kind_of_broken_local_report_is_rejected(kind: str) -> None:
    rng = np.random.default_rng(0)
    strategy, results = sent_phase(0)
    valid_res = [res for _, res in results if res.metrics[codec.PARTITION_ID] != 0]
    replies = [(p, broken_fit(kind, res, rng, valid_res) if res.metrics[codec.PARTITION_ID] == 0 else res)
               for p, res in results]
    strategy.aggregate_fit(1, replies, [])
    # a copy of another client's reply from node 0 disputes that client (neither node holds it yet): both refused
    disputed = {res.metrics[codec.PARTITION_ID] for p, res in replies
                if res in valid_res and p.node_id != 100 + res.metrics[codec.PARTITION_ID]}
    assert len(strategy.driver.machine.rejected) == 1 + len(disputed), kind
    used = [r for r in valid_res if r.metrics[codec.PARTITION_ID] not in disputed]
    expected = pooled_means(strategy.driver.global_update.node_ids, [report_of(r) for r in used])
    np.testing.assert_array_equal(strategy.driver.global_update.global_means, expected)


FINAL_BREAKS = ("huge", "negative", "zero", "root", "float", "bool", "string", "sibling-branch", "nan-point",
                "inf-point", "short-point", "2d-point", "int-point")


def broken_final(kind: str, report: FinishReport, rng: np.random.Generator) -> tuple[object, object]:
    """A final reply's (node, point), broken in one way."""
    node, point = report.node_id, report.point
    if kind == "huge":
        node = int(rng.integers(2**62, 2**63 - 1))
    elif kind in ("negative", "zero", "root"):
        node = {"negative": -int(rng.integers(1, 100)), "zero": 0, "root": 1}[kind]
    elif kind in ("float", "bool", "string"):
        node = {"float": node + 0.5, "bool": True, "string": str(node)}[kind]
    elif kind == "sibling-branch":
        node = node ^ 1 if (node ^ 1) // 2 == node // 2 else node + 1  # same depth, a cell the client dropped
    elif kind.endswith("-point"):
        point = {"nan-point": np.array([np.nan]), "inf-point": np.array([np.inf]), "short-point": np.array([]),
                 "2d-point": point.reshape(1, -1), "int-point": np.array([1])}[kind]
    return node, point


@pytest.mark.parametrize("seed", range(8))
def test_random_malformed_final_replies_never_crash_and_are_never_used(seed: int) -> None:
    rng = np.random.default_rng(300 + seed)
    honest = finish_with({})
    broken = sorted(rng.choice(4, size=int(rng.integers(1, 4)), replace=False).tolist())
    kinds = {m: str(rng.choice(FINAL_BREAKS)) for m in broken}
    nodes, points = {}, {}
    for m in broken:
        nodes[m], points[m] = broken_final(kinds[m], honest.final_reports[m], rng)
    driver = finish_with(nodes, points)
    refused = [m for m in broken if kinds[m] != "sibling-branch" or not holds(honest, m, nodes[m])]
    if driver.stop_reason is not None:  # too few usable final replies for the quorum (2 of 4): stopped, no result
        assert len(driver.final_reports) < 2 and "usable final reply" in driver.stop_reason
        assert not set(refused) & set(driver.final_reports), kinds
        return
    result = driver.result("inprocess")
    assert set(driver.lost_clients()) <= set(broken), kinds
    for m in range(4):
        if m in driver.lost_clients():
            assert result.summary["final_points"][m] is None
        else:
            assert result.summary["final_nodes"][m] == honest.final_reports[m].node_id or m in broken
    # every break is refused, but a sibling the client still holds (both halves survived its last phase)
    assert set(refused) <= set(driver.lost_clients()), kinds


def holds(driver, client: int, node: int) -> bool:
    """Whether ``client``'s last active set descends from ``node`` (so it may end there)."""
    depth = int(node).bit_length() - 1
    return any(int(n) >> (int(n).bit_length() - 1 - depth) == node for n in driver.machine.client_sets[client])


# -- final replies, through the legacy wire at the end of a real run ---------------------------------------------------

WIRE_FINAL_BREAKS = (
    "2^62", "int64-max", "negative", "zero", "root", "off-branch", "float-node", "integral-float-node", "bool-node",
    "two-node-ids", "nan-point", "inf-point", "-inf-point", "empty-point", "long-point", "moved-point", "int-point",
    "point-missing",
    "point-renamed", "garbage-bytes", "no-pid", "pid-too-large", "pid-negative", "duplicate", "impersonate",
)


def final_round(seed: int):
    """A legacy strategy run to its final broadcast, with every client's honest final reply."""
    config = RunConfig(num_clients=M, horizon=50_000, seed=seed)
    federation = build_federation(config)
    strategy = strategy_of(config, AppOptions(api="legacy", min_fraction=0.0), federation)
    manager = SimpleClientManager()
    client_fn = numpy_client_fn(federation_sessions(federation))
    for m in range(M):
        manager.register(LoopbackProxy(m, M, client_fn))
    for server_round in range(1, strategy.num_rounds + 1):
        results = [(p, p.fit(ins, None, None)) for p, ins in strategy.configure_fit(server_round, None, manager)]
        if strategy.driver.outgoing is not None and strategy.driver.outgoing.kind == "finish":
            return strategy, server_round, results
        strategy.aggregate_fit(server_round, results, [])
        evaluations = strategy.configure_evaluate(server_round, None, manager)
        strategy.aggregate_evaluate(server_round, [(p, p.evaluate(ins, None, None)) for p, ins in evaluations], [])
    raise AssertionError("the run never reached its final round")


def off_branch(strategy, client: int, node: int) -> int:
    """A node at the depth of ``node`` that ``client``'s last active set does not descend from."""
    depth = int(node).bit_length() - 1
    return next(n for n in range(2**depth, 2 ** (depth + 1)) if not holds(strategy.driver, client, n))


def broken_final_res(kind: str, res: FitRes, strategy, rng: np.random.Generator, valid: dict[int, FitRes]) -> FitRes:
    """A client's final ``FitRes`` (``[[node id], point]``, ``{partition-id}``), broken in one way."""
    arrays, metrics = legacy_payload(res)
    node_ids, point = arrays[codec.NODE_ID], arrays[codec.POINT]
    pid, node = metrics[codec.PARTITION_ID], int(node_ids[0])
    nodes: np.ndarray = node_ids
    if kind in ("2^62", "int64-max", "negative", "zero", "root", "off-branch"):
        value = {"2^62": 2**62, "int64-max": 2**63 - 1, "negative": -int(rng.integers(1, 100)), "zero": 0, "root": 1,
                 "off-branch": off_branch(strategy, pid, node) if kind == "off-branch" else 0}[kind]
        nodes = np.array([value], dtype=np.int64)
    elif kind.endswith("-node"):
        nodes = {"float-node": np.array([node + 0.5]), "integral-float-node": np.array([float(node)]),
                 "bool-node": np.array([True])}[kind]
    elif kind == "two-node-ids":
        nodes = np.array([node, node], dtype=np.int64)
    elif kind.endswith("-point"):
        point = {"nan-point": np.full_like(point, np.nan), "inf-point": np.full_like(point, np.inf),
                 "-inf-point": np.full_like(point, -np.inf), "empty-point": np.array([], dtype=float),
                 "long-point": np.append(point, 0.5), "moved-point": point + 1e-3,
                 "int-point": np.ones(point.size, dtype=np.int64)}[kind]
    elif kind == "point-missing":
        return legacy_fit_res({codec.NODE_ID: nodes}, metrics)
    elif kind == "point-renamed":
        return legacy_fit_res({codec.NODE_ID: nodes, "final-point": point}, metrics)
    elif kind == "garbage-bytes":
        metrics[codec.ARRAY_NAMES] = f"{codec.NODE_ID},{codec.POINT}"
        return FitRes(Status(Code.OK, ""), Parameters([rng.bytes(40), rng.bytes(40)], "numpy.ndarray"), 1, metrics)
    elif kind == "no-pid":
        del metrics[codec.PARTITION_ID]
    elif kind in ("pid-too-large", "pid-negative"):
        metrics[codec.PARTITION_ID] = M + 3 if kind == "pid-too-large" else -1
    elif kind == "duplicate":  # a second copy of another client's valid reply
        return valid[int(rng.choice(sorted(valid)))]
    elif kind == "impersonate":  # its own node, claiming to be another (valid) client
        metrics[codec.PARTITION_ID] = int(rng.choice(sorted(valid)))
    return legacy_fit_res({codec.NODE_ID: nodes, codec.POINT: point}, metrics)


def send_final(seed: int, kinds: dict[int, str]):
    """Break the final replies of the clients in ``kinds``; the strategy and what its final round returned."""
    rng = np.random.default_rng(500 + seed)
    strategy, server_round, results = final_round(seed)
    honest = {res.metrics[codec.PARTITION_ID]: res for _, res in results}
    valid = {m: res for m, res in honest.items() if m not in kinds}
    replies = [(p, broken_final_res(kinds[m], res, strategy, rng, valid) if (m := res.metrics[codec.PARTITION_ID])
                in kinds else res) for p, res in results]
    order = rng.permutation(len(replies))
    parameters, metrics = strategy.aggregate_fit(server_round, [replies[i] for i in order], [])
    return strategy, honest, parameters, metrics


def check_final_round(strategy, honest: dict[int, FitRes], parameters, kinds: dict[int, str]) -> None:
    """The honest clients' finals are kept exactly, the broken ones are rejected and their clients lost."""
    driver = strategy.driver
    assert driver.finished and strategy.configure_fit(999, None, SimpleClientManager()) == []
    refused = set(kinds)
    assert sorted(driver.final_reports) == sorted(set(range(M)) - refused), kinds
    assert [r["stage"] for r in driver.machine.rejected] == ["finish"] * len(refused), kinds
    points = parameters_to_ndarrays(parameters)[0]
    assert points.shape[0] == M
    for m in range(M):
        node_ids, point = (legacy_payload(honest[m])[0][name] for name in (codec.NODE_ID, codec.POINT))
        if m in refused:
            assert np.all(np.isnan(points[m]))
        else:
            assert driver.final_reports[m].node_id == int(node_ids[0])
            np.testing.assert_array_equal(points[m], point)
    summary = driver.result("flower").summary  # scoring never crashes: a lost client is scored up to its last report
    assert [lost["client"] for lost in summary["lost_clients"]] == sorted(refused)


@pytest.mark.parametrize("seed", range(10))
def test_random_malformed_final_replies_never_crash_the_server_and_are_rejected(seed: int) -> None:
    rng = np.random.default_rng(400 + seed)
    broken = rng.choice(M, size=int(rng.integers(1, M)), replace=False).tolist()
    kinds = {m: str(rng.choice(WIRE_FINAL_BREAKS)) for m in broken}
    strategy, honest, parameters, _ = send_final(seed, kinds)
    check_final_round(strategy, honest, parameters, kinds)


@pytest.mark.parametrize("kind", WIRE_FINAL_BREAKS)
def test_every_kind_of_broken_final_reply_is_rejected(kind: str) -> None:
    strategy, honest, parameters, _ = send_final(0, {3: kind})
    assert 3 not in strategy.driver.final_reports, f"{kind}: the server used a broken final reply"
    check_final_round(strategy, honest, parameters, {3: kind})


def test_final_points_of_another_length_or_place_are_refused_and_the_honest_ones_kept() -> None:
    """A simulation's server knows the domain: a point must be its node's cell centre, of the domain's length."""
    strategy, honest, parameters, _ = send_final(1, {0: "long-point", 4: "moved-point", 5: "empty-point"})
    points = parameters_to_ndarrays(parameters)[0]
    assert points.shape == (M, legacy_payload(honest[1])[0][codec.POINT].size)
    for m in (1, 2, 3):
        np.testing.assert_array_equal(points[m], legacy_payload(honest[m])[0][codec.POINT])
    assert not {0, 4, 5} & set(strategy.driver.final_reports)
    reasons = {r["client"]: r["reason"] for r in strategy.driver.machine.rejected}
    assert "expected" in reasons[0] and "domain's dimension" in reasons[0], reasons
    assert "is not the centre" in reasons[4], reasons
