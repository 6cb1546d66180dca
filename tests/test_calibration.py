"""calibrate(): what it evaluates, what it measures, what it predicts; and the warning of runs that cannot eliminate."""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
from pathlib import Path

import numpy as np
import pytest

from pfxab_flower import ConfigError, Federation, calibrate, run
from pfxab_flower.calibration import POINTS_PER_CELL
from pfxab_flower.resolution import first_eliminating_depth, uniform_exploration_warning, uniform_plan
from pfxab_flower.simulations.cli import main
from pfxab_flower.spec import AlgorithmSpec
from tests.conftest import cli_error_line


def _example():
    """docs/examples/three_knobs.py, the 3-D example of docs/flower.md, as a module."""
    path = Path(__file__).resolve().parents[1] / "docs" / "examples" / "three_knobs.py"
    spec = importlib.util.spec_from_file_location("three_knobs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


three_knobs = _example()


class Counted:
    """An objective that records every row it is given."""

    def __init__(self, fn):
        self.fn, self.rows = fn, 0

    def __call__(self, points):
        self.rows += len(points)
        return self.fn(points)


def vee(points, centre=0.3, scale=1.0):
    """1-D, Lipschitz 1 (times ``scale``): the variation in a cell of width w near the optimum is about w."""
    return scale * (1.0 - np.abs(points[:, 0] - centre))


def federation_of(fns, **keywords) -> Federation:
    return Federation.from_callables(fns, {"x": (0.0, 1.0)}, **keywords)


def test_each_site_is_given_exactly_its_samples_and_nothing_else():
    counted = [Counted(functools.partial(vee, centre=c)) for c in (0.2, 0.5, 0.8)]
    calibration = calibrate(federation_of(counted), samples=200)
    assert [c.rows for c in counted] == [200, 200, 200]
    assert calibration.evaluations == [200, 200, 200]


def test_a_stochastic_objective_also_repeats_an_eighth_of_the_samples_and_measures_its_noise():
    rng = np.random.default_rng(1)
    counted = [Counted(lambda p: vee(p) + rng.uniform(-0.05, 0.05, len(p))) for _ in range(2)]
    calibration = calibrate(federation_of(counted, evaluation="stochastic", value_range=(-1.0, 2.0)), samples=200)
    assert [c.rows for c in counted] == [225, 225]
    assert 0.03 < calibration.noise < 0.1  # the difference of two uniform(-0.05, 0.05) draws, 90% quantile 0.07


def test_a_lipschitz_objective_in_one_dimension_decays_by_about_a_half_per_depth():
    calibration = calibrate(federation_of([vee, functools.partial(vee, centre=0.7)]))
    assert 0.4 < calibration.rho < 0.6
    assert 0.3 < calibration.nu1 < 1.5
    assert (calibration.evidence["model"] >= calibration.evidence["variation"] - 1e-12).all()  # an envelope


def test_the_proposal_scales_with_the_objective_and_nothing_else_changes():
    small = calibrate(federation_of([functools.partial(vee, scale=0.1), functools.partial(vee, centre=0.6, scale=0.1)]))
    large = calibrate(federation_of([vee, functools.partial(vee, centre=0.6)]))
    assert small.rho == pytest.approx(large.rho, rel=1e-9)
    assert small.nu1 == pytest.approx(0.1 * large.nu1, rel=1e-9)


def test_the_uniform_plan_is_what_a_run_that_eliminates_nothing_does():
    sites = three_knobs.federation()
    result = run(sites, horizon=2_000_000, alpha=0.5, seed=0)
    spec = AlgorithmSpec.build("pf-xab", num_clients=5, horizon=2_000_000, alpha=0.5)
    assert result.phases["eliminated"].sum() == 0
    assert result.phases["active_nodes"].tolist() == [2 ** p for p in range(1, uniform_plan(spec).phases + 1)]
    assert result.phases["phase_length"].tolist() == list(uniform_plan(spec).lengths)


def test_a_run_that_cannot_eliminate_warns_once_before_it_starts(caplog):
    with caplog.at_level(logging.WARNING, logger="pfxab_flower"):
        run(three_knobs.federation(), horizon=2_000_000, alpha=0.5, seed=0)
    warnings = [r.getMessage() for r in caplog.records if "explores uniformly" in r.getMessage()]
    assert len(warnings) == 1
    assert warnings[0].startswith("with nu1=1, rho=0.5 nothing can be eliminated before depth 5")


def test_a_run_that_eliminates_does_not_warn(caplog):
    with caplog.at_level(logging.WARNING, logger="pfxab_flower"):
        result = run(Federation.from_callables([vee, functools.partial(vee, centre=0.6)], {"x": (0.0, 1.0)}),
                     horizon=200_000, alpha=0.5, seed=0)
    assert result.phases["eliminated"].sum() > 0
    assert not [r for r in caplog.records if "explores uniformly" in r.getMessage()]


def test_the_warning_reads_a_declared_range_when_there_is_no_ground_truth():
    spec = AlgorithmSpec.build("pf-xab", num_clients=5, horizon=2_000_000, alpha=0.5, reward_range=(0.0, 0.05))
    assert "explores uniformly" in uniform_exploration_warning(spec)
    assert uniform_exploration_warning(spec.replace(reward_range=(0.0, 1.0))) is None
    assert uniform_exploration_warning(AlgorithmSpec.build("pf-xab", num_clients=5, horizon=2_000_000)) is None


def test_first_eliminating_depth_follows_three_widths():
    assert first_eliminating_depth(1.0, 0.5, [1.0]) == 2  # 3 * 0.25 < 1 <= 3 * 0.5
    assert first_eliminating_depth(1.0, 0.5, [0.0]) is None
    assert first_eliminating_depth(1.0, 0.5, [0.1, 0.1, 0.1, 2.0]) == 4


def test_on_the_three_knob_example_the_report_says_what_each_setting_can_do():
    calibration = calibrate(three_knobs.federation(), horizon=2_000_000, alpha=0.5)
    assert calibration.calibrated.phases > calibration.defaults.phases == 5
    assert calibration.calibrated.eliminates is not True
    assert calibration.horizon_needed is not None and calibration.horizon_needed > 2_000_000
    summary = json.loads(json.dumps(calibration.summary()))
    assert summary["horizon_needed"] == calibration.horizon_needed


@pytest.mark.parametrize("keywords, message", [
    ({"samples": 10}, "samples=10 is invalid; allowed: an integer >= "),
    ({"depths": 1}, "depths=1 is invalid; allowed: an integer in [2, 62]"),
    ({"horizon": 0}, "horizon=0 is invalid"),
    ({"seed": -1}, "seed=-1 is invalid"),
])
def test_bad_input_is_one_line_before_any_evaluation(keywords, message):
    counted = Counted(vee)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        calibrate(federation_of([counted]), **keywords)
    assert counted.rows == 0


def test_a_federation_is_required():
    with pytest.raises(ConfigError, match="federation=None is invalid"):
        calibrate(None)


def test_the_command_prints_json_and_draws_the_evidence(tmp_path, capsys):
    figure = tmp_path / "calibration.png"
    assert main(["calibrate", "--problem", "doublesine", "--clients", "3", "--horizon", "100000", "--json",
                 "--plot", str(figure)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["evaluations"] == [384, 384, 384] and summary["nu1"] > 0 and 0 < summary["rho"] < 1
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_command_refuses_a_bad_plot_path_before_any_work(tmp_path):
    line = cli_error_line("calibrate", "--plot", str(tmp_path / "x.txt"))
    assert line.startswith("pfxab calibrate: error: --plot=")
    assert not (tmp_path / "x.txt").exists()


def test_too_few_samples_for_the_depths_is_refused_by_the_command():
    assert "samples=8 is invalid" in cli_error_line("calibrate", "--samples", str(POINTS_PER_CELL))
