"""Sweeps, comparisons, landmine fits and Flower simulations on a real two-node Ray cluster.

The cluster (``benchmarks/local_cluster.py``) is a head and a worker node started with
``ray start`` as separate processes on loopback, one CPU each; it is stopped after
the module with nothing left running. Every result on the cluster must equal the
local one exactly (wall times aside), and a sweep begun on the cluster must finish
locally into the same directory. The default tier runs a comparison on the cluster (the
``ray`` executor sweeps use too), the landmine fits, an in-process run given its address and
the check of a client larger than its nodes; the sweep and the two Flower simulations on the
cluster are the slow tier (``exhaustive``).
"""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

from benchmarks.local_cluster import Cluster, two_node_cluster
from pfxab_flower.problems.landmine import SvmEvaluator, cache_namespace
from pfxab_flower.problems.landmine_data import load_splits
from pfxab_flower.running import engine
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.simulations.cli.main import main
from pfxab_flower.simulations.flower.flwr_run_launcher import free_port
from pfxab_flower.simulations.flower.ray_cluster import fits_on
from pfxab_flower.storage.cache import EvaluationStore
from tests.conftest import CHEAP_ALGORITHMS_FLAG, PFXAB, cli_error_line
from tests.landmine_files import LandmineFile, accepting
from tests.test_sweep import TINY, write_config

#: Ray's C++ core prints this on stderr when a driver connects to a cluster at 127.0.0.1 on a machine with no
#: route out, as in the loopback-only namespace the tests run in (it then uses 127.0.0.1, as wanted). It comes
#: before any logging setting applies, so pfxab cannot silence it; the check of pfxab's own one line ignores it.
RAY_NO_ROUTE_WARNING = re.compile(r"\[[^]]*\] network_util\.cc:\d+: Failed to determine local IP via external "
                                  r"connectivity to: .*, falling back to hostname resolution$")


@pytest.mark.parametrize("command", [
    ["compare", "--executor", "ray", "--ray-address", "127.0.0.1:{port}"],
    ["run", "--engine", "flower", "--ray-address", "127.0.0.1:{port}"],
    ["simulate", "--ray-address", "127.0.0.1:{port}"],
])
def test_an_unreachable_cluster_is_one_line_before_any_work(command, tmp_path) -> None:
    port = free_port()  # bound, then released: nothing listens there
    line = cli_error_line(*[part.format(port=port) for part in command], "--horizon", "1000")
    assert line == (f"pfxab {command[0]}: error: --ray-address='127.0.0.1:{port}' cannot be reached as a Ray head "
                    "node (Connection refused); allowed: the HOST:PORT of a running Ray head node (start one with "
                    "`ray start --head`)")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """An HTTP server's handler that logs nothing (its log would be on the stderr of the command under test)."""

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.parametrize("command", [["compare", "--executor", "ray"], ["run"], ["simulate"]])
def test_a_port_that_answers_but_is_not_ray_is_one_line_within_seconds(command, tmp_path) -> None:
    """An HTTP server accepts TCP: only Ray's own answer (the GCS's CheckAlive over gRPC) passes the check."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        address = f"127.0.0.1:{server.server_address[1]}"
        line = cli_error_line(*command, "--ray-address", address, "--horizon", "1000")  # 60 s timeout at most
    finally:
        server.shutdown()
        server.server_close()
    assert line == (f"pfxab {command[0]}: error: --ray-address='{address}' cannot be reached as a Ray head node "
                    "(something answers on that port, but not Ray's GCS); allowed: the HOST:PORT of a running Ray "
                    "head node (start one with `ray start --head`)")


@pytest.mark.parametrize(("host", "fragment"), [
    ("h" * 5000, "is invalid; allowed: HOST:PORT of a running Ray head node"),  # was a UnicodeError traceback
    ("a" * 70 + "." + "b" * 70, "is invalid (the host is not a valid name)"),  # a DNS label is at most 63
])
def test_a_host_that_cannot_be_a_name_is_one_line(host, fragment) -> None:
    line = cli_error_line("run", "--ray-address", f"{host}:6379", "--horizon", "1000")
    assert line.startswith("pfxab run: error: --ray-address=") and fragment in line and len(line) < 400


@pytest.mark.parametrize(("args", "fragment"), [
    (["--executor", "ray"], "--executor='ray' is invalid without a --ray-address"),
    (["--ray-address", "127.0.0.1:6379"], "--ray-address='127.0.0.1:6379' is invalid with --executor='processes'"),
    (["--executor", "cluster"], "--executor='cluster' is invalid; allowed: processes, ray"),
    (["--executor", "ray", "--ray-address", "head"], "--ray-address='head' is invalid; allowed: HOST:PORT"),
])
def test_the_executor_and_its_address_are_checked_together(args, fragment, tmp_path) -> None:
    assert fragment in cli_error_line("sweep", str(write_config(tmp_path)), "--out", str(tmp_path / "o"), *args)
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def running() -> Cluster:
    with two_node_cluster() as cluster:
        yield cluster


@pytest.fixture
def cluster(running: Cluster) -> Iterator[str]:
    """The cluster's address; the test must have connected at least one more driver to it."""
    before = running.drivers()
    yield running.address
    assert running.drivers() > before, "nothing ran on the cluster"


