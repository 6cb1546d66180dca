"""``pfxab sweep``: validated grids, tidy tables, no repeated work, resumption after an interruption."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pfxab_flower.simulations.experiments.sweep as sweep_module
from pfxab_flower.running.results import time_grid
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.simulations.cli.main import main
from pfxab_flower.simulations.experiments.experiment import load_experiment, run_id
from pfxab_flower.simulations.experiments.sweep_runs import CONFIG_COLUMNS, REFERENCE_COLUMNS, SUMMARY_COLUMNS

TINY = """
[experiment]
name = "tiny"
kind = "regret"
title = "tiny sweep"

[fixed]
problem = "garland"
num_clients = 3
horizon = 5000

[grid]
algorithm = ["pf-xab", "fed-pne"]
alpha = [0.1, 0.9]
seed = {seeds}
"""
RUN_COLUMNS = {"run_id", *CONFIG_COLUMNS, *SUMMARY_COLUMNS, *REFERENCE_COLUMNS}


def write_config(tmp_path: Path, text: str = TINY.format(seeds="[0, 1]"), name: str = "tiny.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def sweep(config: Path, out: Path, *extra: str) -> int:
    return main(["sweep", str(config), "--out", str(out), "--no-progress", *extra])


def last_invocation(out: Path) -> dict:
    return json.loads((out / "sweep.json").read_text())["invocations"][-1]


@pytest.fixture
def finished(tmp_path: Path) -> tuple[Path, Path]:
    """A tiny sweep (2 algorithms x 2 alphas x 2 seeds, T = 5000) run with two worker processes."""
    config, out = write_config(tmp_path), tmp_path / "out"
    assert sweep(config, out, "--workers", "2") == 0
    return config, out


def test_sweep_writes_both_tables_with_the_documented_columns(finished):
    _, out = finished
    runs = pd.read_parquet(out / "runs.parquet")
    curves = pd.read_parquet(out / "curves.parquet")
    assert len(runs) == 8 and runs["run_id"].is_unique
    assert set(runs.columns) >= RUN_COLUMNS
    assert set(curves.columns) == {"run_id", *CONFIG_COLUMNS, "t", "regret"}
    # every run is on the same time grid, from 0 to T, and its curve ends at its final regret
    grid = time_grid(5000)
    for rid, curve in curves.groupby("run_id"):
        assert curve["t"].tolist() == grid.tolist()
        final = runs.loc[runs["run_id"] == rid, "regret"].item()
        assert curve["regret"].iloc[-1] == pytest.approx(final)
        assert curve["regret"].iloc[0] == 0.0 and np.all(np.diff(curve["regret"]) >= -1e-9)
    # each row is its run's summary
    row = runs.iloc[3]
    summary = json.loads((out / "runs" / row["run_id"] / "summary.json").read_text())
    assert summary["regret"] == row["regret"] and summary["seed"] == row["seed"]
    assert [summary[key] for key in ("simple_regret", "best_simple_regret")] == [row["simple_regret"],
                                                                                 row["best_simple_regret"]]
    assert runs["best_local"].nunique() == 1 and runs["best_local"].iloc[0] >= runs["mean_reward_local"].max()
    assert (out / "config.toml").is_file()
    record = json.loads((out / "sweep.json").read_text())
    assert record["machine"]["processor"] and record["machine"]["cpus"] >= 1
    assert last_invocation(out)["runs_executed"] == 8
    assert not list(out.rglob(".*.tmp"))


def test_plot_and_report_of_the_tiny_sweep(finished, tmp_path, capsys):
    _, out = finished
    png, pdf = tmp_path / "fig.png", tmp_path / "fig.pdf"
    assert main(["plot", str(out), "--out", str(png)]) == 0
    assert main(["plot", str(out), "--out", str(pdf), "--log-x"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert pdf.read_bytes()[:4] == b"%PDF"
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    table = capsys.readouterr().out
    runs = pd.read_parquet(out / "runs.parquet")
    assert "| algorithm | α = 0.1 | α = 0.9 |" in table
    assert runs["regret"].max() < 1e4  # so the table is not rescaled
    mean = runs.loc[(runs["algorithm"] == "pf-xab") & (runs["alpha"] == 0.9), "regret"].mean()
    row = next(line for line in table.splitlines() if line.startswith("| PF-XAB |"))
    assert row.split(" | ")[2].startswith(f"{mean:,.3f} ± ")
    simple = runs.loc[(runs["algorithm"] == "pf-xab") & (runs["alpha"] == 0.9), "simple_regret"].mean()
    after = table[table.index("Simple regret of the final points"):]
    row = next(line for line in after.splitlines() if line.startswith("| PF-XAB |"))
    assert row.split(" | ")[2].startswith(f"{simple:,.4f} ± ")


def test_running_the_same_sweep_again_does_no_new_work(finished, capsys):
    config, out = finished
    before = {p: p.stat().st_mtime_ns for p in (out / "runs.parquet", out / "curves.parquet")}
    capsys.readouterr()
    assert sweep(config, out) == 0
    assert "all 8 runs already complete" in capsys.readouterr().out
    assert last_invocation(out)["runs_executed"] == 0
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_an_interrupted_sweep_resumes_only_the_missing_runs(finished, capsys):
    config, out = finished
    before = pd.read_parquet(out / "runs.parquet")
    victim = out / "runs" / before["run_id"].iloc[5]
    (victim / "summary.json").unlink()  # as if the process died before the last rename
    (victim / ".curve.csv.abcdefgh.pfxab-tmp").write_text("half")  # and left a temp file behind (pfxab's name)
    capsys.readouterr()
    assert sweep(config, out) == 0
    printed = capsys.readouterr().out
    assert "1 of 8 runs to do (7 already complete)" in printed and "ran 1 run in" in printed
    assert last_invocation(out)["runs_executed"] == 1
    assert not list(victim.glob(".*pfxab-tmp"))
    after = pd.read_parquet(out / "runs.parquet")
    numbers = [c for c in after.columns if c != "wall_seconds"]
    pd.testing.assert_frame_equal(before[numbers], after[numbers])  # same seed, same numbers


def test_ctrl_c_stops_with_130_and_a_rerun_finishes_the_rest(tmp_path, monkeypatch, capsys):
    config, out = write_config(tmp_path), tmp_path / "out"
    real, calls = sweep_module.run_files, []

    def interrupted_after_three(*args):
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(sweep_module, "run_files", interrupted_after_three)
    assert sweep(config, out, "--workers", "1") == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"pfxab sweep: interrupted; 3 of 8 runs complete in {out}; run the same command again to resume"]
    assert not (out / "runs.parquet").exists()
    monkeypatch.setattr(sweep_module, "run_files", real)
    assert sweep(config, out, "--workers", "1") == 0
    assert "5 of 8 runs to do" in capsys.readouterr().out
    assert len(pd.read_parquet(out / "runs.parquet")) == 8


def test_a_run_whose_files_cannot_be_written_fails_alone_and_is_redone_next_time(tmp_path, monkeypatch, capsys):
    import errno

    import pfxab_flower.storage.outputs as outputs

    config, out = write_config(tmp_path), tmp_path / "out"
    real, broken = outputs.write_bytes_synced, run_id(load_experiment(config).configs[0])

    def disk_full_for_one_run(path: Path, data: bytes) -> None:
        if path.parent.name.startswith(f".{broken}."):  # the run's temporary directory
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(outputs, "write_bytes_synced", disk_full_for_one_run)
    assert sweep(config, out, "--workers", "1") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"pfxab sweep: run {broken} failed: OutputError: ")
    assert "No space left on device" in err[0]
    assert err[-1] == "pfxab sweep: 1 of 8 runs failed; tables not written"
    assert not (out / "runs" / broken).exists() and not (out / "runs.parquet").exists()
    assert len([d for d in (out / "runs").iterdir() if (d / "summary.json").is_file()]) == 7
    monkeypatch.setattr(outputs, "write_bytes_synced", real)
    assert sweep(config, out, "--workers", "1") == 0
    assert "1 of 8 runs to do" in capsys.readouterr().out
    assert len(pd.read_parquet(out / "runs.parquet")) == 8


def test_a_larger_grid_reuses_the_runs_of_a_smaller_one(tmp_path, capsys):
    out = tmp_path / "out"
    assert sweep(write_config(tmp_path, TINY.format(seeds="[0]"), "one.toml"), out, "--workers", "1") == 0
    capsys.readouterr()
    assert sweep(write_config(tmp_path, TINY.format(seeds="[0, 1]"), "two.toml"), out, "--workers", "1") == 0
    assert "4 of 8 runs to do (4 already complete)" in capsys.readouterr().out
    assert len(pd.read_parquet(out / "runs.parquet")) == 8


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("alpha = [0.1, 0.9]", "alpha = [0.1, 1.5]"), "tiny.toml: alpha=1.5 is invalid"),
        (lambda t: t.replace("seed = [0, 1]", "seed = 3"), "tiny.toml: [grid] seed=3 is invalid"),
        (lambda t: t.replace("num_clients = 3", "num_clients = 3\nalpha = 0.5"), "[grid] alpha is also in [fixed]"),
        (lambda t: t.replace("num_clients = 3", "clientz = 3"), "tiny.toml: [fixed] clientz is unknown"),
        (lambda t: t.replace('kind = "regret"', 'kind = "speed"'), "[experiment] kind='speed' is invalid"),
        (lambda t: t.replace('"fed-pne"', '"ucb"'), "tiny.toml: algorithm='ucb' is invalid"),
        (lambda t: t.replace("[grid]", "[grid"), "tiny.toml: not valid TOML"),
        (lambda t: t.replace("seed = [0, 1]", "seed = [0, 0]"), "[grid] has repeated values"),
    ],
)
def test_a_bad_config_is_one_line_exit_2_and_nothing_runs(tmp_path, capsys, edit, message):
    config, out = write_config(tmp_path, edit(TINY.format(seeds="[0, 1]"))), tmp_path / "out"
    assert sweep(config, out) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pfxab sweep: error: ") and message in err
    assert not out.exists()


def test_missing_config_and_bad_workers_are_one_line_errors(tmp_path, capsys):
    assert sweep(tmp_path / "nope.toml", tmp_path / "out") == 2
    assert sweep(write_config(tmp_path), tmp_path / "out", "--workers", "0") == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "config=" in err[0] and "--workers=0 is invalid" in err[1]


def test_plot_and_report_refuse_a_directory_that_is_not_a_sweep(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert main(["plot", str(tmp_path), "--out", str(tmp_path / "f.svg")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "finished sweep directory" in err[0] and "allowed: a file name ending in" in err[1]


def test_the_paper_configs_are_valid_grids():
    configs = Path(__file__).resolve().parents[1] / "simulations" / "configs"
    sizes = {p.stem: len(load_experiment(p).configs) for p in sorted(configs.glob("figure*.toml"))}
    assert sizes == {"figure1": 90, "figure2": 30, "figure3": 110, "figure4": 90}
    figure3 = load_experiment(configs / "figure3.toml")
    assert figure3.kind == "rewards" and [c.alpha for c in figure3.configs[::10]] == pytest.approx(
        np.round(np.arange(0, 1.01, 0.1), 1)
    )
    ids = [run_id(c) for c in load_experiment(configs / "figure1.toml").configs]
    assert len(set(ids)) == 90


FLOWER_ONE_RUN = """
[experiment]
name = "flower-one"

