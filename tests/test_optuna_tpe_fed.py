"""``optuna-tpe-fed``: the federated personalised TPE baseline on the proposal skeleton (the ``[optuna]`` extra).

Every client's study proposes one point a phase, every client pulls every proposal, and a study is told the
personalised estimates; the studies are rebuilt from the history each phase with a seeded sampler, so a run is
the same twice (and on every engine: the suites that run every registered algorithm). Without optuna the run is
refused in one line before any work.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from pfxab_flower import run
from pfxab_flower.algorithms.baselines.optuna_tpe_fed import MAX_PHASES, OptunaTPEFed, tpe_plan
from pfxab_flower.algorithms.surrogate.proposals import History
from pfxab_flower.errors import ConfigError
from pfxab_flower.problems import synthetic_federation
from pfxab_flower.running import engine

pytest.importorskip("optuna")


@pytest.mark.parametrize(("horizon", "clients", "phases", "pulls"), [
    (200, 10, 20, 1), (50, 5, 10, 1), (1000, 5, 200, 1), (30_000, 4, MAX_PHASES, 37), (7, 10, 1, 1)])
def test_the_plan_is_every_budget_in_phases_of_one_proposal_per_client(horizon, clients, phases, pulls) -> None:
    plan = tpe_plan(horizon, clients, 48)
    assert len(plan) == phases and {r.precision for r in plan} == {pulls}
    assert {r.points for r in plan} == {min(clients, horizon)}


def test_every_client_pulls_every_proposal_and_its_study_is_told_the_personalised_estimates() -> None:
    federation = synthetic_federation("garland", 3)
    settings = engine.make_settings(3, algorithm="optuna-tpe-fed", alpha=0.3, horizon=60, seed=5, dimensions=1)
    sim = engine.simulate(federation, OptunaTPEFed(), settings, keep_messages=True)
    assert len(sim.server.history) == 20
    assert (sim.server.history[0]["global_pulls"], sim.server.history[0]["local_pulls"]) == (1, 0)
    for phase in range(1, 20):
        proposals = sim.messages[2 * phase - 1][1]
        assert [r.node_ids.size for r in proposals] == [2, 2, 2]  # its point, then a spare (ceil(3 / 2) in all)
        union = sim.messages[2 * phase][0].node_ids  # with every reply there: every client's point, no spare
        assert np.array_equal(union, np.sort([r.node_ids[0] for r in proposals]))
        reports = sim.messages[2 * phase][1]
        assert all(np.array_equal(r.counts, np.ones(3, dtype=np.int64)) for r in reports)
    for m, store in enumerate(sim.stores):
        history = History.of(store.state.memory)
        assert history.points.size == 60 and np.unique(history.points).size == 60
        assert store.state.choice == history.points[np.argmax(history.estimates)]  # its best observed estimate
        assert int(sim.envs[m].log.counts.sum()) == 60


def test_a_run_is_the_same_twice() -> None:
    federation = synthetic_federation("doublesine", 3)
    first = run(federation, "optuna-tpe-fed", alpha=0.5, horizon=90, seed=1)
    second = run(federation, "optuna-tpe-fed", alpha=0.5, horizon=90, seed=1)
    assert first.summary["regret"] == second.summary["regret"]
    assert first.summary["final_nodes"] == second.summary["final_nodes"]


def test_without_optuna_the_run_is_refused_in_one_line(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna raises ImportError
    refusal = r'^algorithm=optuna-tpe-fed needs optuna; allowed: pip install -e "\.\[optuna\]"'
    with pytest.raises(ConfigError, match=refusal):
        run(synthetic_federation("garland", 2), "optuna-tpe-fed", horizon=100)
