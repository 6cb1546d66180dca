"""SuperNodes without a ``partition-id``: the server assigns each connected node its client index.

The run's first message (either Flower API) lists the run's nodes in order; a node whose node
config has no ``partition-id`` is the client of its position, keeps it in its state and
answers for it from then on. Over the in-process loopback grid (no Ray): the numbers are
the in-process engine's, whatever the node ids; the node that held each client is in the
summary and the ``Result``; a node past the run's clients stands by; a node that lost its
state (a restart) cannot know its index and is counted failed, then lost, with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Context, Message, RecordDict

from pfxab_flower.client_apps import federation_sessions, legacy_client_app, message_client_app
from pfxab_flower.client_apps.sessions import ASSIGNED_STATE
from pfxab_flower.problems import build_federation
from pfxab_flower.running import engine
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.strategies import PFXAB, PFXABStrategy
from tests.impostors import phase_of
from tests.message_loopback import LoopbackGrid, run_legacy_workflow_loopback, run_loopback
from tests.patience import patient

CONFIG = RunConfig(problem="doublesine", num_clients=4, alpha=0.3, horizon=30_000, seed=2)
NODE_IDS = [307, 105, 2**63 + 11, 150]  # in no order; one beyond int64, as Flower's node ids can be
SAME_KEYS = ("regret", "regret_per_client", "final_nodes", "final_points", "phases", "values_down", "values_up",
             "rejected_replies", "pulls_scored")


class UnlabelledGrid(LoopbackGrid):
    """The loopback grid whose nodes have the given ids and no ``partition-id`` in their node config."""

    def __init__(self, node_ids: list[int], app, tamper=None) -> None:
        super().__init__(0, app, tamper=tamper)
        self.contexts = {node: Context(run_id=1, node_id=node, state=RecordDict(), run_config={},
                                       node_config={"site": f"site-{node}"} if node < 1000 else {})
                         for node in node_ids}


def run(node_ids: list[int], tamper=None, table=False):
    federation = build_federation(CONFIG)
    strategy = PFXAB(num_clients=CONFIG.num_clients, horizon=CONFIG.horizon, alpha=CONFIG.alpha, seed=CONFIG.seed,
                     federation=federation)
    grid = UnlabelledGrid(node_ids, message_client_app(federation_sessions(federation)), tamper)
    result = run_loopback(strategy, grid)
    scored = strategy.run_result()
    return (result, scored.summary, grid, scored.clients) if table else (result, scored.summary, grid)


def test_nodes_without_a_partition_id_get_the_index_of_their_place_and_the_inprocess_numbers() -> None:
    result, summary, grid, run_result = run(NODE_IDS, table=True)
    inprocess = engine.run_config(CONFIG).summary
    for key in SAME_KEYS:
        assert summary[key] == inprocess[key], key
    assert summary["flower_nodes"] == sorted(NODE_IDS) and inprocess["flower_nodes"] == [None] * 4
    assert summary["sites"] == ["site-105", "site-150", "site-307", None]  # the labels the node configs declare
    np.testing.assert_array_equal(result.arrays["client-nodes"].numpy(), np.array(sorted(NODE_IDS), dtype=np.uint64))
    # every client row says which site it is: the Result's arrays, and the result's table (clients.csv)
    assert result.arrays["client-sites"].numpy().tolist() == ["site-105", "site-150", "site-307", ""]
    assert len(result.arrays["client-sites"].numpy()) == len(result.arrays["final-points"].numpy())
    assert run_result["site"].tolist() == ["site-105", "site-150", "site-307", None]
    assert run_result["flower_node"].tolist() == sorted(NODE_IDS)
    kept = {node: int(grid.contexts[node].state[ASSIGNED_STATE]["client-index"]) for node in NODE_IDS}
    assert kept == {node: sorted(NODE_IDS).index(node) for node in NODE_IDS}


def test_a_node_past_the_runs_clients_stands_by() -> None:
    last = 2**64 - 5  # the largest node id: the fifth place
    _, summary, grid = run([*NODE_IDS, last])
    assert summary["flower_nodes"] == sorted(NODE_IDS) and summary["lost_clients"] == []
    assert int(grid.contexts[last].state[ASSIGNED_STATE]["client-index"]) == 4  # its place: beyond the clients


def restart_before_phase_2(grid: UnlabelledGrid, node: int) -> None:
    """Node ``node`` restarts before phase 2: its state (the index it was assigned, its session) is gone."""
    original, restarted = grid.app, []

    def app(message: Message, context: Context) -> Message:
        if context.node_id == node and phase_of(message) >= 2 and not restarted:
            restarted.append(True)
            context.state = RecordDict()
        return original(message, context)

    grid.app = app


def test_a_node_that_lost_its_index_is_counted_failed_then_lost_with_the_reason() -> None:
    federation = build_federation(CONFIG)
    strategy = PFXAB(num_clients=CONFIG.num_clients, horizon=CONFIG.horizon, alpha=CONFIG.alpha, seed=CONFIG.seed,
                     federation=federation)
    grid = UnlabelledGrid(NODE_IDS, message_client_app(federation_sessions(federation)))
    restart_before_phase_2(grid, 150)
    run_loopback(strategy, grid)
    summary = strategy.run_result().summary
    (lost,) = summary["lost_clients"]
    assert (lost["client"], lost["flower_node"], lost["phase"]) == (1, 150, 2)
    assert "no partition-id and no client index from the server" in lost["reason"]
    assert summary["pulls_scored"][0] == summary["pulls_scored"][2] == summary["pulls_scored"][3] == CONFIG.horizon


# -- the legacy API: the same assignment, in the first FitIns' config -------------------------------------------------
def run_legacy(node_ids: list[int]) -> tuple[dict, UnlabelledGrid]:
    """The legacy strategy and ClientApp through Flower's legacy workflow (its message conversion and the
    app's mods), over the loopback grid of nodes without a ``partition-id``."""
    federation = build_federation(CONFIG)
    strategy = PFXABStrategy(num_clients=CONFIG.num_clients, horizon=CONFIG.horizon, alpha=CONFIG.alpha,
                             seed=CONFIG.seed, federation=federation)
    grid = UnlabelledGrid(node_ids, legacy_client_app(federation_sessions(federation)))
    history = run_legacy_workflow_loopback(strategy, grid)
    summary = strategy.run_result().summary
    (final,) = [metrics for _, metrics in history.metrics_distributed_fit["client-nodes"]]
    assert json.loads(final) == summary["flower_nodes"]  # Flower's History holds who held each client
    (sites,) = [metrics for _, metrics in history.metrics_distributed_fit["sites"]]
    assert json.loads(sites) == summary["sites"]
    return summary, grid


