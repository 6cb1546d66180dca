"""calibrate(): what it evaluates, what it measures, what it predicts; and the warning of runs that cannot eliminate."""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from pfxab_flower import ConfigError, Federation, calibrate, run
from pfxab_flower.running.resolution import first_eliminating_depth, uniform_exploration_warning, uniform_plan
from pfxab_flower.schema.spec import AlgorithmSpec
from pfxab_flower.simulations.cli.main import main
from pfxab_flower.studies.calibration import DEFAULT_SAMPLES, POINTS_PER_CELL, VERDICTS
from pfxab_flower.studies.noisy_cells import trial_noise
from tests.conftest import cli_error_line
from tests.patience import patient

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"


def _example(name: str):
    """docs/examples/<name>.py, an example of docs/flower.md, as a module."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


three_knobs = _example("three_knobs")
success_rate = _example("success_rate")


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
    assert calibration.noise == pytest.approx(0.1 / np.sqrt(12), rel=0.25)  # uniform(-0.05, 0.05): sd 0.0289


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
    ({"samples": 10}, "samples=10 is invalid; allowed: an integer in [96, 100000] "),
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
    assert main(["calibrate", "--problem", "doublesine", "--num-clients", "3", "--horizon", "100000", "--json",
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


# -- stochastic objectives: 0/1 outcomes, bounded, heavy-tailed within the bounds -------------------------


def trials_of(probability, seed):
    """A 0/1 black box: one trial per row, succeeding with ``probability(points)``."""
    rng = np.random.default_rng(seed)
    return lambda points: (rng.random(len(points)) < probability(points)).astype(float)


def flat_trials(sites, seed, dims=1):
    domain = {f"x{i}": (0.0, 1.0) for i in range(dims)}
    return Federation.from_callables([trials_of(lambda p: np.full(len(p), 0.5), seed + m) for m in range(sites)],
                                     domain, evaluation="stochastic", value_range=(0.0, 1.0))


def test_the_docs_success_rate_example_gives_nu1_rho_and_a_verdict_at_the_default_samples():
    """docs/examples/success_rate.py: 2-D, three sites, each one's success probability a smooth bump."""
    sites = success_rate.federation()
    calibration = calibrate(sites, horizon=200_000, alpha=0.5)
    assert calibration.evaluations == [DEFAULT_SAMPLES] * 3  # 0/1 trials: Bernoulli's noise, no repeats
    assert calibration.nu1 > 0 and 0 < calibration.rho < 1
    assert calibration.verdict in VERDICTS[:3]
    assert calibration.evidence["used_in_fit"].sum() >= 2
    # the noise is Bernoulli's: sqrt(p (1 - p)) at the mean success rate over the domain, never above 1/2
    grid = np.stack(np.meshgrid(np.linspace(0, 1, 101), np.linspace(0, 1, 101)), axis=-1).reshape(-1, 2)
    rates = [success_rate.success_probability(grid, m).mean() for m in range(3)]
    assert calibration.noise == pytest.approx(max(np.sqrt(r * (1 - r)) for r in rates), abs=0.04)
    assert calibration.noise <= 0.5
    summary = json.loads(json.dumps(calibration.summary()))
    assert summary["verdict"] == calibration.verdict and summary["nu1"] == calibration.nu1


@pytest.mark.slow
def test_the_docs_success_rate_example_runs_as_a_user_runs_it():
    done = subprocess.run([sys.executable, str(EXAMPLES / "success_rate.py"), "100000"], capture_output=True,
                          text=True, timeout=patient(300))
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("proposed: nu1=") and "one evaluation's noise: sd 0." in lines[0]
    assert sum(line.startswith("verdict: ") for line in lines) == 1
    assert [line.split(":")[0] for line in lines[-2:]] == ["defaults", "calibrated"]


def test_a_flat_0_1_objective_shows_no_variation_and_says_what_more_samples_would_resolve():
    with pytest.raises(ConfigError) as raised:
        calibrate(flat_trials(2, seed=7))
    message = str(raised.value)
    assert "\n" not in message and "measured no variation of the objective's mean above its noise" in message
    assert float(re.search(r"one evaluation's noise: sd ([\d.]+)", message).group(1)) == pytest.approx(0.5, abs=0.01)
    resolution = float(re.search(r"varies by more than about ([\d.]+)", message).group(1))
    with pytest.raises(ConfigError) as four_times:
        calibrate(flat_trials(2, seed=7), samples=4 * DEFAULT_SAMPLES)
    finer = float(re.search(r"varies by more than about ([\d.]+)", str(four_times.value)).group(1))
    assert finer == pytest.approx(resolution / 2, rel=0.15)  # "that resolution halves with 4 times as many"


