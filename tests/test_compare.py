"""``pfxab compare``: seeds parsing, the runs and summary tables, the files, one-line errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pfxab_flower.compare import COMPARE_FILES, METRICS, RUN_COLUMNS, compare
from pfxab_flower.config import RunConfig, parse_seeds
from pfxab_flower.engine import run_config
from pfxab_flower.errors import ConfigError
from pfxab_flower.simulations.cli import main
from tests.conftest import cli_error_line

SMALL = RunConfig(problem="garland", clients=3, alpha=0.5, horizon=20_000)
ALL = ["pf-xab", "fed-pne", "pf-pne"]


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


def test_compare_runs_every_algorithm_on_every_seed_as_a_single_run_would():
    comparison = compare(SMALL, ALL, [0, 2], progress=False)
    runs = comparison.runs
    assert list(runs.columns) == list(RUN_COLUMNS)
    assert list(zip(runs["algorithm"], runs["seed"], strict=True)) == [(a, s) for a in ALL for s in (0, 2)]
    assert (runs["bytes_sent"] == runs["bytes_up"] + runs["bytes_down"]).all()
    assert (runs["communication_rounds"] == 2 * runs["phases"] + 1).all()
    # sharing one federation across runs changes nothing: each row is what `pfxab run` gives
    for row in runs.to_dict("records"):
        single = run_config(SMALL.replace(algorithm=row["algorithm"], seed=row["seed"])).summary
        for key in ("regret", "phases", "communication_rounds", "bytes_up", "bytes_down", "mean_reward_global"):
            assert row[key] == single[key], (row["algorithm"], row["seed"], key)
    summary = comparison.summary
    assert list(summary["algorithm"]) == ALL and list(summary["runs"]) == [2, 2, 2]
    for metric in METRICS:
        grouped = runs.groupby("algorithm", sort=False)[metric]
        np.testing.assert_allclose(summary[f"{metric}_mean"], grouped.mean().loc[ALL])
        np.testing.assert_allclose(summary[f"{metric}_std"], grouped.std(ddof=1).loc[ALL])


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
    args = ["compare", "--problem", "doublesine", "--clients", "3", "--alpha", "0.9", "--horizon", "20000",
            "--seeds", "0-2", "--out", str(out), "--no-progress"]
    assert main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("doublesine: M=3 alpha=0.9 T=20000") and "seeds=0-2" in lines[0]
    assert lines[1].split()[0] == "algorithm" and "regret" in lines[1] and "wall time (s)" in lines[1]
    assert [line.split()[0] for line in lines[2:]] == ALL
    assert sorted(p.name for p in out.iterdir()) == sorted(COMPARE_FILES)
    runs_csv, runs_pq = pd.read_csv(out / "runs.csv"), pd.read_parquet(out / "runs.parquet")
    assert list(runs_csv.columns) == list(runs_pq.columns) == list(RUN_COLUMNS)
    assert len(runs_csv) == 9 and set(runs_csv["seed"]) == {0, 1, 2}
    pd.testing.assert_frame_equal(runs_csv, runs_pq, check_dtype=False)
    summary_csv, summary_pq = pd.read_csv(out / "summary.csv"), pd.read_parquet(out / "summary.parquet")
    expected = ["algorithm", "runs", *(f"{m}_{k}" for m in METRICS for k in ("mean", "std"))]
    assert list(summary_csv.columns) == list(summary_pq.columns) == expected
    pd.testing.assert_frame_equal(summary_csv, summary_pq, check_dtype=False)
    # the printed regret is the mean of the written runs
    pf_xab = next(line for line in lines if line.startswith("pf-xab"))
    assert float(pf_xab.split()[1]) == pytest.approx(runs_csv[runs_csv["algorithm"] == "pf-xab"]["regret"].mean(),
                                                     rel=1e-5)


@pytest.mark.parametrize(
    "flag, value, fragment",
    [
        ("--seeds", "9-0", "seeds='9-0' is invalid; allowed: an integer, a range like 0-9"),
        ("--seeds", "x", "seeds='x' is invalid"),
        ("--algorithms", "pf-xab,hoo", "algorithms='pf-xab,hoo' is invalid"),
        ("--workers", "0", "workers='0' is invalid; allowed: an integer >= 1"),
        ("--alpha", "2", "alpha=2.0 is invalid"),
    ],
)
def test_bad_compare_input_is_one_line_exit_2_and_writes_nothing(tmp_path, flag, value, fragment):
    out = tmp_path / "out"
    line = cli_error_line("compare", "--horizon", "1000", flag, value, "--out", str(out))
    assert line.startswith("pfxab compare: error: ") and fragment in line
    assert not out.exists()