def test_legacy_nodes_without_a_partition_id_get_the_index_of_their_place_and_the_inprocess_numbers() -> None:
    summary, grid = run_legacy(NODE_IDS)
    inprocess = engine.run_config(CONFIG).summary
    for key in SAME_KEYS:
        assert summary[key] == inprocess[key], key
    assert summary["flower_nodes"] == sorted(NODE_IDS)  # in order of node id, as over the Message API
    assert summary["sites"] == ["site-105", "site-150", "site-307", None]
    kept = {node: int(grid.contexts[node].state[ASSIGNED_STATE]["client-index"]) for node in NODE_IDS}
    assert kept == {node: sorted(NODE_IDS).index(node) for node in NODE_IDS}


def test_a_legacy_node_that_lost_its_index_is_counted_failed_then_lost_with_the_reason() -> None:
    federation = build_federation(CONFIG)
    strategy = PFXABStrategy(num_clients=CONFIG.num_clients, horizon=CONFIG.horizon, alpha=CONFIG.alpha,
                             seed=CONFIG.seed, federation=federation)
    grid = UnlabelledGrid(NODE_IDS, legacy_client_app(federation_sessions(federation)))
    original, trains = grid.app, []

    def app(message: Message, context: Context) -> Message:  # node 150 restarts before its second fit (phase 2)
        if context.node_id == 150 and message.metadata.message_type == "train":
            trains.append(True)
            if len(trains) == 2:
                context.state = RecordDict()
        return original(message, context)

    grid.app = app
    run_legacy_workflow_loopback(strategy, grid)
    summary = strategy.run_result().summary
    (lost,) = summary["lost_clients"]
    assert (lost["client"], lost["flower_node"], lost["phase"]) == (1, 150, 2)
    assert "no partition-id and no client index from the server" in lost["reason"]
    assert summary["pulls_scored"][0] == summary["pulls_scored"][2] == summary["pulls_scored"][3] == CONFIG.horizon


