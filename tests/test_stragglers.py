"""Stragglers: a client that answers after the round timeout is a failed client, and the run goes on.

``straggle-seconds`` turns the clients the fault plan (``fail-rate``, ``fail-clients``)
selects from failing at once into answering that late. Without Ray (the default tier), Flower's
own loops over in-process clients (tests/flower_loopback.py, tests/message_loopback.py) run the
strategies and client apps with a straggler whose reply comes after the round timeout: it is a
failure, the run goes on, and it is exactly the in-process run of the same fault plan with
failures instead of stragglers. The Ray test (slow tier) runs a real Flower simulation in which
one client's replies of phase 1 arrive after ``round-timeout`` by the clock: Flower stops
waiting, the strategy averages the other two, the late replies (which arrive while later rounds
are under way) are never mixed into them, and the straggler catches up in phase 2.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from flwr.app import RecordDict
from flwr.server.superlink.linkstate.in_memory_linkstate import InMemoryLinkState

from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.phased import ServerMachine
from pfxab_flower.client_apps import federation_sessions, message_client_app
from pfxab_flower.client_apps.store import STATE_KEY, FlowerStore
from pfxab_flower.errors import ConfigError, RunStoppedError
from pfxab_flower.faults import FaultPlan, InjectedFailureError
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.sampling import SimulatedEnvironment
from pfxab_flower.running import engine
from pfxab_flower.running.client_session import ClientSession, LateReplyError
from pfxab_flower.schema.run_config import AppOptions, RunConfig, parse_run_config, to_run_config
from pfxab_flower.simulations.flower.app_builders import strategy_of
from pfxab_flower.simulations.flower.in_process_simulation import run_flower_simulation
from tests import flower_loopback, message_loopback
from tests.patience import patient

SAME_KEYS = (
    "algorithm", "problem", "regret", "regret_per_client", "final_nodes", "final_points", "phases",
    "communication_rounds", "values_down", "values_up", "rejected_replies", "failures",
)


@pytest.mark.parametrize("value", [-1, "slow", math.nan, math.inf, True])
def test_bad_straggle_seconds_is_a_one_line_error(value: object) -> None:
    with pytest.raises(ConfigError, match=r"straggle-seconds=.* is invalid; allowed: a number of seconds >= 0"):
        parse_run_config({"num-clients": 3, "straggle-seconds": value})


def test_straggle_seconds_round_trips_and_builds_the_plan() -> None:
    config, options = parse_run_config({"num-clients": 3, "fail-rate": 1, "fail-clients": "1", "straggle-seconds": "7",
                                        "round-timeout": 5})
    assert options.straggle_seconds == 7.0
    assert parse_run_config(to_run_config(config, options)) == (config, options)
    assert options.faults(2) == FaultPlan(seed=2, rate=1.0, clients=(1,), straggle_seconds=7.0, round_timeout=5.0)


def test_a_straggler_misses_a_phase_only_if_later_than_the_round_timeout() -> None:
    draws = FaultPlan(seed=3, rate=0.5)
    selected = [(m, p) for m in range(4) for p in range(1, 9) if draws.selects(m, p)]
    assert 0 < len(selected) < 32
    late = FaultPlan(seed=3, rate=0.5, straggle_seconds=5.0, round_timeout=5.0)
    slow = FaultPlan(seed=3, rate=0.5, straggle_seconds=4.9, round_timeout=5.0)
    for m in range(4):
        for p in range(1, 9):
            assert draws.misses(m, p) == late.misses(m, p) == ((m, p) in selected)
            assert not slow.misses(m, p)
            late.check(m, p)  # a straggler never fails at once
            slept: list[float] = []
            assert late.straggle(m, p, slept.append) == ((m, p) in selected)
            assert slept == ([5.0] if (m, p) in selected else [])
            assert not slow.straggle(m, p, lambda _: None)
    m, p = selected[0]
    with pytest.raises(InjectedFailureError):
        draws.check(m, p)


@pytest.mark.parametrize("round_timeout", [0.01, 60.0])
def test_a_late_straggler_waits_then_keeps_none_of_its_work(round_timeout: float) -> None:
    config = RunConfig(problem="garland", num_clients=3, horizon=3000, seed=0)
    federation = build_federation(config)
    settings = engine.make_settings(3, alpha=0.5, horizon=3000, seed=0, min_fraction=0.0)
    plan = FaultPlan(seed=0, rate=1.0, clients=(1,), straggle_seconds=0.01, round_timeout=round_timeout)
    state = RecordDict()
    server = ServerMachine(make_policy("pf-xab"), settings)

    def session() -> ClientSession:  # Flower builds a new client per message, from context.state
        return ClientSession(1, FlowerStore(state), lambda saved: SimulatedEnvironment.restored(federation, 1, saved),
                             plan)

    started = time.monotonic()
    instruction = server.next_instruction()
    if plan.late:
        with pytest.raises(LateReplyError, match="after the round timeout"):
            session().handle(instruction)
        assert STATE_KEY not in state  # a late reply leaves the client where the server thinks it is
    else:
        report = session().handle(instruction).report
        assert report.client == 1 and int(report.counts.sum()) > 0
        update = server.aggregate([report])
        assert session().handle(update).report.client == 1
        assert STATE_KEY in state
    assert time.monotonic() - started >= 0.01  # it waited before replying
    assert plan.late == (round_timeout == 0.01)


@pytest.mark.parametrize("api", ["message", "legacy"])
def test_a_straggler_later_than_the_round_timeout_is_a_failure_through_flowers_loops_without_ray(api: str) -> None:
    """Client 1 straggles in phase 1 (its reply is later than the round timeout: it says so and keeps none of its
    work), through Flower's own server loop and the real client apps: two failures, the run goes on, and it is
    the in-process run of the plan whose client fails at once. The clock's part (Flower giving up on a reply that
    has not come) is the Ray test's below."""
    config = RunConfig(problem="garland", algorithm="pf-xab", num_clients=3, alpha=0.5, horizon=3000, seed=3)
    options = AppOptions(round_timeout=0.01, fail_rate=0.5, fail_clients=(1,), straggle_seconds=0.01, api=api)
    plan = options.faults(config.seed)
    assert plan.late and [plan.selects(1, p) for p in (1, 2)] == [True, False]  # client 1 is late in phase 1 only
    federation = build_federation(config)
    strategy = strategy_of(config, options, federation)
    sessions = federation_sessions(federation, plan)
    if api == "legacy":
        flower_loopback.run_loopback(strategy, sessions, config.num_clients)
    else:
        message_loopback.run_loopback(strategy, message_loopback.LoopbackGrid(config.num_clients,
                                                                              message_client_app(sessions)))
    flower = strategy.run_result()
    assert flower.summary["phases"] == 2
    assert flower.phases[["failed_local_means", "failed_active_sets"]].values.tolist() == [[1, 1], [0, 0]]
    assert flower.summary["failures"] == 2 and flower.summary["rejected_replies"] == 0
    assert flower.summary["pulls_scored"] == [config.horizon] * 3  # every client pulls exactly T
    failing = engine.run(federation, algorithm=config.algorithm, alpha=config.alpha, horizon=config.horizon,
                         seed=config.seed, faults=FaultPlan(seed=config.seed, rate=0.5, clients=(1,)),
                         describe=engine.describe_problem(config))
    for key in SAME_KEYS:
        assert flower.summary[key] == failing.summary[key], key
    assert flower.phases.equals(failing.phases)
    assert not np.array_equal(engine.run_config(config).phases.values, flower.phases.values)  # it changed the run


