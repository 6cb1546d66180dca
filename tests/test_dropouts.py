"""Dropouts and stragglers: injected failures, the ``min-fraction`` quorum, clients catching up.

No Ray: the in-process engine and Flower's own ``Server`` loop over in-process proxies
(``tests/flower_loopback.py``) inject the same failures from ``(seed, client, phase)``
and must give the same numbers; a client that misses messages still pulls exactly ``T``.
"""

from __future__ import annotations

import numpy as np
import pytest

from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.phased import FIRST_ACTIVE_SET, ClientMachine, ServerMachine
from pfxab_flower.algorithms.registry import federated_names, options_of, policy_class
from pfxab_flower.arms.partition import children
from pfxab_flower.client_apps import federation_sessions
from pfxab_flower.errors import ConfigError, RunStoppedError
from pfxab_flower.faults import FaultPlan, InjectedFailureError, required_replies
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.sampling import SimulatedEnvironment
from pfxab_flower.running import engine
from pfxab_flower.schema.run_config import AppOptions, RunConfig, parse_run_config
from pfxab_flower.simulations.flower.app_builders import strategy_of
from tests.flower_loopback import run_loopback

SAME_KEYS = (
    "algorithm", "problem", "regret", "regret_per_client", "final_nodes", "final_points", "phases",
    "communication_rounds", "values_down", "values_up", "rejected_replies", "failures",
)