def numbers(frame: pd.DataFrame) -> pd.DataFrame:
    """A results table without its wall times (the only column allowed to differ)."""
    columns = [c for c in frame.columns if "seconds" not in c]
    return frame[columns].sort_values("run_id" if "run_id" in columns else columns).reset_index(drop=True)


@pytest.mark.exhaustive  # default tier: resuming (tests/test_sweep.py), the ray executor here (the comparison)
@pytest.mark.ray
@pytest.mark.timeout(300)
def test_a_sweep_on_the_cluster_equals_the_local_one_and_resumes_on_either(cluster, tmp_path, capsys) -> None:
    full, half = write_config(tmp_path), write_config(tmp_path, TINY.format(seeds="[0]"), "half.toml")
    local, mixed = tmp_path / "local", tmp_path / "mixed"
    assert main(["sweep", str(full), "--out", str(local), "--no-progress", "--workers", "2"]) == 0
    # begun on the cluster (seed 0), finished locally (seed 1) into the same directory
    assert main(["sweep", str(half), "--out", str(mixed), "--no-progress", "--executor", "ray",
                 "--ray-address", cluster]) == 0
    assert f"tasks on the Ray cluster at {cluster}" in capsys.readouterr().out
    assert main(["sweep", str(full), "--out", str(mixed), "--no-progress"]) == 0
    assert "4 of 8 runs to do (4 already complete)" in capsys.readouterr().out
    for table in ("runs.parquet", "curves.parquet"):
        pd.testing.assert_frame_equal(numbers(pd.read_parquet(local / table)),
                                      numbers(pd.read_parquet(mixed / table)))
    # and the other way round: a sweep whose runs are all complete has nothing to do on the cluster
    assert main(["sweep", str(full), "--out", str(local), "--no-progress", "--executor", "ray",
                 "--ray-address", cluster]) == 0
    assert "all 8 runs already complete" in capsys.readouterr().out


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_a_comparison_on_the_cluster_equals_the_local_one(cluster, tmp_path) -> None:
    common = ["compare", "--problem", "doublesine", "--num-clients", "3", "--horizon", "20000", "--seeds", "0-2",
              "--confidence", "bernstein", "--no-progress", *CHEAP_ALGORITHMS_FLAG]
    assert main([*common, "--workers", "2", "--out", str(tmp_path / "local")]) == 0
    assert main([*common, "--executor", "ray", "--ray-address", cluster, "--out", str(tmp_path / "ray")]) == 0
    local, remote = (pd.read_parquet(tmp_path / name / "runs.parquet") for name in ("local", "ray"))
    pd.testing.assert_frame_equal(numbers(local), numbers(remote))


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_landmine_fits_on_the_cluster_equal_local_fits_and_only_the_driver_writes_the_cache(
        cluster, tmp_path, landmine_file: LandmineFile) -> None:
    with accepting(landmine_file):  # the generated landmine-format file: the fits, not the real data, are tested
        splits, sha = load_splits((0, 15), str(landmine_file.path))
    namespace = cache_namespace(sha)
    rng = np.random.default_rng(0)
    points = np.column_stack([10 ** rng.uniform(-4, 4, 12), 10 ** rng.uniform(-2, 1, 12)])  # off the table's grid
    local = SvmEvaluator(splits, namespace, workers=1).evaluate_all(points)
    store = EvaluationStore(tmp_path / "cache.sqlite")
    remote_evaluator = SvmEvaluator(splits, namespace, store=store, workers=1)
    with fits_on(cluster):
        remote = remote_evaluator.evaluate_all(points)
    np.testing.assert_array_equal(local, remote)
    assert remote_evaluator.fits == 2 * len(points)
    stored = EvaluationStore(tmp_path / "cache.sqlite").load(namespace, [0, 15], (0.0, 1.0))
    assert sum(len(values) for values in stored.values()) == 2 * len(points)  # written here, by the driver


