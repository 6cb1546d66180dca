"""Issue 47 (the fourth attack), class 4: the final exchange has a quorum, like every exchange.

Before: a ``--engine flower`` run whose three clients all failed the final exchange reported ``"regret":
0.0``, every final point ``null``, exit 0 (nothing checked that a quorum delivered the final exchange).
Now the final exchange needs ``ceil(min-fraction * M)`` usable final replies, and at least one whatever
``min-fraction``; else the run stops with one line and writes nothing. A client lost above the quorum is
scored on the pulls it reported, and the summary says how many pulls of the horizon went unscored.
Proved on both Flower APIs over the Ray-free loopbacks (the driver is shared by every engine).
"""

from __future__ import annotations

import numpy as np
import pytest

from pfxab_flower.algorithms.messages import FinishInstruction
from pfxab_flower.client_apps import federation_sessions, message_client_app
from pfxab_flower.errors import RunStoppedError
from pfxab_flower.problems import build_federation
from pfxab_flower.running import engine
from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.simulations.cli.commands.run import format_report
from pfxab_flower.simulations.flower.app_builders import strategy_of
from pfxab_flower.strategies import PFXAB
from tests.flower_loopback import run_loopback as run_legacy_loopback
from tests.message_loopback import LoopbackGrid, run_loopback

CONFIG = RunConfig(problem="garland", num_clients=3, horizon=20_000, seed=4)


def failing_finals(federation, clients: set[int]):
    """Sessions of ``federation`` whose ``clients`` raise on the final message (an objective that breaks there)."""
    sessions = federation_sessions(federation)

    class Breaks:
        def __init__(self, session):
            self.session = session

        def __getattr__(self, name):
            return getattr(self.session, name)

        def handle(self, message):
            if isinstance(message, FinishInstruction) and self.session.client in clients:
                raise OSError("disk full while exploiting")
            return self.session.handle(message)

    return lambda context: Breaks(sessions(context))


def message_run(failing: set[int], min_fraction: float = 0.5):
    federation = build_federation(CONFIG)
    strategy = PFXAB(num_clients=3, horizon=CONFIG.horizon, seed=CONFIG.seed, federation=federation,
                     min_fraction=min_fraction)
    grid = LoopbackGrid(3, message_client_app(failing_finals(federation, failing)), seed=2)
    return strategy, lambda: run_loopback(strategy, grid)


@pytest.mark.parametrize("min_fraction", [0.5, 0.0])
def test_a_run_whose_clients_all_fail_the_final_exchange_stops_with_one_line(min_fraction):
    strategy, run = message_run({0, 1, 2}, min_fraction)
    with pytest.raises(RunStoppedError) as info:
        run()
    text = str(info.value)
    assert "\n" not in text and "run stopped" in text and "disk full while exploiting" in text
    final = strategy.driver.machine.completed + 1
    if min_fraction:
        assert text.startswith(f"phase {final}: only 0 of 3 clients sent a usable final reply, fewer than "
                               "min-fraction=0.5 requires (2); run stopped")
    else:
        assert text.startswith(f"phase {final}: no client sent a usable final reply (a run without a final point "
                               "has no result, whatever min-fraction); run stopped")
    with pytest.raises(RunStoppedError):
        strategy.run_result()  # nothing to write, nothing to score


@pytest.mark.parametrize(("failing", "min_fraction", "usable", "needed"), [({0, 2}, 0.5, 1, 2), ({1}, 1.0, 2, 3)])
def test_too_few_final_replies_for_the_quorum_stop_the_run(failing, min_fraction, usable, needed):
    _, run = message_run(failing, min_fraction)
    with pytest.raises(RunStoppedError, match=rf"only {usable} of 3 clients sent a usable final reply, fewer than "
                                              rf"min-fraction={min_fraction:g} requires \({needed}\)"):
        run()


def test_the_legacy_api_stops_the_same_way():
    federation = build_federation(CONFIG)
    strategy = strategy_of(CONFIG, AppOptions(api="legacy"), federation)
    run_legacy_loopback(strategy, failing_finals(federation, {0, 1, 2}), 3)
    assert strategy.stop_reason is not None and "only 0 of 3 clients sent a usable final reply" in strategy.stop_reason
    with pytest.raises(RunStoppedError):
        strategy.run_result()


def test_a_client_lost_above_the_quorum_is_scored_on_what_it_reported_and_the_summary_says_what_is_missing():
    strategy, run = message_run({1})
    run()
    summary = strategy.run_result().summary
    assert [record["client"] for record in summary["lost_clients"]] == [1]
    assert summary["final_points"][1] is None and summary["final_points"][0] is not None
    reported = summary["pulls_scored"][1]
    assert reported < CONFIG.horizon and summary["pulls_unscored"] == CONFIG.horizon - reported
    assert "1 client lost: the regret covers" in format_report(summary)
    complete = engine.run_config(CONFIG).summary
    assert complete["pulls_unscored"] == 0 and "lost" not in format_report(complete)
    assert np.isfinite(summary["regret"])