def test_fault_plan_is_a_function_of_seed_client_and_phase() -> None:
    plan = FaultPlan(seed=4, rate=0.4)
    draws = [[plan.misses(m, p) for p in range(1, 30)] for m in range(6)]
    assert draws == [[FaultPlan(seed=4, rate=0.4).misses(m, p) for p in range(1, 30)] for m in range(6)]
    share = np.mean(draws)
    assert 0.2 < share < 0.6  # about the rate
    assert draws != [[FaultPlan(seed=5, rate=0.4).misses(m, p) for p in range(1, 30)] for m in range(6)]
    only = FaultPlan(seed=4, rate=1.0, clients=(2,))
    assert [only.misses(m, 1) for m in range(4)] == [False, False, True, False]
    assert not any(FaultPlan(seed=4, rate=0.0).misses(m, p) for m in range(5) for p in range(1, 9))
    with pytest.raises(InjectedFailureError, match="client 2: injected failure in phase 3"):
        only.check(2, 3)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"fail-rate": 1.5}, "fail-rate=1.5 is invalid"),
        ({"fail-rate": "often"}, "fail-rate='often' is invalid"),
        ({"fail-clients": "1,1"}, "fail-clients='1,1' is invalid"),
        ({"fail-clients": "0,10"}, "fail-clients='0,10' is invalid"),
        ({"fail-clients": "a"}, "fail-clients='a' is invalid"),
        ({"min-fraction": 1.2}, "min-fraction=1.2 is invalid"),
        ({"min-fraction": True}, "min-fraction=True is invalid"),
    ],
)
def test_bad_dropout_keys_are_one_line_errors(values: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_run_config({"num-clients": 10, **values})


def test_dropout_keys_parse() -> None:
    _, options = parse_run_config({"num-clients": 5, "fail-rate": "0.25", "fail-clients": "4, 0", "min-fraction": 0.6})
    assert (options.fail_rate, options.fail_clients, options.min_fraction) == (0.25, (4, 0), 0.6)
    assert options.faults(7) == FaultPlan(seed=7, rate=0.25, clients=(4, 0))
    assert [required_replies(f, 10) for f in (0.0, 0.5, 0.51, 1.0)] == [0, 5, 6, 10]


def few_phases(algorithm: str) -> dict[str, int]:
    """pf-sh with 8 candidates (3 rounds): its default runs ~10 phases, and a 30% failure rate per client and phase
    then loses the quorum in one of them; a proposal policy with 18 evaluations a site (pf-smbo: 6 phases,
    optuna-tpe-fed: 3): their plans have 25 to 200 phases here, and the failure draws lose the quorum in phase 7 of
    the first test (4 of 6 clients fail) and phase 10 of the second (all 5 fail), which stops the run on every
    engine alike; every other algorithm as it is."""
    if "candidates" in options_of(algorithm):
        return {"candidates": 8}
    return {"max_evaluations": 18} if policy_class(algorithm).proposes else {}


@pytest.mark.parametrize("algorithm", federated_names())  # the baselines run no phase
def test_injected_failures_are_counted_and_every_client_still_pulls_the_horizon(algorithm: str) -> None:
    config = RunConfig(problem="doublesine", algorithm=algorithm, num_clients=6, alpha=0.6, horizon=60_000, seed=2)
    federation = build_federation(config)
    plan = FaultPlan(seed=2, rate=0.3)
    settings = engine.make_settings(6, algorithm=algorithm, alpha=0.6, horizon=60_000, seed=2,
                                    dimensions=federation.domain.ndim, **few_phases(algorithm))
    sim = engine.simulate(federation, make_policy(algorithm), settings, faults=plan)
    history = sim.server.history
    assert len(history) >= 3
    for row in history:
        missing = sum(plan.misses(m, row["phase"]) for m in range(6))
        assert row["failed_local_means"] == row["failed_active_sets"] == missing
    assert sim.server.failures == sum(2 * r["failed_local_means"] for r in history) > 0
    for env in sim.envs:  # every client pulls exactly T, dropouts included
        assert int(env.log.counts.sum()) == 60_000
    assert [c.state.pulls for c in sim.clients] == [60_000] * 6


@pytest.mark.parametrize("algorithm", federated_names())  # the baselines run no phase
def test_flower_and_inprocess_inject_the_same_failures(algorithm: str) -> None:
    config = RunConfig(problem="garland", algorithm=algorithm, num_clients=5, alpha=0.5, horizon=40_000, seed=3,
                       **few_phases(algorithm))
    federation = build_federation(config)
    plan = FaultPlan(seed=3, rate=0.35)
    strategy = strategy_of(config, AppOptions(api="legacy", min_fraction=0.4), federation)
    run_loopback(strategy, federation_sessions(federation, plan), config.num_clients)
    flower = strategy.run_result()
    inprocess = engine.run(federation, algorithm=algorithm, alpha=0.5, horizon=40_000, seed=3, faults=plan,
                           min_fraction=0.4, **few_phases(algorithm))
    for key in SAME_KEYS:
        assert flower.summary[key] == inprocess.summary[key], key
    assert flower.summary["failures"] > 0
    assert flower.phases.equals(inprocess.phases)
    assert {"failed_local_means", "failed_active_sets"} <= set(flower.phases.columns)


def test_too_few_replies_stop_the_run_with_a_clear_message() -> None:
    config = RunConfig(problem="garland", num_clients=4, horizon=40_000, seed=0)
    federation = build_federation(config)
    plan = FaultPlan(seed=0, rate=1.0, clients=(0, 1, 3))  # 1 of 4 answers; min-fraction 0.5 needs 2
    with pytest.raises(RunStoppedError, match=r"phase 1: only 1 of 4 clients sent a usable local-means reply, "
                                              r"fewer than min-fraction=0.5 requires \(2\); run stopped"):
        engine.run(federation, horizon=40_000, faults=plan)
    strategy = strategy_of(config, AppOptions(api="legacy"), federation)
    run_loopback(strategy, federation_sessions(federation, plan), config.num_clients)
    assert not strategy.driver.finished
    assert strategy.stop_reason is not None and "only 1 of 4 clients" in strategy.stop_reason
    assert strategy.driver.machine.done and strategy.driver.machine.completed == 0
    # with a lower quorum the same failures are survived
    result = engine.run(federation, horizon=40_000, faults=plan, min_fraction=0.25)
    assert result.summary["failures"] == 2 * 3 * result.summary["phases"]


def machines(num_clients: int = 3, horizon: int = 30_000):
    config = RunConfig(problem="garland", num_clients=num_clients, horizon=horizon, seed=1)
    federation = build_federation(config)
    settings = engine.make_settings(num_clients, alpha=0.5, horizon=horizon, seed=1)
    policy = make_policy("pf-xab")
    server = ServerMachine(policy, settings)
    clients = [ClientMachine(policy, settings, m) for m in range(num_clients)]
    envs = [SimulatedEnvironment(federation, m) for m in range(num_clients)]
    return server, clients, envs


def run_to_end(server, clients, envs, skip) -> None:
    """Drive the machines; ``skip(stage, phase, client)`` drops one message (a late or lost reply)."""
    while True:
        instruction = server.next_instruction()
        if not hasattr(instruction, "phase"):
            server.finish([c.finish(instruction, e) for c, e in zip(clients, envs, strict=True)])
            return
        p = instruction.phase
        reports = [c.explore(instruction, e) for c, e in zip(clients, envs, strict=True)
                   if not skip("explore", p, c.client)]
        update = server.aggregate(reports)
        sets = [c.eliminate(update, e) for c, e in zip(clients, envs, strict=True)
                if not skip("eliminate", p, c.client)]
        server.collect(sets)


def test_a_client_that_missed_only_the_elimination_catches_up_with_the_servers_superset() -> None:
    server, clients, envs = machines()
    run_to_end(server, clients, envs, lambda stage, p, m: stage == "eliminate" and p == 1 and m == 0)
    assert server.history[0]["failed_active_sets"] == 1 and server.history[0]["failed_local_means"] == 0
    assert server.completed >= 3
    for env in envs:
        assert int(env.log.counts.sum()) == 30_000  # its phase-1 exploration counts, the rest is made up
    assert len(server.final_nodes) == 3


def test_a_client_that_missed_only_the_exploration_exploits_then_rejoins() -> None:
    server, clients, envs = machines()
    # phase 2: client 1 never got the instruction but gets the global update
    run_to_end(server, clients, envs, lambda stage, p, m: stage == "explore" and p == 2 and m == 1)
    assert server.history[1]["failed_local_means"] == 1 and server.history[1]["failed_active_sets"] == 0
    assert clients[1].state.completed == server.completed
    for env in envs:
        assert int(env.log.counts.sum()) == 30_000


def test_catch_up_keeps_the_client_and_server_sets_equal() -> None:
    server, clients, envs = machines()
    instruction = server.next_instruction()
    update = server.aggregate([c.explore(instruction, e) for c, e in zip(clients[1:], envs[1:], strict=True)])
    server.collect([c.eliminate(update, e) for c, e in zip(clients[1:], envs[1:], strict=True)])
    np.testing.assert_array_equal(server.client_sets[0], children(FIRST_ACTIVE_SET))
    clients[0].explore(server.next_instruction(), envs[0])  # phase 2: client 0 catches up first
    np.testing.assert_array_equal(clients[0].state.active, server.client_sets[0])
    assert clients[0].state.completed == 1 and clients[0].state.pulls == 0
    with pytest.raises(Exception, match="completed phase 1"):
        clients[0].catch_up(1)
