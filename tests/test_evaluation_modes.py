"""Evaluation modes: what an objective is decides what a pull costs, and who calls it.

* ``stochastic``: one row per pull (``M x T`` rows in all), a phase's pulls in one batch of
  repeated rows, nothing else; no regret without a reference.
* ``deterministic``: each site's points once each, nothing else; with the objectives as the
  reference it is the simulated run with noise ``none``.
* A site's objective built from its node's ``Context`` (``from_context``), over the Message
  API (loopback grid) and Flower's Ray simulation, gives the in-process numbers.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from flwr.app import Context

from pfxab_flower import Federation, run
from pfxab_flower.algorithms import make_policy
from pfxab_flower.client_apps import from_context, objective_client_app, objective_sessions
from pfxab_flower.errors import ConfigError, ObjectiveError
from pfxab_flower.running.engine import make_settings, run_config, simulate
from pfxab_flower.schema.run_config import RunConfig, parse_run_config
from pfxab_flower.strategies import STRATEGIES
from tests.conftest import cli_error_line
from tests.message_loopback import LoopbackGrid, run_loopback
from tests.patience import patient

CENTRES = (0.2, 0.5, 0.7)
DOMAIN = {"x": (0.0, 1.0)}


class Recorder:
    """A site's black box that records every batch it is given; noisy (a real trial) when ``noise`` > 0."""

    def __init__(self, centre: float, noise: float = 0.0, seed: int = 0) -> None:
        self.centre, self.noise = centre, noise
        self.rng = np.random.default_rng(seed)
        self.batches: list[np.ndarray] = []
        self.values: list[float] = []

    def __call__(self, points: np.ndarray) -> np.ndarray:
        self.batches.append(np.array(points))
        mean = 1.0 - np.abs(points[:, 0] - self.centre)
        values = np.clip(mean + self.noise * self.rng.uniform(-1, 1, len(points)), 0.0, 1.0)
        self.values.extend(values.tolist())
        return values

    def mean(self, points: np.ndarray) -> np.ndarray:
        return 1.0 - np.abs(points[:, 0] - self.centre)

    @property
    def rows(self) -> np.ndarray:
        return np.concatenate(self.batches)[:, 0] if self.batches else np.zeros(0)


def recorders(noise: float = 0.0) -> list[Recorder]:
    return [Recorder(c, noise, seed=m) for m, c in enumerate(CENTRES)]


def test_stochastic_objectives_get_one_row_per_pull_and_nothing_else() -> None:
    sites = recorders(noise=0.05)
    federation = Federation.from_callables(sites, DOMAIN, evaluation="stochastic", value_range=(0.0, 1.0))
    horizon = 3_000
    result = run(federation, alpha=0.5, horizon=horizon, seed=0)
    summary = result.summary
    assert [len(site.rows) for site in sites] == [horizon] * len(CENTRES)
    assert summary["evaluations"] == len(CENTRES) * horizon == sum(len(site.rows) for site in sites)
    assert summary["evaluations_per_client"] == [horizon] * len(CENTRES)
    # pulls come in batches of repeated rows: per phase at most three calls (global exploration, local
    # exploration, exploitation while the server averages), then the final exploitation
    for site in sites:
        assert len(site.batches) <= 3 * summary["phases"] + 1
        assert max(len(batch) for batch in site.batches) > len(np.unique(np.concatenate(site.batches)))
    assert summary["regret"] is None and summary["regret_per_client"] is None
    assert summary["optimum_personalised"] is None and summary["mean_reward_personalised"] is None
    observed = [sum(site.values) / horizon for site in sites]  # what the black boxes returned, per pull
    assert summary["mean_observed_reward_per_client"] == pytest.approx(observed, rel=1e-12)
    assert len(summary["objective_seconds_per_client"]) == len(CENTRES)
    assert all(seconds > 0 for seconds in summary["objective_seconds_per_client"])
    assert summary["evaluation"] == "stochastic"
    assert np.isnan(result.curve["regret"]).all()
    json.loads(result.to_json())  # nulls, no NaN: valid JSON


def test_stochastic_rows_are_the_pulled_cells_centres() -> None:
    """The rows a site is given, as a multiset, are its pull log's cell centres, each as often as it was pulled."""
    sites = recorders(noise=0.05)
    federation = Federation.from_callables(sites, DOMAIN, evaluation="stochastic", value_range=(0.0, 1.0))
    sim = simulate(federation, make_policy("pf-xab"), make_settings(3, alpha=0.5, horizon=2_000, seed=1))
    for env, site in zip(sim.envs, sites, strict=True):
        expected = np.repeat(env.partition.midpoints(env.log.node_ids)[:, 0], env.log.counts)
        np.testing.assert_array_equal(np.sort(site.rows), np.sort(expected))