@pytest.mark.exhaustive  # default tier: the same straggler through Flower's loops without Ray (above)
@pytest.mark.ray
@pytest.mark.timeout(300)  # one run about 55 s; a second, after a first that stopped in round 1, about 120 s
@pytest.mark.parametrize("api", ["message", "legacy"])
def test_a_straggler_later_than_the_round_timeout_is_a_failure_and_the_run_goes_on(
    shared_ray, monkeypatch: pytest.MonkeyPatch, api: str
) -> None:
    config = RunConfig(problem="garland", algorithm="pf-xab", num_clients=3, alpha=0.5, horizon=3000, seed=3)
    stored: list[bool] = []  # every reply that reached Flower's LinkState (in this process), and if it was kept
    real_store = InMemoryLinkState.store_message_res
    monkeypatch.setattr(InMemoryLinkState, "store_message_res",
                        lambda state, message: stored.append(real_store(state, message) is not None) or stored[-1])
    # round 1 includes the Ray actors' start (5-10 s on an idle 2-core machine; about 40 s beside two busy loops,
    # where the load rose after the timeout was read), which the timeout must leave room for: 20 s stretched by the
    # load, and if not even the on-time clients replied in round 1 (the actors had not started), twice that. The
    # test waits out two round timeouts (2 x 20 s stretched 2-3 times by the slow tier's own load: the ray group's
    # longest test), so the first timeout is not longer than the actors' start needs on a quiet machine
    timeout = patient(20.0)
    for attempt in range(2):
        options = AppOptions(round_timeout=timeout, fail_rate=0.5, fail_clients=(1,), straggle_seconds=timeout + 1.0,
                             api=api)
        plan = options.faults(config.seed)
        assert [plan.selects(1, p) for p in (1, 2)] == [True, False]  # client 1 is late in phase 1 only
        stored.clear()
        started = time.monotonic()
        try:
            flower = run_flower_simulation(config, options=options)
            break
        except RunStoppedError as stopped:
            if attempt == 1 or not str(stopped).startswith("phase 1: none of the 3 clients replied"):
                raise
            timeout *= 2
    wall = time.monotonic() - started

    assert wall >= 2 * timeout  # both exchanges of phase 1 waited for the straggler until the timeout
    assert flower.summary["phases"] == 2
    assert flower.phases[["failed_local_means", "failed_active_sets"]].values.tolist() == [[1, 1], [0, 0]]
    assert flower.summary["failures"] == 2
    assert flower.summary["rejected_replies"] == 0  # no late reply was mixed into a later round
    on_time = 2 * (2 + 3) + 3  # phase 1: two clients twice; phase 2: three twice; the final exchange
    assert len(stored) > on_time  # the straggler's replies (errors: it keeps none of its late work) reached Flower,
    # late, and were never mixed into another round: no rejected reply, exactly the two failures of phase 1
    assert flower.summary["pulls_scored"] == [config.horizon] * 3  # every client pulls exactly T
    failing = FaultPlan(seed=config.seed, rate=0.5, clients=(1,))  # the same draws, failing at once
    for plan_ in (plan, failing):
        inprocess = engine.run(build_federation(config), algorithm=config.algorithm, alpha=config.alpha,
                               horizon=config.horizon, seed=config.seed, faults=plan_,
                               describe=engine.describe_problem(config))
        for key in SAME_KEYS:
            assert flower.summary[key] == inprocess.summary[key], key
        assert flower.phases.equals(inprocess.phases)
    no_faults = engine.run_config(config)
    assert not np.array_equal(no_faults.phases.values, flower.phases.values)  # the straggler did change the run


