"""``compare`` and ``pfxab compare``: seeds parsing, a Federation or a RunConfig, the runs, summary and curve
tables, the files read back, how numbers are printed, one-line errors before any work."""

from __future__ import annotations

import os
import re
import subprocess
from functools import partial

import numpy as np
import pandas as pd
import pytest

import pfxab_flower.studies.comparison as compare_module
from pfxab_flower import Federation
from pfxab_flower.algorithms.registry import available_names
from pfxab_flower.errors import ConfigError, WorkerLostError
from pfxab_flower.formatting import format_mean_sd, format_number
from pfxab_flower.running.engine import run, run_config
from pfxab_flower.schema.catalogue import parse_seeds
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.simulations.cli.main import main
from pfxab_flower.storage.manifest import MANIFEST_NAME
from pfxab_flower.studies.comparison import COMPARE_FILES, CURVE_COLUMNS, METRICS, RUN_COLUMNS, compare, load_comparison
from tests.conftest import COSTLY_ALGORITHMS, PFXAB, cheap_options, cli_error_line, tent_federation
from tests.patience import patient

#: Every algorithm this installation runs but the costly ones (an Optuna study per site: tests/conftest.py), which
#: their own files compare at small horizons and the slow tier's test below compares with the others.
ALL = [name for name in available_names() if name not in COSTLY_ALGORITHMS]
SMALL = RunConfig(problem="garland", num_clients=3, alpha=0.5, horizon=20_000)
#: Every algorithm this installation runs, the costly ones too (the slow tier).
EVERY = list(available_names())


def with_trials(config: RunConfig, algorithms: list[str]) -> RunConfig:
    """``config`` with :data:`tests.conftest.CHEAP_TRIALS` that ``algorithms`` read (a parameter none of a
    comparison's algorithms reads is refused)."""
    return config.replace(**{name: value for a in algorithms for name, value in cheap_options(a).items()})