def test_stochastic_regret_against_a_reference_calls_only_the_reference() -> None:
    sites = recorders(noise=0.05)
    references = recorders(noise=0.0)
    federation = Federation.from_callables(sites, DOMAIN, evaluation="stochastic", value_range=(0.0, 1.0),
                                           reference=[r.mean for r in references])
    horizon = 2_000
    summary = run(federation, alpha=0.5, horizon=horizon, seed=0).summary
    assert [len(site.rows) for site in sites] == [horizon] * len(CENTRES)  # the reference took the other calls
    assert summary["regret"] is not None and summary["regret"] > 0
    assert summary["regret"] == pytest.approx(sum(summary["regret_per_client"]))
    assert summary["optimum_personalised"] is not None


def test_deterministic_objectives_see_each_point_once_and_nothing_else() -> None:
    sites = recorders()
    federation = Federation.from_callables(sites, DOMAIN, evaluation="deterministic")
    result = run(federation, alpha=0.5, horizon=100_000, seed=0)
    summary = result.summary
    for m, site in enumerate(sites):
        assert len(site.rows) == len(set(site.rows.tolist())) > 0  # each point once
        assert summary["evaluations_per_client"][m] == len(site.rows)
    assert summary["evaluations"] == sum(len(site.rows) for site in sites) < len(CENTRES) * 100_000
    assert summary["regret"] is None
    # observed rewards are the exact values of the pulls: client 0 exploits a point near its target
    assert 0.5 < summary["mean_observed_reward_per_client"][0] <= 1.0


def test_deterministic_with_its_own_reference_is_the_simulated_run_without_noise() -> None:
    sites = recorders()
    exact = Federation.from_callables(sites, DOMAIN, evaluation="deterministic", reference=sites)
    simulated = Federation.from_callables(recorders(), DOMAIN, noise="none")
    a = run(exact, alpha=0.5, horizon=50_000, seed=0).summary
    b = run(simulated, alpha=0.5, horizon=50_000, seed=0).summary
    for key in ("regret", "final_points", "phases", "evaluations", "optimum_personalised"):
        assert a[key] == b[key], key
    assert a["evaluation"] == "deterministic" and b["evaluation"] == "simulated"
    assert b["mean_observed_reward"] is None  # simulated exploitation draws no reward


def test_a_run_configs_evaluation_reaches_a_built_in_problem() -> None:
    config = RunConfig(problem="garland", num_clients=3, horizon=20_000, evaluation="deterministic")
    exact = run_config(config).summary
    noiseless = run_config(config.replace(evaluation="simulated", noise="none")).summary
    for key in ("regret", "final_points", "evaluations"):
        assert exact[key] == noiseless[key], key
    assert exact["evaluation"] == "deterministic"
    parsed, _ = parse_run_config({"evaluation": "stochastic", "num-clients": 2})
    assert parsed.evaluation == "stochastic"


def test_stochastic_values_outside_the_value_range_are_an_objective_error() -> None:
    federation = Federation.from_callables([lambda x: x[:, 0] + 5.0], DOMAIN, evaluation="stochastic",
                                           value_range=(0.0, 1.0))
    with pytest.raises(ObjectiveError, match=r"allowed: finite values in \[0, 1\]"):
        run(federation, horizon=1_000)


def test_stochastic_bernstein_widths_come_from_the_real_values() -> None:
    federation = Federation.from_callables(recorders(noise=0.2), DOMAIN, evaluation="stochastic",
                                           value_range=(0.0, 1.0))
    summary = run(federation, alpha=0.5, horizon=5_000, seed=0, confidence="bernstein").summary
    assert summary["evaluations"] == len(CENTRES) * 5_000