def test_a_legacy_node_past_the_runs_clients_stands_by() -> None:
    last = 2**64 - 5
    summary, grid = run_legacy([*NODE_IDS, last])
    assert summary["flower_nodes"] == sorted(NODE_IDS) and summary["lost_clients"] == []
    assert int(grid.contexts[last].state[ASSIGNED_STATE]["client-index"]) == 4


# -- a real deployment of a user's own objective app, SuperNodes without a partition-id ----------------------------
SITE_APP = {
    "pyproject.toml": """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "site-app"
version = "1.0.0"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["site_app"]

[tool.flwr.app]
publisher = "tests"

[tool.flwr.app.components]
serverapp = "site_app.server_app:app"
clientapp = "site_app.client_app:app"

[tool.flwr.app.config]
out = ""
""",
    "site_app/__init__.py": "",
    "site_app/client_app.py": """\
import numpy as np

from pfxab_flower.client_apps import from_context, objective_client_app


def make_objective(context):
    optimum = float(context.node_config["optimum"])  # the site's own data, from its node config
    return lambda points: 1.0 - np.abs(points[:, 0] - optimum)


app = objective_client_app(from_context(make_objective), {"x": (0.0, 1.0)}, evaluation="deterministic",
                           value_range=(0.0, 1.0))
""",
    "site_app/server_app.py": """\
import json

from flwr.serverapp import ServerApp

from pfxab_flower.strategies import PFXAB

app = ServerApp()


@app.main()
def main(grid, context):
    strategy = PFXAB(num_clients=3, horizon=20_000, alpha=1.0, seed=0, round_timeout=ROUND_TIMEOUT,
                     reward_range=(0.0, 1.0))
    result = strategy.start(grid=grid)
    with open(context.run_config["out"], "w") as file:
        json.dump({"client-nodes": result.arrays["client-nodes"].numpy().tolist(),
                   "sites": [strategy.driver.sites.get(m) for m in range(3)],
                   "final-points": result.arrays["final-points"].numpy().tolist(),
                   "lost": strategy.lost_clients}, file)
""",
}
OPTIMA = (0.15, 0.5, 0.85)


@pytest.mark.exhaustive  # default tier: the same assignment over both of Flower's loops without Ray (above)
@pytest.mark.slow
@pytest.mark.loopback
@pytest.mark.timeout(240)
def test_a_deployment_of_a_users_objective_app_whose_supernodes_have_no_partition_id(tmp_path: Path) -> None:
    from pfxab_flower.simulations.flower import local_deployment as dep
    from tests.deployment_tools import log_tail

    app_dir = tmp_path / "app"
    for name, body in SITE_APP.items():
        (app_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (app_dir / name).write_text(body.replace("ROUND_TIMEOUT", repr(patient(60.0))), encoding="utf-8")
    out = tmp_path / "result.json"
    node_configs = [f'optimum={optimum} site="site-{i}"' for i, optimum in enumerate(OPTIMA)]
    with dep.deployment(3, tmp_path / "deploy", node_configs=node_configs, startup_timeout=patient(60)) as running:
        done = running.flwr_run(app_dir, f'out="{out}"', timeout=patient(180))
        assert done.returncode == 0 and out.exists(), done.stdout[-2000:] + done.stderr[-2000:] + log_tail(running)
        logs = log_tail(running, lines=400)
    result = json.loads(out.read_text())
    assert result["lost"] == [] and "Traceback" not in logs
    nodes = result["client-nodes"]
    assert len(set(nodes)) == 3 and 0 not in nodes and nodes == sorted(nodes)  # client m: the m-th node id
    assert sorted(result["sites"]) == ["site-0", "site-1", "site-2"]  # each node's declared label, recorded
    # each site tuned its own objective: the three final points are the three sites' optima, one each
    points = sorted(point[0] for point in result["final-points"])
    assert all(abs(point - optimum) <= 1 / 16 for point, optimum in zip(points, OPTIMA, strict=True)), points
