"""Issue 47 (the fourth attack), class 5: a Flower node builds its problem from the registry's declarations.

Under ``flwr run``, ``pfxab simulate`` and deployments each node builds its problem from the run config.
It kept a hand-written list of keys: a registered problem's own parameter never reached the nodes (the
server scored a width of 0.5, every node evaluated 1.0), and nor did the seed, which a builder may read
(``ProblemRun.seed``: a problem drawn per seed was another problem on every node). Proved here on the
Ray-free loopback grid: the nodes get nothing but the run config, as under ``flwr run``.
"""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Context, RecordDict

from pfxab_flower.client_apps import federation_sessions, message_client_app
from pfxab_flower.client_apps.sessions import problem_of
from pfxab_flower.parameter import Parameter, between
from pfxab_flower.problems import build_federation, register_problem, unregister_problem
from pfxab_flower.problems.federation import Federation
from pfxab_flower.running import engine
from pfxab_flower.schema.run_config import AppOptions, RunConfig, to_run_config
from pfxab_flower.strategies import STRATEGIES
from tests.message_loopback import LoopbackGrid, run_loopback

WIDTH = Parameter("width_47", float, 1.0, "a number in (0, 10]", "the tent's half width (a test problem)",
                  between(0, 10, low_open=True))


def tent_federation(run, noise) -> Federation:
    """Each client's tent peaks at a different place, drawn from the run's seed; ``run.width_47`` sets how wide."""
    peaks = np.random.default_rng(run.seed).uniform(0.1, 0.9, run.num_clients)

    def objective(m: int):
        return lambda x: np.maximum(0.0, 1.0 - np.abs(x[:, 0] - peaks[m]) / run.width_47)

    return Federation.from_callables([objective(m) for m in range(run.num_clients)], {"x": (0.0, 1.0)},
                                     noise_sigma=noise.sigma, noise=noise.kind, name="tent-47", value_range=(0, 1))


@pytest.fixture
def tent():
    register_problem("tent-47", tent_federation, help="a test problem with its own parameter", dimension=1,
                     parameters=(WIDTH,))
    yield
    unregister_problem("tent-47")


def through_run_config(config: RunConfig, options: AppOptions) -> dict:
    """The run on the loopback grid, its nodes given only the run config (as under ``flwr run``)."""
    strategy = STRATEGIES[config.algorithm](num_clients=config.num_clients, horizon=config.horizon, alpha=config.alpha,
                                           seed=config.seed, federation=build_federation(config))
    grid = LoopbackGrid(config.num_clients, message_client_app(federation_sessions()), seed=1)
    for context in grid.contexts.values():
        context.run_config = to_run_config(config, options)
    run_loopback(strategy, grid)
    return strategy.run_result().summary


def test_a_registered_problems_own_parameter_reaches_the_nodes(tent):
    """Before: the nodes evaluated width 1.0 (and peaks drawn from seed 0) while the server scored width 0.05 and
    seed 2's peaks; the final nodes and regret differed."""
    config = RunConfig(problem="tent-47", width_47=0.05, num_clients=3, horizon=40_000, seed=2)
    flower = through_run_config(config, AppOptions())
    inprocess = engine.run_config(config).summary
    for key in ("regret", "final_nodes", "final_points", "phases", "mean_reward_personalised"):
        assert flower[key] == inprocess[key], key


def test_the_nodes_draw_their_injected_failures_from_the_runs_seed():
    """A guard: the failure plan's seed is the one the server sends (the run config's is not needed for it)."""
    config = RunConfig(problem="garland", num_clients=4, horizon=30_000, seed=5)
    options = AppOptions(fail_rate=0.3, min_fraction=0.25)
    flower = through_run_config(config, options)
    federation = build_federation(config)
    inprocess = engine.run(federation, horizon=config.horizon, alpha=config.alpha, seed=config.seed,
                           faults=options.faults(config.seed), min_fraction=0.25).summary
    assert flower["regret"] == inprocess["regret"] and flower["final_nodes"] == inprocess["final_nodes"]
    assert inprocess["phases"] > 0


def test_a_node_keeps_every_declared_problem_key_and_nothing_else(tent):
    run_config = {"problem": "tent-47", "width-47": 0.3, "num-clients": 2, "seed": 9, "alpha": 0.9, "horizon": 10,
                  "candidates": 4, "out-dir": "/elsewhere", "fail-rate": 0.5}
    config, options = problem_of(run_config)
    assert (config.problem, config.width_47, config.num_clients, config.seed) == ("tent-47", 0.3, 2, 9)
    assert config.alpha == RunConfig().alpha and options.fail_rate == 0.5  # the algorithm's come with each message


def test_a_node_built_from_the_run_config_evaluates_the_servers_objective(tent):
    config = RunConfig(problem="tent-47", width_47=0.05, num_clients=2, seed=1)
    context = Context(run_id=1, node_id=5, node_config={"partition-id": 1}, state=RecordDict(),
                      run_config=to_run_config(config))
    node = federation_sessions()(context).make_environment(None).federation
    points = np.array([[0.35], [0.4], [0.5]])
    np.testing.assert_array_equal(node.local_values(points), build_federation(config).local_values(points))