@pytest.mark.parametrize(
    ("build", "line"),
    [
        (lambda: Federation.from_callables(recorders(), DOMAIN, evaluation="exact"),
         "evaluation='exact' is invalid; allowed: simulated, deterministic, stochastic"),
        (lambda: Federation.from_callables(recorders(), DOMAIN, evaluation=None),
         "evaluation=None is invalid; allowed: simulated, deterministic, stochastic"),
        (lambda: RunConfig(evaluation="real"), "evaluation='real' is invalid; allowed: simulated, deterministic, "
                                               "stochastic"),
        (lambda: parse_run_config({"evaluation": "noisy"}), "evaluation='noisy' is invalid; allowed: simulated, "
                                                            "deterministic, stochastic"),
        (lambda: objective_client_app(lambda p, i: p[:, 0], DOMAIN, evaluation="Stochastic"),
         "evaluation='Stochastic' is invalid; allowed: simulated, deterministic, stochastic"),
        (lambda: Federation.from_callables(recorders(), DOMAIN, evaluation="stochastic", reference=[abs]),
         "reference=[<built-in function abs>] is invalid; allowed: None or 3 callables, each client's mean "
         "reward f(x)"),
        (lambda: from_context("data.csv"),
         "make_objective='data.csv' is invalid; allowed: a callable make_objective(context) returning "
         "objective(points)"),
    ],
)
def test_bad_evaluation_values_are_one_line(build, line: str) -> None:
    with pytest.raises(ConfigError) as info:
        build()
    assert str(info.value) == line


def test_bad_evaluation_flag_is_one_line() -> None:
    assert cli_error_line("run", "--evaluation", "exact", "--json") == (
        "pfxab run: error: --evaluation='exact' is invalid; allowed: simulated, deterministic, stochastic")


# -- objectives built from the node's context ------------------------------------------------------------------


def site_objective(context: Context):
    """What a site writes: its target from its node config, a shift from the run config."""
    m = int(context.node_config["partition-id"])
    centre = CENTRES[m] + float(context.run_config.get("target-shift", 0.0))
    return lambda points: 1.0 - np.abs(points[:, 0] - centre)


def shifted_federation(shift: float, evaluation: str) -> Federation:
    objectives = [lambda x, c=c + shift: 1.0 - np.abs(x[:, 0] - c) for c in CENTRES]
    return Federation.from_callables(objectives, DOMAIN, evaluation=evaluation, reference=objectives)


@pytest.mark.parametrize("evaluation", ["deterministic", "stochastic"])
def test_a_context_built_objective_over_the_message_api_gives_the_inprocess_numbers(evaluation: str) -> None:
    shift = 0.1
    federation = shifted_federation(shift, evaluation)
    params = {"alpha": 0.5, "horizon": 4_000, "seed": 0}
    strategy = STRATEGIES["pf-xab"](num_clients=len(CENTRES), federation=federation, **params)
    app = objective_client_app(from_context(site_objective), DOMAIN, evaluation=evaluation, value_range=(-1.0, 1.0))
    grid = LoopbackGrid(len(CENTRES), app)
    for context in grid.contexts.values():
        context.run_config = {"target-shift": shift, "learning-rate": 0.01}
    run_loopback(strategy, grid)
    flower, inprocess = strategy.run_result().summary, run(federation, **params).summary
    for key in ("regret", "final_points", "phases", "evaluations", "mean_observed_reward_per_client"):
        assert flower[key] == inprocess[key], key
    # the shift was read: without it the sites end elsewhere
    assert inprocess["final_points"] != run(shifted_federation(0.0, evaluation), **params).summary["final_points"]


def test_the_run_configs_evaluation_key_reaches_objective_client_app() -> None:
    made = []

    @from_context
    def make(context: Context):
        made.append(context.node_id)
        return lambda points: 1.0 - np.abs(points[:, 0] - 0.5)

    session_fn = objective_sessions(make, DOMAIN)  # evaluation=None: the run config's key
    context = Context(run_id=1, node_id=7, node_config={"partition-id": 0}, state={}, run_config={"evaluation":
                                                                                                  "stochastic"})
    env = session_fn(context).make_environment(None)
    assert env.federation.evaluation == "stochastic"
    session_fn(context)
    assert made == [7]  # built once per node and run, not per message
    context.run_config = {"evaluation": "maybe"}
    with pytest.raises(ConfigError, match=r"^evaluation='maybe' is invalid; allowed: simulated, deterministic, "
                                          r"stochastic$"):
        session_fn(context)


def test_a_builder_that_returns_no_callable_is_one_line() -> None:
    session_fn = objective_sessions(from_context(lambda context: "model.pt"), DOMAIN)
    context = Context(run_id=1, node_id=1, node_config={"partition-id": 0}, state={}, run_config={})
    with pytest.raises(ConfigError) as info:
        session_fn(context)
    assert str(info.value) == ("make_objective(context) returned str; allowed: a callable objective(points) giving one "
                               "value per row of an (n, d) array")