@pytest.mark.parametrize(
    "text, seeds",
    [("0-9", list(range(10))), ("0,3,5", [0, 3, 5]), ("7", [7]), ("2-4,9", [2, 3, 4, 9]), (" 1 , 2 ", [1, 2])],
)
def test_parse_seeds(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a", "-1", "3-1", "0-", "1.5", "1,1", "0-3,2", "1,,2", "²"])
def test_parse_seeds_rejects_with_one_line_naming_the_value(text):
    with pytest.raises(ConfigError) as exc:
        parse_seeds(text)
    message = str(exc.value)
    assert "\n" not in message and message.startswith(f"seeds={text!r} is invalid; allowed: ")


#: The slow tier's horizon for every algorithm: optuna-tpe-fed's ``T // M`` phases (each a trial of every site's
#: study) took 154 s at SMALL's 200; 100 pulls give it 33 and are the fewest at which local-only leaves its first point.
EVERY_HORIZON = 100


@pytest.mark.parametrize(("algorithms", "horizon"), [
    pytest.param(ALL, SMALL.horizon, id="default"),
    pytest.param(EVERY, EVERY_HORIZON, id="every", marks=pytest.mark.exhaustive),
])
def test_compare_runs_every_algorithm_on_every_seed_as_a_single_run_would(algorithms, horizon):
    config = with_trials(SMALL.replace(horizon=horizon), algorithms)
    comparison = compare(config, algorithms, [0, 2], progress=False)
    runs = comparison.runs
    assert list(runs.columns) == list(RUN_COLUMNS)
    assert list(zip(runs["algorithm"], runs["seed"], strict=True)) == [(a, s) for a in algorithms for s in (0, 2)]
    assert (runs["bytes_sent"] == runs["bytes_up"] + runs["bytes_down"]).all()
    federated = runs[runs["algorithm"] != "local-only"]  # local-only's phases are its clients' own, alone
    assert (federated["communication_rounds"] == 2 * federated["phases"] + 1).all()
    # sharing one federation across runs changes nothing: each row is what `pfxab run` gives
    for row in runs.to_dict("records"):
        single = run_config(config.replace(algorithm=row["algorithm"], seed=row["seed"])).summary
        if single.get("client_phases"):  # a solo baseline: the server runs no phase, each client its own
            single["phases"] = float(np.mean(single["client_phases"]))
            assert (single["phases"] > 0) == (row["algorithm"] == "local-only")  # the one that runs phases alone
        for key in ("regret", "phases", "communication_rounds", "bytes_up", "bytes_down", "mean_reward_global"):
            assert row[key] == single[key], (row["algorithm"], row["seed"], key)
    summary = comparison.summary
    assert list(summary["algorithm"]) == algorithms and list(summary["runs"]) == [2] * len(algorithms)
    for metric in METRICS:
        grouped = runs.groupby("algorithm", sort=False)[metric]
        np.testing.assert_allclose(summary[f"{metric}_mean"], grouped.mean().loc[algorithms])
        np.testing.assert_allclose(summary[f"{metric}_std"], grouped.std(ddof=1).loc[algorithms])


def test_parallel_workers_give_the_same_rows_in_the_same_order():
    serial = compare(SMALL, ["pf-pne", "pf-xab"], [1, 0], progress=False).runs
    parallel = compare(SMALL, ["pf-pne", "pf-xab"], [1, 0], workers=2, progress=False).runs
    columns = [c for c in RUN_COLUMNS if c != "wall_seconds"]
    pd.testing.assert_frame_equal(serial[columns], parallel[columns])


def test_single_seed_has_no_standard_deviation():
    comparison = compare(SMALL, ["fed-pne"], [4], progress=False)
    assert np.isnan(comparison.summary.loc[0, "regret_std"])
    assert "± n/a" in comparison.table()


def test_compare_command_prints_the_table_and_writes_csv_and_parquet(tmp_path, capsys):
    out = tmp_path / "cmp"
    args = ["compare", "--problem", "doublesine", "--num-clients", "3", "--alpha", "0.9", "--horizon", "20000",
            "--seeds", "0-2", "--out", str(out), "--no-progress", "--algorithms", ",".join(ALL)]
    assert main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("doublesine: M=3 alpha=0.9 T=20000") and "seeds=0-2" in lines[0]
    assert lines[1].split()[0] == "algorithm" and "regret" in lines[1] and "wall time (s)" in lines[1]
    assert [line.split()[0] for line in lines[2:]] == ALL
    assert sorted(p.name for p in out.iterdir()) == sorted([*COMPARE_FILES, MANIFEST_NAME])
    runs_csv, runs_pq = pd.read_csv(out / "runs.csv"), pd.read_parquet(out / "runs.parquet")
    assert list(runs_csv.columns) == list(runs_pq.columns) == list(RUN_COLUMNS)
    assert len(runs_csv) == 3 * len(ALL) and set(runs_csv["seed"]) == {0, 1, 2}
    pd.testing.assert_frame_equal(runs_csv, runs_pq, check_dtype=False)
    summary_csv, summary_pq = pd.read_csv(out / "summary.csv"), pd.read_parquet(out / "summary.parquet")
    expected = ["algorithm", "runs", *(f"{m}_{k}" for m in METRICS for k in ("mean", "std"))]
    assert list(summary_csv.columns) == list(summary_pq.columns) == expected
    pd.testing.assert_frame_equal(summary_csv, summary_pq, check_dtype=False)
    # the printed regret is the mean and sd of the written runs, as the formatting helper prints them
    for algorithm in ALL:
        line = next(line for line in lines if line.startswith(algorithm))
        regrets = runs_csv[runs_csv["algorithm"] == algorithm]["regret"]
        assert line.split()[1:4] == format_mean_sd(regrets.mean(), regrets.std(ddof=1)).split()
        assert int(line.split()[1].replace(",", "")) == round(regrets.mean())  # a regret >= 1000: no decimals
    assert not any(re.search(r"\d[eE][+-]?\d", line) for line in lines[1:])  # no raw floats (1e-05)


@pytest.mark.parametrize(
    "flag, value, fragment",
    [
        ("--seeds", "9-0", "seeds='9-0' is invalid; allowed: an integer, a range like 0-9"),
        ("--seeds", "x", "seeds='x' is invalid"),
        ("--algorithms", "pf-xab,hoo", "algorithms='pf-xab,hoo' is invalid"),
        ("--workers", "0", "--workers=0 is invalid; allowed: an integer in [1, "),
        ("--workers", "100000", "--workers=100000 is invalid; allowed: an integer in [1, "),
        ("--alpha", "2", "alpha=2.0 is invalid"),
    ],
)
def test_bad_compare_input_is_one_line_exit_2_and_writes_nothing(tmp_path, flag, value, fragment):
    out = tmp_path / "out"
    line = cli_error_line("compare", "--horizon", "1000", flag, value, "--out", str(out))
    assert line.startswith("pfxab compare: error: ") and fragment in line
    assert not out.exists()


# --- a Federation of your own, from Python -------------------------------------------------------------------


def test_compare_a_federation_from_python_like_run():
    """The must-show call: every algorithm of the one list, each row what ``run`` gives for that seed."""
    federation = tent_federation([0.2, 0.5, 0.7])
    taken = {name: value for a in ALL for name, value in cheap_options(a).items()}  # by the algorithms compared
    comparison = compare(federation, algorithms=ALL, alpha=0.5, horizon=50_000, seeds=[0, 1], progress=False,
                         **taken)
    runs = comparison.runs
    assert comparison.algorithms == tuple(ALL) and comparison.seeds == (0, 1)
    assert list(runs.columns) == list(RUN_COLUMNS)
    assert list(zip(runs["algorithm"], runs["seed"], strict=True)) == [(a, s) for a in ALL for s in (0, 1)]
    assert set(runs["problem"]) == {"tent"} and set(runs["horizon"]) == {50_000} and set(runs["alpha"]) == {0.5}
    for row in runs.to_dict("records"):
        single = run(federation, algorithm=row["algorithm"], alpha=0.5, horizon=50_000, seed=row["seed"],
                     **cheap_options(row["algorithm"])).summary
        if single.get("client_phases"):  # a solo baseline's phases are its clients' own
            single["phases"] = float(np.mean(single["client_phases"]))
        for key in ("regret", "simple_regret", "phases", "communication_rounds", "bytes_up", "bytes_down",
                    "evaluations"):
            assert row[key] == single[key], (row["algorithm"], row["seed"], key)
    summary = comparison.summary
    assert list(summary["algorithm"]) == ALL and list(summary["runs"]) == [2] * len(ALL)
    grouped = runs.groupby("algorithm", sort=False)["regret"]
    np.testing.assert_allclose(summary["regret_mean"], grouped.mean().loc[ALL])
    np.testing.assert_allclose(summary["regret_std"], grouped.std(ddof=1).loc[ALL])
    # each run's curve ends at its regret, starts at 0 and never falls
    curves = comparison.curves
    assert list(curves.columns) == list(CURVE_COLUMNS)
    for (algorithm, seed), curve in curves.groupby(["algorithm", "seed"]):
        regret = runs[(runs["algorithm"] == algorithm) & (runs["seed"] == seed)]["regret"].item()
        assert curve["t"].iloc[0] == 0 and curve["t"].iloc[-1] == 50_000
        assert curve["regret"].iloc[0] == 0 and curve["regret"].iloc[-1] == pytest.approx(regret, rel=1e-12)
        assert (np.diff(curve["regret"]) >= -1e-9).all()
    assert comparison.setting["problem"] == "tent" and comparison.setting["num_clients"] == 3
    assert comparison.winner() in ALL and comparison.table().startswith("tent: M=3 alpha=0.5 T=50000")


def test_a_federation_of_lambdas_runs_in_forked_workers_with_the_same_rows():
    federation = tent_federation([0.1, 0.9])
    kwargs = {"algorithms": ["pf-pne", "pf-xab"], "seeds": [3, 1], "alpha": 0.2, "horizon": 20_000,
              "progress": False}
    serial = compare(federation, **kwargs).runs
    parallel = compare(federation, workers=2, **kwargs).runs
    columns = [c for c in RUN_COLUMNS if c != "wall_seconds"]
    pd.testing.assert_frame_equal(serial[columns], parallel[columns])
    assert compare_module._FEDERATIONS == {}  # nothing kept after the comparison


def test_run_keywords_reach_every_run():
    federation = tent_federation([0.2, 0.5, 0.7])
    comparison = compare(federation, ["pf-xab"], [0], alpha=0.9, horizon=30_000, rho=0.3, confidence="bernstein",
                         progress=False)
    single = run(federation, alpha=0.9, horizon=30_000, rho=0.3, confidence="bernstein", seed=0).summary
    assert comparison.runs["regret"].item() == single["regret"]
    assert comparison.setting["rho"] == 0.3 and comparison.setting["confidence"] == "bernstein"


def test_a_run_config_takes_keywords_that_replace_its_fields():
    comparison = compare(SMALL, ["fed-pne"], [0], alpha=0.9, progress=False)
    assert set(comparison.runs["alpha"]) == {0.9} and comparison.setting["alpha"] == 0.9
    assert comparison.runs["regret"].item() == run_config(SMALL.replace(algorithm="fed-pne", alpha=0.9)).summary[
        "regret"]


@pytest.fixture
def no_runs(monkeypatch):
    """A comparison that reaches a run (or the optimum, the first work) fails the test."""
    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the keywords were checked")

    monkeypatch.setattr(compare_module, "_run_job", forbidden)
    monkeypatch.setattr(Federation, "optimum", forbidden)


@pytest.mark.parametrize(
    "target, kwargs, expected",
    [
        ("tent", {"alpha": 2}, "alpha=2 is invalid; allowed: a number in [0, 1]"),
        ("tent", {"horizon": 0}, "horizon=0 is invalid; allowed: an integer in [1, "),
        ("tent", {"confidence": "wide"}, "confidence='wide' is invalid; allowed: hoeffding, bernstein"),
        ("tent", {"pf_pne_eps": -1.0}, "pf_pne_eps=-1.0 is invalid"),
        ("tent", {"foo": 1}, "unknown keyword 'foo'; allowed: alpha, horizon, "),
        ("tent", {"seed": 1}, "unknown keyword 'seed' (compare takes seeds=, a list)"),
        ("tent", {"seeds": [0, 0]}, "seeds=[0, 0] is invalid; allowed: a list without repeats"),
        ("tent", {"seeds": []}, "seeds=[] is invalid; allowed: a non-empty list"),
        ("tent", {"seeds": [0, -1]}, "seeds=-1 is invalid; allowed: an integer in [0, 2**32)"),
        ("tent", {"algorithms": ["pf-xab", "hoo"]}, "algorithms='hoo' is invalid; allowed: pf-xab, fed-pne, pf-pne"),
        ("tent", {"algorithms": "pf-xab"}, "algorithms='pf-xab' is invalid; allowed: a non-empty list"),
        ("tent", {"workers": 0}, "workers=0 is invalid; allowed: an integer in [1, "),
        ("tent", {"workers": 100_000}, "workers=100000 is invalid; allowed: an integer in [1, "),
        ("config", {"alpha": 2}, "alpha=2 is invalid"),
        ("config", {"foo": 1}, "unknown keyword 'foo'; allowed: problem, num_clients, alpha, "),
        ("config", {"algorithm": "fed-pne"}, "unknown keyword 'algorithm' (compare takes algorithms=, a list)"),
        ("object", {}, "target=str is invalid; allowed: a Federation or a RunConfig"),
    ],
)
def test_bad_keywords_are_one_line_before_any_work(no_runs, target, kwargs, expected):
    what = {"tent": lambda: tent_federation([0.2, 0.5]), "config": lambda: SMALL, "object": lambda: "garland"}[target]()
    with pytest.raises(ConfigError) as exc:
        compare(what, **{"horizon": 1000, "progress": False, **kwargs} if target == "tent"
                else {"progress": False, **kwargs})
    message = str(exc.value)
    assert "\n" not in message and message.startswith(expected), message


def test_a_federation_cannot_go_to_a_remote_runner(no_runs):
    with pytest.raises(ConfigError, match=r"^runner=\.\.\. is invalid with a Federation"):
        compare(tent_federation([0.5]), runner=lambda fn, jobs, done: None, progress=False)


def test_a_written_comparison_reads_back_whole(tmp_path):
    comparison = compare(tent_federation([0.2, 0.7]), ["pf-xab", "pf-pne"], [0, 1], horizon=20_000, progress=False)
    out = comparison.write(tmp_path / "cmp")
    assert sorted(p.name for p in out.iterdir()) == sorted([*COMPARE_FILES, MANIFEST_NAME])
    back = load_comparison(out)
    assert back.algorithms == comparison.algorithms and back.seeds == comparison.seeds
    assert back.setting == comparison.setting
    for name in ("runs", "summary", "curves"):
        pd.testing.assert_frame_equal(getattr(back, name), getattr(comparison, name))
    assert back.table() == comparison.table()


# --- numbers as printed ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mean, sd, text",
    [
        (257482.3, 3.25391e-11, "257,482 ± 0"),  # an sd far below the mean's precision is 0
        (2409976.0, 0.0, "2,409,976 ± 0"),  # whole numbers as integers (was 2.40998e+06 ± 0)
        (2082003.4, 4868.2, "2,082,003 ± 4,868"),  # never fewer digits than the integer part
        (6.0, 0.0, "6 ± 0"),
        (np.int64(13), np.float64(0.0), "13 ± 0"),
        (6.5, 0.7071, "6.500 ± 0.707"),  # four significant digits, the sd at the mean's decimals
        (604.56, 0.76, "604.6 ± 0.8"),
        (0.36123, 0.0834, "0.3612 ± 0.0834"),
        (0.0012, 0.5, "0.0012 ± 0.5000"),  # the larger of the two sets the decimals
        (0.0, 0.0, "0 ± 0"),
        (1.0, float("nan"), "1 ± n/a"),  # one seed: no sd
        (-3.2, 0.1, "-3.200 ± 0.100"),
    ],
)
def test_mean_and_sd_are_printed_with_sensible_precision(mean, sd, text):
    assert format_mean_sd(mean, sd) == text