[fixed]
problem = "garland"
algorithm = "pf-xab"
num_clients = 3
alpha = 0.5
horizon = 5000
seed = 0
"""


@pytest.mark.ray
@pytest.mark.timeout(240)
@pytest.mark.usefixtures("shared_ray")
def test_a_flower_sweep_runs_serially_and_gives_the_inprocess_numbers(tmp_path, capsys):
    pytest.importorskip("pfxab_flower.simulations.flower.in_process_simulation")
    config = write_config(tmp_path, FLOWER_ONE_RUN, "one.toml")
    assert sweep(config, tmp_path / "flower", "--engine", "flower", "--workers", "2") == 0
    assert "using 1 worker, not 2" in capsys.readouterr().err
    assert sweep(config, tmp_path / "inprocess", "--workers", "1") == 0
    flower = pd.read_parquet(tmp_path / "flower" / "runs.parquet")
    inprocess = pd.read_parquet(tmp_path / "inprocess" / "runs.parquet")
    assert flower["engine"].tolist() == ["flower"] and inprocess["engine"].tolist() == ["inprocess"]
    same = ["run_id", "regret", "mean_reward_personalised", "phases", "communication_rounds", "best_local"]
    pd.testing.assert_frame_equal(flower[same], inprocess[same])
    assert last_invocation(tmp_path / "flower")["workers"] == 1


def test_a_field_added_later_keeps_older_run_ids_at_its_default() -> None:
    """Results written before ``confidence`` (or ``evaluation``, ``random_fraction``) existed resume: a run at
    their defaults has the id it always had."""
    config = RunConfig(problem="garland", alpha=0.5, seed=3)
    first_names = {"num_clients": "clients"}  # as the ids were first written: renamed since
    renamed = {first_names.get(k, k): v for k, v in config.to_dict().items()}
    before = {k: v for k, v in renamed.items() if k in FIRST_RUN_ID_FIELDS}
    digest = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:12]
    assert run_id(config) == f"garland-pf-xab-a0.5-s3-{digest}"
    assert run_id(config.replace(confidence="bernstein")) != run_id(config)


#: RunConfig's fields when run ids were first written: every later parameter must be left out of the id at its
#: default (declared ``late``: ``LATER_FIELDS``), or every existing results directory would redo all its runs on resume.
FIRST_RUN_ID_FIELDS = {"problem", "algorithm", "clients", "alpha", "horizon", "seed", "nu1", "rho", "noise",
                       "noise_sigma", "spread", "max_depth", "pf_pne_eps", "landmine_data", "fields"}


def test_a_field_added_to_run_configs_leaves_older_run_ids_unchanged() -> None:
    from pfxab_flower.schema.run_config import RunConfig
    from pfxab_flower.simulations.experiments.experiment import FIRST_NAMES, LATER_FIELDS

    first = {FIRST_NAMES.get(name, name) for name in RunConfig.names()}  # a renamed field keeps its first name
    assert first - set(LATER_FIELDS) == FIRST_RUN_ID_FIELDS  # a new parameter is declared late
    config = RunConfig(problem="doublesine", num_clients=3, horizon=20_000, seed=4)
    for name in LATER_FIELDS:  # a later field changes the id only away from its default
        assert run_id(config) != run_id(RunConfig(**{**config.to_dict(), name: _other_value(name)})), name


def _other_value(name: str) -> object:
    """A valid value of ``name`` other than its default, from its declaration (a new parameter needs no entry here)."""
    from pfxab_flower.schema.catalogue import declared

    p = declared(name)
    tries: tuple[object, ...] = {int: (64, 50, 8, 2, 1), float: (0.5, 0.25, 2.0), bool: (True, False)}.get(p.kind, ())
    if p.choices is not None:
        tries = tuple(p.choices())
    return next(value for value in tries if value != p.default and p.accepts(value))


def test_a_run_written_before_a_later_field_existed_is_the_same_run() -> None:
    """A sweep resumed after an algorithm's own parameter was added (tpe_trials, candidates, ...) keeps its runs:
    their config.json lacks the new field, which they ran at its default."""
    import json as json_module

    from pfxab_flower.simulations.experiments.experiment import same_run

    config = RunConfig(problem="garland", alpha=0.5, seed=3)
    written = json_module.loads(json_module.dumps(config.to_dict()))
    earlier = {k: v for k, v in written.items() if k not in ("tpe_trials", "candidates")}
    assert same_run(written, config) and same_run(earlier, config)
    assert not same_run(earlier, config.replace(tpe_trials=50))  # away from its default it is another run
    assert not same_run({**written, "seed": 4}, config)