@pytest.mark.exhaustive  # default tier: the same over the Message API's loop without Ray (above)
@pytest.mark.ray
@pytest.mark.timeout(120)
def test_a_context_built_objective_on_flowers_ray_simulation_gives_the_inprocess_numbers() -> None:
    from pfxab_flower.simulations.flower.in_process_simulation import run_flower

    federation = shifted_federation(0.0, "deterministic")  # run_simulation gives no run config: no shift
    config = RunConfig(num_clients=len(CENTRES), alpha=0.5, horizon=4_000, seed=0)
    sessions = objective_sessions(from_context(site_objective), DOMAIN, evaluation="deterministic")
    flower = run_flower(federation, config, session_fn=sessions, round_timeout=patient(60.0)).summary
    inprocess = run(federation, alpha=0.5, horizon=4_000, seed=0).summary
    for key in ("regret", "final_points", "phases", "evaluations", "evaluations_per_client",
                "mean_observed_reward_per_client"):
        assert flower[key] == inprocess[key], key
    assert flower["engine"] == "flower" and flower["evaluation"] == "deterministic"


def test_a_strategy_scoring_an_unscored_federation_reports_what_was_observed() -> None:
    federation = Federation.from_callables(recorders(noise=0.05), DOMAIN, evaluation="stochastic",
                                           value_range=(0.0, 1.0))
    strategy = STRATEGIES["pf-xab"](num_clients=len(CENTRES), federation=federation, horizon=2_000)
    app = objective_client_app(lambda points, m: 1.0 - np.abs(points[:, 0] - CENTRES[m]), DOMAIN,
                               evaluation="stochastic", value_range=(0.0, 1.0))
    result = run_loopback(strategy, LoopbackGrid(len(CENTRES), app))
    summary = strategy.run_result().summary
    (metrics,) = result.evaluate_metrics_serverapp.values()
    assert dict(metrics) == {"mean_observed_reward": summary["mean_observed_reward"], "evaluations": 6_000.0}
    assert summary["regret"] is None


def test_tampered_cost_data_is_not_reported() -> None:
    """Harness data is never judged: costs that are no finite number leave the summary's costs null."""
    from pfxab_flower.problems.sampling import SimulatedEnvironment, site_costs

    federation = Federation.from_callables(recorders(), DOMAIN, evaluation="deterministic")
    honest = [SimulatedEnvironment(federation, m, seconds=0.5, observed=2.0).export() for m in range(3)]
    assert site_costs(honest).seconds == [0.5] * 3
    for bad in (np.array([], dtype=np.int64), np.array([1, 2], dtype=np.int64),
                np.array([np.inf]).view(np.int64)):
        assert site_costs([*honest[:2], {**honest[2], "objective-seconds": bad}]) is None
    assert site_costs([*honest[:2], None]) is None


def test_the_bundled_apps_clients_build_the_run_configs_evaluation() -> None:
    from pfxab_flower.client_apps import federation_sessions

    context = Context(run_id=1, node_id=1, node_config={"partition-id": 1}, state={},
                      run_config={"evaluation": "stochastic", "num-clients": 3, "out-dir": "elsewhere"})
    env = federation_sessions()(context).make_environment(None)
    assert env.federation.evaluation == "stochastic" and env.federation.truth() is not None


def test_a_stochastic_phase_is_given_to_the_objective_batch_by_batch_never_all_rows_at_once() -> None:
    """A stochastic phase of 2e8 pulls built all 2e8 row indices before its first batch (1.6 GB; a hostile
    server's global-pulls made it 10**12, issue 37): the rows are made one batch at a time now, so ten
    batches take no more memory than one."""
    import tracemalloc

    from pfxab_flower.problems.sampling import MAX_BATCH, SimulatedEnvironment

    seen: list[int] = []

    def half(points: np.ndarray) -> np.ndarray:
        seen.append(len(points))
        return np.full(len(points), 0.5)

    env = SimulatedEnvironment(Federation.from_callables([half], {"x": (0.0, 1.0)}, evaluation="stochastic"), 0)

    def peak_of(counts: list[int]) -> int:
        tracemalloc.start()
        try:
            sums, squares = env.trials(np.array([2, 3][: len(counts)]), np.array(counts, dtype=np.int64))
            assert sums.tolist() == [0.5 * c for c in counts] and squares.tolist() == [0.25 * c for c in counts]
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    one = peak_of([MAX_BATCH])
    seen.clear()
    ten = peak_of([6 * MAX_BATCH + 5, 4 * MAX_BATCH])
    assert seen == [MAX_BATCH] * 10 + [5]  # the same batches as ever, in the same order
    assert ten < 1.3 * one  # all row indices at once added 9 more batches' worth of int64