def test_flat_0_1_objectives_rarely_show_a_false_variation():
    """The threshold keeps the chance of any false depth, over depths and sites, near 5%."""
    false = 0
    for seed in range(40):
        try:
            calibrate(flat_trials(3, seed=1000 + seed, dims=2), seed=seed)
            false += 1
        except ConfigError:
            pass
    assert false <= 5  # 2 expected; 5 or more has a chance below 5% if the rate is 5%


def test_a_0_1_objective_whose_variation_is_resolved_with_more_samples():
    def bump(points):
        return 0.4 + 0.2 * np.exp(-((points[:, 0] - 0.3) ** 2) / (2 * 0.1**2))

    def sites():
        return Federation.from_callables([trials_of(bump, 100 + m) for m in range(2)], {"x": (0.0, 1.0)},
                                         evaluation="stochastic", value_range=(0.0, 1.0))
    with pytest.raises(ConfigError, match="measured no variation"):
        calibrate(sites())
    assert calibrate(sites(), samples=16 * DEFAULT_SAMPLES).evidence["used_in_fit"].any()


def test_more_samples_shrink_the_standard_errors_as_one_over_their_square_root():
    errors = [calibrate(success_rate.federation(), samples=n).evidence["standard_error"].median()
              for n in (DEFAULT_SAMPLES, 4 * DEFAULT_SAMPLES)]
    assert errors[1] / errors[0] == pytest.approx(0.5, abs=0.1)


