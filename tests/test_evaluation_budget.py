"""max_evaluations: a run limited by the distinct points each client evaluates, besides its horizon."""

from __future__ import annotations

import numpy as np
import pytest

from pfxab_flower import ConfigError, Federation, RunConfig, run
from pfxab_flower.schema.spec import AlgorithmSpec
from tests.conftest import cli_error_line


class Counted:
    """A deterministic objective that records the distinct points and the rows it is given."""

    def __init__(self, centre: float):
        self.centre, self.rows, self.points = centre, 0, set()

    def __call__(self, points):
        self.rows += len(points)
        self.points.update(map(float, points[:, 0]))
        return 1.0 - np.abs(points[:, 0] - self.centre)


def sites():
    objectives = [Counted(c) for c in (0.2, 0.5, 0.7)]
    return objectives, Federation.from_callables(objectives, {"x": (0.0, 1.0)}, evaluation="deterministic")


@pytest.mark.parametrize("algorithm", ["pf-xab", "fed-pne", "pf-pne", "local-only", "random-search"])
@pytest.mark.parametrize("budget", [3, 20, 45])
def test_no_client_evaluates_more_points_than_its_budget(algorithm, budget):
    objectives, federation = sites()
    result = run(federation, algorithm=algorithm, horizon=200_000, alpha=0.5, seed=0, max_evaluations=budget)
    assert all(len(o.points) <= budget for o in objectives)
    assert [o.rows for o in objectives] == result.summary["evaluations_per_client"]  # deterministic: once each
    assert result.summary["max_evaluations"] == budget


def test_the_budget_ends_exploration_at_the_last_phase_that_fits_it():
    _, federation = sites()
    free = run(federation, horizon=200_000, alpha=0.5, seed=0)
    assert free.summary["evaluations_per_client"] == [30, 30, 30]  # 2 + 4 + 8 + 16 nodes, each client all of them
    _, federation = sites()
    limited = run(federation, horizon=200_000, alpha=0.5, seed=0, max_evaluations=29)
    assert limited.phases["active_nodes"].tolist() == [2, 4, 8]
    assert limited.summary["evaluations_per_client"] == [14, 14, 14]
    assert limited.summary["pulls_scored"] == [200_000] * 3  # the rest of the horizon exploits
    assert "max_evaluations" not in free.summary


def test_a_budget_the_run_never_reaches_changes_nothing():
    _, federation = sites()
    free = run(federation, horizon=200_000, alpha=0.5, seed=0)
    _, federation = sites()
    roomy = run(federation, horizon=200_000, alpha=0.5, seed=0, max_evaluations=10_000)
    assert roomy.summary["final_points"] == free.summary["final_points"]
    assert roomy.phases.drop(columns="time").equals(free.phases.drop(columns="time"))  # "time": wall seconds


def test_the_budget_travels_on_the_wire_only_when_set():
    spec = AlgorithmSpec.build("pf-xab", num_clients=3, horizon=1000)
    assert "param-max-evaluations" not in spec.to_wire()
    limited = spec.replace(max_evaluations=7)
    assert limited.to_wire()["param-max-evaluations"] == 7
    assert AlgorithmSpec.from_wire(limited.to_wire()) == limited
    assert AlgorithmSpec.from_wire(spec.to_wire()) == spec


def test_a_stochastic_objective_cannot_keep_a_budget_below_its_horizon():
    federation = Federation.from_callables([lambda p: p[:, 0]], {"x": (0.0, 1.0)}, evaluation="stochastic",
                                           value_range=(0.0, 1.0))
    with pytest.raises(ConfigError, match=r"^max_evaluations=10 is invalid; allowed: at least horizon=1000 "):
        run(federation, horizon=1000, max_evaluations=10)
    with pytest.raises(ConfigError, match=r"^max_evaluations=5 is invalid"):
        RunConfig(evaluation="stochastic", max_evaluations=5)


@pytest.mark.parametrize("value", [0, -3, 1.5, "ten", True])
def test_a_bad_budget_is_one_line(value):
    _, federation = sites()
    with pytest.raises(ConfigError, match=r"^max_evaluations=.* is invalid; allowed: an integer >= 1"):
        run(federation, horizon=1000, max_evaluations=value)


def test_the_command_line_flag():
    line = cli_error_line("run", "--max-evaluations", "0")
    assert line.startswith("pfxab run: error: --max-evaluations=0 is invalid")