@pytest.mark.exhaustive  # default tier: Flower's simulation on the worker's own Ray (tests/test_flower_ray.py)
@pytest.mark.ray
@pytest.mark.timeout(300)
def test_a_flower_simulation_on_the_cluster_equals_the_inprocess_run(cluster) -> None:
    from pfxab_flower.simulations.flower.in_process_simulation import run_flower_simulation

    config = RunConfig(problem="garland", algorithm="pf-xab", num_clients=4, alpha=0.5, horizon=30_000, seed=2)
    flower = run_flower_simulation(config, ray_address=cluster)
    inprocess = engine.run_config(config)
    for key in ("regret", "regret_per_client", "final_nodes", "final_points", "phases", "communication_rounds"):
        assert flower.summary[key] == inprocess.summary[key], key
    assert flower.phases.equals(inprocess.phases)


@pytest.mark.exhaustive  # default tier: pfxab simulate on its own Ray (tests/test_flower_simulate.py)
@pytest.mark.ray
@pytest.mark.timeout(300)
def test_simulate_through_flwr_run_on_the_cluster_equals_the_inprocess_run(cluster, tmp_path, capsys) -> None:
    import json

    args = ["--problem", "doublesine", "--num-clients", "3", "--horizon", "20000", "--seed", "1"]
    assert main(["simulate", *args, "--ray-address", cluster, "--out", str(tmp_path / "sim"), "--json"]) == 0
    simulated = json.loads(capsys.readouterr().out)
    assert main(["run", *args, "--json"]) == 0
    inprocess = json.loads(capsys.readouterr().out)
    for key in ("regret", "final_nodes", "final_points", "phases"):
        assert simulated[key] == inprocess[key], key


@pytest.mark.ray
@pytest.mark.timeout(120)
def test_a_client_larger_than_every_node_of_the_cluster_is_refused_before_the_run(cluster, tmp_path) -> None:
    line = cli_error_line("simulate", "--num-clients", "2", "--horizon", "1000", "--num-cpus", "2",  # in a process of
                          "--ray-address", cluster, "--out", str(tmp_path / "o"),  # its own: it asks the cluster
                          program=PFXAB, not_ours=RAY_NO_ROUTE_WARNING)
    assert line == (f"pfxab simulate: error: --num-cpus=2.0 is invalid; allowed: a number in (0, 1] (the largest node "
                    f"of the Ray cluster at {cluster} has 1 CPU)")
    assert not (tmp_path / "o").exists()


@pytest.mark.ray
@pytest.mark.timeout(120)
def test_an_inprocess_run_with_an_address_gives_the_same_numbers(running: Cluster, capsys) -> None:
    """With the in-process engine the address only sends landmine's SVM fits to the cluster (none here)."""
    import json

    args = ["run", "--problem", "garland", "--num-clients", "3", "--horizon", "20000", "--json"]
    assert main([*args, "--ray-address", running.address]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    local = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in remote.items() if "seconds" not in k} == {k: v for k, v in local.items()
                                                                       if "seconds" not in k}