def test_a_heavy_tailed_objective_within_its_bounds_measures_its_noise_from_repeats():
    """Mostly the mean plus a small spread, but one trial in twenty lands at 0 or 1."""
    rng = np.random.default_rng(5)

    def heavy(points, centre):
        mean = 0.2 + 0.6 * np.exp(-((points[:, 0] - centre) ** 2) / (2 * 0.15**2))
        jump = rng.random(len(points)) < 0.05
        return np.clip(np.where(jump, rng.integers(0, 2, len(points)), mean + rng.normal(0, 0.02, len(points))), 0, 1)

    counted = [Counted(functools.partial(heavy, centre=c)) for c in (0.3, 0.6)]
    calibration = calibrate(federation_of(counted, evaluation="stochastic", value_range=(0.0, 1.0)))
    assert [c.rows for c in counted] == [DEFAULT_SAMPLES + DEFAULT_SAMPLES // 8] * 2  # not two-valued: repeats
    # the sd of one trial: 0.02 normal spread and the 5% jumps (a jump to 0 or 1 lies about 0.45 from the mean)
    assert 0.05 < calibration.noise < 0.2
    assert calibration.nu1 > 0 and 0 < calibration.rho < 1 and calibration.evidence["used_in_fit"].sum() >= 2


def test_the_noise_never_exceeds_half_the_declared_range():
    """Popoviciu: no variable within [a, b] has a standard deviation above (b - a) / 2, whatever the repeats say."""
    first, again = np.array([0.0, 1.0, 0.0, 1.0]), np.array([1.0, 0.0, 1.0, 0.0])  # every repeat differs by 1
    values = np.array([0.0, 1.0, 0.5, 1.0])  # three values: not a 0/1 objective, so the repeats measure it
    assert trial_noise(values, (first, again), (0.0, 1.0)) == 0.5  # the repeats alone say sqrt(1/2)
    assert trial_noise(np.array([0.0, 1.0, 1.0, 1.0]), None, (0.0, 1.0)) == pytest.approx(np.sqrt(0.75 * 0.25))


# -- one verdict, and a figure that draws what its legend says -------------------------------------------


@pytest.mark.parametrize("sites", ["three_knobs", "success_rate"])
def test_the_report_has_one_verdict_and_says_it_the_same_way_everywhere(sites):
    module = {"three_knobs": three_knobs, "success_rate": success_rate}[sites]
    calibration = calibrate(module.federation(), horizon=2_000_000, alpha=0.5)
    lines = calibration.report().splitlines()
    calibrated = next(line for line in lines if line.startswith("calibrated ("))
    assert calibrated.split("fit the horizon: ")[1].split(";")[0] == calibration.verdict
    assert lines[-1] == f"verdict: {calibration.advice()}" and calibration.summary()["verdict"] == calibration.verdict
    if calibration.verdict != "eliminates":
        assert "expected to eliminate" not in calibration.report()  # no "may eliminate", then "expected"
        assert "would make one expected" in lines[-1]


def _has_points(handle) -> bool:
    """Whether a legend handle (a line, or an error bar's container) has a positive value to show on a log axis."""
    line = handle.lines[0] if hasattr(handle, "lines") else handle
    values = np.asarray(line.get_ydata(), dtype=float)
    return bool((np.isfinite(values) & (values > 0)).any())


def test_the_figure_has_a_title_and_a_legend_entry_for_each_line_drawn_and_no_other():
    from pfxab_flower.simulations.reports.plots import calibration_figure

    for calibration in (calibrate(success_rate.federation(), horizon=200_000), calibrate(three_knobs.federation())):
        figure = calibration_figure(calibration)
        ax = figure.axes[0]
        assert ax.get_title() == (f"pfxab calibrate: nu1={calibration.nu1:.3g}, rho={calibration.rho:.3g}; "
                                  f"verdict: {calibration.verdict}")
        handles, labels = ax.get_legend_handles_labels()
        drawn = {label for handle, label in zip(handles, labels, strict=True) if _has_points(handle)}
        legend = [text.get_text() for text in ax.get_legend().get_texts()]
        assert set(legend) == drawn and len(legend) == len(drawn)
        spans_drawn = any("span" in label for label in legend)
        assert spans_drawn == bool((calibration.evidence["span"] > 0).any())
        plt.close(figure)


# -- limits, constant objectives, budgets and the algorithm the advice is for (issues 46, 47, 48) -------------


def main_error(capsys, *args: str) -> str:
    """``pfxab ARGS`` in this process: exit status 2, nothing on stdout, its one line on stderr."""
    assert main(list(args)) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    return err.strip()


def test_an_exactly_constant_stochastic_objective_is_one_line_not_a_nu1_of_float_rounding():
    """0.3 every trial: the means' rounding (1.1e-16) was taken for variation and gave nu1 = 1.6e-16."""
    constant = federation_of([lambda p: np.full(len(p), 0.3)] * 3, evaluation="stochastic", value_range=(0.0, 1.0))
    with pytest.raises(ConfigError, match=r"samples=384 found no trial further from another than float rounding"):
        calibrate(constant, horizon=10_000)


def test_values_within_a_range_of_1e_300_are_one_line_not_a_division_by_zero():
    rng = np.random.default_rng(0)
    tiny = federation_of([lambda p: rng.uniform(0.0, 1e-300, len(p))] * 3, evaluation="stochastic",
                         value_range=(0.0, 1e-300))
    with pytest.raises(ConfigError, match="float rounding"):
        calibrate(tiny, horizon=10_000)
    with pytest.raises(ConfigError, match="found no variation"):
        calibrate(federation_of([lambda p: 1e-300 * p[:, 0]] * 2, value_range=(0.0, 1e-300)), horizon=10_000)


def test_the_proposal_is_always_a_nu1_a_run_accepts():
    from pfxab_flower.limits import NU1_RANGE
    from pfxab_flower.studies.calibration_fit import Envelope, within_nu1_range

    steep = Envelope(np.array([15]), np.array([2e9]))  # rho 0.3 would need nu1 = 1.4e17
    rho = within_nu1_range(steep, 0.3, 0.3)
    assert NU1_RANGE[0] <= steep.nu1(rho) <= NU1_RANGE[1]
    with pytest.raises(ConfigError, match=r"needs nu1 outside \[1e-12, 1e\+12\]"):
        within_nu1_range(Envelope(np.array([1]), np.array([1e-14])), 0.5, 0.5)


def test_samples_have_an_upper_limit_where_they_enter(capsys):
    counted = Counted(vee)
    with pytest.raises(ConfigError, match=r"samples=100000000 is invalid; allowed: an integer in \[96, 100000\]"):
        calibrate(federation_of([counted]), samples=10**8)
    assert counted.rows == 0
    line = main_error(capsys, "calibrate", "--samples", "1000000000000")
    assert line.startswith("pfxab calibrate: error: --samples=1000000000000 is invalid; allowed: an integer in [")


def test_a_plot_that_cannot_be_written_names_plot(tmp_path, capsys, monkeypatch):
    """A full disk at --plot: the line names --plot (it named --out, a flag calibrate does not have)."""
    import errno

    from matplotlib.figure import Figure

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", full_disk)
    assert main(["calibrate", "--problem", "doublesine", "--num-clients", "2", "--horizon", "100000",
                 "--plot", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pfxab calibrate: error: --plot=") and "No space left on device" in err
    assert not (tmp_path / "c.png").exists()


def test_calibrate_takes_every_parameter_of_the_algorithm_and_advises_for_it(capsys):
    """pf-sh's candidates reach it (the keyword was refused, the flag ignored); pf-sh is told nu1, rho do not matter."""
    sites = federation_of([functools.partial(vee, centre=c) for c in (0.3, 0.6)])
    calibration = calibrate(sites, horizon=100_000, algorithm="pf-sh", candidates=64)
    advice = calibration.advice()
    assert advice.startswith("pf-sh does not use nu1 or rho") and "candidates=64" in advice
    assert calibration.summary()["uses_nu1_rho"] is False
    assert calibrate(sites, horizon=100_000, algorithm="pf-sh").own_options["candidates"] > 0  # the rule's count
    with pytest.raises(ConfigError, match="unknown keyword 'candidates' for algorithm 'pf-xab'"):
        calibrate(sites, horizon=100_000, candidates=64)
    with pytest.raises(ConfigError, match="nu1=2 is invalid here"):
        calibrate(sites, horizon=100_000, nu1=2)
    assert main(["calibrate", "--problem", "garland", "--num-clients", "2", "--horizon", "100000", "--algorithm",
                 "pf-sh", "--candidates", "32", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["algorithm"] == "pf-sh" and "candidates=32" in summary["advice"]
    line = main_error(capsys, "calibrate", "--num-clients", "2", "--horizon", "100000", "--candidates", "32")
    assert line == "pfxab calibrate: error: --candidates=32 is invalid; allowed: only with --algorithm pf-sh, " \
                   "whose parameter it is (this run is pf-xab on garland)"


def test_an_algorithm_that_uses_nu1_and_rho_is_pointed_to_those_that_do_not():
    calibration = calibrate(success_rate.federation(), horizon=200_000)
    assert calibration.verdict != "eliminates" and "pf-sh needs no nu1 or rho" in calibration.advice()


def test_a_site_budget_caps_the_trials_at_its_stated_share():
    """384 trials whatever the budget: a site with 1,000 evaluations gave 38% of them to calibration."""
    counted = [Counted(functools.partial(vee, centre=c)) for c in (0.3, 0.6)]
    sites = federation_of(counted)
    calibration = calibrate(sites, horizon=1000)
    assert [c.rows for c in counted] == [100, 100] and calibration.evaluations == [100, 100]
    with pytest.raises(ConfigError, match=r"samples=200 is invalid; .* at most 10% of horizon=1000"):
        calibrate(sites, horizon=1000, samples=200)
    with pytest.raises(ConfigError, match=r"horizon=300 is too small to calibrate: 10% of each site's budget is 30"):
        calibrate(sites, horizon=300)


def test_a_0_1_objective_fits_only_the_first_unbroken_run_of_depths_that_stand_out():
    """The issue's case: after depths that stood out and one that did not, depth 8 (cells 0.0625 wide) showed
    0.34 +- 0.11 where the success probability's own variation is 0.011, and was fitted."""
    centres = np.array([[0.2, 0.3], [0.4, 0.7], [0.6, 0.4], [0.8, 0.6]])

    def probability(points, m):
        return 0.2 + 0.6 * np.exp(-((points - centres[m]) ** 2).sum(axis=1) / (2 * 0.3**2))

    sites = Federation.from_callables(
        [trials_of(functools.partial(probability, m=m), 220 + m) for m in range(4)], {"a": (0, 1), "b": (0, 1)},
        evaluation="stochastic", value_range=(0.0, 1.0))
    evidence = calibrate(sites, horizon=300_000, seed=22).evidence
    exact = calibrate(Federation.from_callables([functools.partial(probability, m=m) for m in range(4)],
                                                {"a": (0, 1), "b": (0, 1)})).evidence
    assert evidence.loc[7, "variation"] > 0.3 and exact.loc[7, "variation"] < 0.02  # depth 8: noise, not the bump
    used = evidence.loc[evidence["used_in_fit"], "depth"].tolist()
    assert used == [1, 2, 3]  # the first run; 5 and 8 stood out too, after 4 did not