def test_a_late_reply_leaves_the_client_app_raising_so_flower_writes_none_of_its_state_back() -> None:
    """Flower's simulation engine writes a ClientApp's context back whenever the app returns (``vce_api.worker``),
    and a node's next message may run on another Ray actor while a straggler's late one still sleeps: had the late
    message returned an error reply, its stale state would overwrite what the newer message saved (seen as a lost
    client history under load). It raises instead, so Flower keeps nothing of it; any other failure of a site is
    still Flower's error reply with its one line, and no traceback."""
    from flwr.app import Context, Message, RecordDict

    from pfxab_flower.client_apps.failure_replies import reply_with_failure
    from pfxab_flower.errors import ClientFailedError
    from tests.message_loopback import as_a_serverapp_process

    def failing(cause: Exception):
        def call_next(message: Message, context: Context) -> Message:
            raise ClientFailedError(f"client 1: {cause}") from cause
        return call_next

    as_a_serverapp_process()
    message = Message(RecordDict(), dst_node_id=1, message_type="train")
    context = Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})
    with pytest.raises(ClientFailedError, match="round timeout"):
        reply_with_failure(message, context, failing(LateReplyError("reply to phase 1 came after the round timeout")))
    reply = reply_with_failure(message, context, failing(InjectedFailureError("client 1 fails in phase 1")))
    assert reply.has_error() and reply.error.reason == "client 1: client 1 fails in phase 1"