def test_a_table_on_one_scale_keeps_its_decimals():
    assert format_mean_sd(0.8011, 1e-9, decimals=3) == "0.801 ± 0.000"  # a sweep's scaled table
    assert format_number(-1e-12, decimals=3) == "0.000"  # never "-0.000"
    assert format_number(6.0, decimals=1) == "6.0"


@pytest.mark.parametrize(
    "value, text",
    [(np.int64(42916), "42,916"), (13.0, "13"), (7, "7"), (0.123456, "0.1235"), (123456.7, "123,457"),
     (float("nan"), "n/a"), (float("inf"), "inf")],
)
def test_single_numbers(value, text):
    assert format_number(value) == text


# -- issue 37, class 14: a dead worker or a closed output is one line, and loses no finished run ---------------

_PARENT: list[int] = []


def _dies_in_a_worker(points: np.ndarray, how: str) -> np.ndarray:
    """Client 1's objective: its worker is SIGKILLed once (``how``: a flag file to create) or segfaults (``crash``)."""
    import ctypes
    import faulthandler
    import signal

    if os.getpid() != _PARENT[0]:
        if how.startswith("/"):
            if not os.path.exists(how):
                open(how, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
        else:
            # the forked worker inherits pytest's faulthandler, whose "Fatal Python error: Segmentation fault" dump
            # (the worker's stack, on the test log) is not what this test shows: the worker still dies of SIGSEGV
            faulthandler.disable()
            ctypes.string_at(0)  # a crash in C: the worker dies of SIGSEGV
    return 1.0 - np.abs(points[:, 0] - 0.6)


def _federation(how: str) -> Federation:
    return Federation.from_callables([lambda x: 1.0 - np.abs(x[:, 0] - 0.3), partial(_dies_in_a_worker, how=how)],
                                     {"x": (0.0, 1.0)})


def test_a_worker_killed_once_loses_no_run_and_a_crashing_one_is_one_line(tmp_path) -> None:
    """``compare()`` raised a bare ``BrokenProcessPool`` when a worker was killed or crashed (issue 37)."""
    _PARENT[:] = [os.getpid()]
    keywords = dict(seeds=[0, 1, 2], progress=False, horizon=20_000)
    reference = compare(_federation("/dev/null"), ["pf-xab", "fed-pne"], workers=1, **keywords)  # no worker: no kill
    killed = compare(_federation(str(tmp_path / "killed-once")), ["pf-xab", "fed-pne"], workers=2, **keywords)
    assert (tmp_path / "killed-once").exists()  # a worker was SIGKILLed mid-comparison
    columns = [c for c in RUN_COLUMNS if c != "wall_seconds"]
    assert killed.runs[columns].equals(reference.runs[columns])  # its runs were run again: nothing lost
    with pytest.raises(WorkerLostError) as info:
        compare(_federation("crash"), ["pf-xab", "fed-pne"], workers=2, **keywords)
    assert str(info.value).startswith("run pf-xab seed 0: a worker process died twice running this job (killed by "
                                      "SIGSEGV)") and "\n" not in str(info.value)


def test_output_closed_early_is_quiet_and_status_141(tmp_path) -> None:
    """``pfxab run ... | head -2``: a BrokenPipeError traceback when the reader had gone before the report."""
    for args in (["run", "--horizon", "2000"], ["run", "--horizon", "2000", "--json", "--out", "R"]):
        child = subprocess.Popen([*PFXAB, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
        child.stdout.close()  # the reader is gone before anything is printed
        err = child.stderr.read().decode()
        assert child.wait(timeout=patient(120)) == 141 and "Traceback" not in err and "BrokenPipe" not in err, err
    assert (tmp_path / "R" / "summary.json").is_file()  # written before anything was printed: kept


def test_output_to_a_full_device_is_one_line(tmp_path) -> None:
    """``pfxab run > /dev/full``: an ``OSError: No space left on device`` traceback (found again, issue 37)."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([*PFXAB, "run", "--horizon", "2000", "--num-clients", "3"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=patient(120), cwd=tmp_path)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("with nu1")]
    assert done.returncode == 2 and lines == [
        "pfxab run: error: the system refused: No space left on device; allowed: a working file system, device or "
        "output (stdout too)"], done.stderr
