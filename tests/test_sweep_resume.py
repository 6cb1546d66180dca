"""Sweeps that heal: damaged runs are redone, one sweep per directory, damaged tables are one line."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pfxab_flower.errors import ConfigError
from pfxab_flower.simulations.experiments.experiment import load_experiment, run_id
from pfxab_flower.simulations.experiments.sweep import consolidate, sweep_lock
from pfxab_flower.simulations.experiments.sweep_runs import RUN_FILES
from pfxab_flower.storage.manifest import verify
from tests.conftest import CHEAP_ALGORITHMS_FLAG, cli_error_line
from tests.patience import patient
from tests.test_sweep import TINY, last_invocation, sweep, write_config


@pytest.fixture(scope="module")
def finished_once(tmp_path_factory) -> tuple[Path, Path]:
    """One tiny sweep (8 runs), copied by each test that damages it."""
    root = tmp_path_factory.mktemp("sweep")
    config, out = write_config(root), root / "out"
    assert sweep(config, out, "--workers", "1") == 0
    return config, out


@pytest.fixture
def finished(finished_once, tmp_path) -> tuple[Path, Path]:
    config, out = finished_once
    shutil.copytree(out, tmp_path / "out")
    return config, tmp_path / "out"


DAMAGE = {
    "truncated summary": ("summary.json", lambda text: text[: len(text) // 2]),
    "summary without regret": ("summary.json", lambda text: json.dumps({**json.loads(text), "regret": None})),
    "garbage curve": ("grid_curve.csv", lambda text: "\x00\x01 not a table\n"),
    "another run's config": ("config.json", lambda text: text.replace('"seed": 1', '"seed": 7')),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_run_is_redone_with_one_warning(finished, capsys, damage):
    config, out = finished
    before = pd.read_parquet(out / "runs.parquet")
    victim = out / "runs" / before.loc[before["seed"] == 1, "run_id"].iloc[0]
    name, edit = DAMAGE[damage]
    (victim / name).write_text(edit((victim / name).read_text()))
    capsys.readouterr()
    assert sweep(config, out) == 0
    captured = capsys.readouterr()
    warning = captured.err.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith("pfxab sweep: warning: 1 run(s) in ")
    assert victim.name in warning[0]
    assert "1 of 8 runs to do (7 already complete)" in captured.out
    assert last_invocation(out)["runs_executed"] == 1
    after = pd.read_parquet(out / "runs.parquet")
    numbers = [c for c in after.columns if c != "wall_seconds"]
    pd.testing.assert_frame_equal(before[numbers], after[numbers])  # healed: same seed, same numbers
    assert sweep(config, out) == 0 and capsys.readouterr().err == ""  # and healed for good


def test_leftover_temporary_directories_are_removed_and_nothing_else(finished, capsys):
    config, out = finished
    rid = run_id(load_experiment(config).configs[0])
    (out / "runs" / f".{rid}.k2x_9q0a.pfxab-tmp").mkdir()  # what a crash mid-write leaves (atomic_files.py's names)
    (out / "runs" / f".{rid}.a1b2c3d4.old").mkdir()
    (out / ".runs.parquet.xyz12345.pfxab-tmp.parquet").write_text("half")
    users = {".bashrc.old": "alias", ".thesis.pfxab-tmp.bak": "draft", ".draft.tmp": "notes",
             ".notes.abcdefgh.pfxab-tmp": "a user's name that only looks like ours"}
    for name, text in users.items():
        (out / name).write_text(text)
    (out / ".backup.old").mkdir()
    (out / ".backup.old" / "data").write_text("kept")
    assert sweep(config, out) == 0
    assert [p.name for p in (out / "runs").iterdir() if p.name.startswith(".")] == []
    assert not (out / ".runs.parquet.xyz12345.pfxab-tmp.parquet").exists()
    assert {name: (out / name).read_text() for name in users} == users  # the user's hidden files, untouched
    assert (out / ".backup.old" / "data").read_text() == "kept"


def test_a_second_sweep_on_the_same_directory_is_refused_naming_the_first(finished, capsys):
    config, out = finished
    invocations = len(json.loads((out / "sweep.json").read_text())["invocations"])
    with sweep_lock(out):  # as if another sweep were running
        assert sweep(config, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"another pfxab sweep, pid {os.getpid()}, is writing there" in err[0]
    assert len(json.loads((out / "sweep.json").read_text())["invocations"]) == invocations  # it did nothing
    assert sweep(config, out) == 0  # the lock is gone with its holder


def test_concurrent_sweeps_never_both_do_the_work(tmp_path):
    config, out = write_config(tmp_path), tmp_path / "out"
    command = [sys.executable, "-m", "pfxab_flower.simulations.cli.main", "sweep", str(config), "--out", str(out),
               "--workers", "1", "--no-progress"]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = [(p.wait(timeout=patient(300)), p.stderr.read()) for p in procs]
    for code, err in results:
        assert code == 0 or (code == 2 and err.count("\n") == 1 and "another pfxab sweep, pid" in err), err
    history = json.loads((out / "sweep.json").read_text())["invocations"]
    assert sum(h["runs_executed"] for h in history) == 8  # every run done exactly once
    assert len(pd.read_parquet(out / "runs.parquet")) == 8


def test_a_config_that_is_a_directory_is_one_line(tmp_path):
    line = cli_error_line("sweep", str(tmp_path), "--out", str(tmp_path / "out"))
    assert line.startswith(f"pfxab sweep: error: config={str(tmp_path)!r} is invalid (Is a directory)")
    assert not (tmp_path / "out").exists()


def test_a_config_that_is_not_text_is_one_line(tmp_path):
    binary = tmp_path / "x.toml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert "x.toml: not valid TOML" in cli_error_line("sweep", str(binary), "--out", str(tmp_path / "out"))


@pytest.mark.parametrize("damage", ["missing", "corrupt", "wrong runs"])
@pytest.mark.parametrize("command", ["report", "plot"])
def test_report_and_plot_of_damaged_tables_are_one_line(finished, tmp_path, command, damage):
    _, out = finished
    runs = out / "runs.parquet"
    if damage == "missing":
        runs.unlink()
    elif damage == "corrupt":
        runs.write_bytes(runs.read_bytes()[:100])
    else:  # a crash between the two renames of a larger grid: curves new, runs old
        pd.read_parquet(runs).iloc[:5].to_parquet(runs, index=False)
    args = [command, str(out)] + (["--out", str(tmp_path / "f.png")] if command == "plot" else [])
    line = cli_error_line(*args)
    assert line.startswith(f"pfxab {command}: error: dir={str(out)!r} is invalid (")
    assert "allowed: a finished sweep directory" in line
    assert not (tmp_path / "f.png").exists()


def test_tables_that_do_not_match_the_grid_are_rewritten(finished, capsys):
    config, out = finished
    runs = pd.read_parquet(out / "runs.parquet")
    runs.iloc[:5].to_parquet(out / "runs.parquet", index=False)
    assert sweep(config, out) == 0
    expected = {run_id(c) for c in load_experiment(config).configs}
    assert set(pd.read_parquet(out / "runs.parquet")["run_id"]) == expected


def test_the_sweep_keeps_other_files_in_its_directory(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert sweep(write_config(tmp_path, TINY.format(seeds="[0]")), out, "--workers", "1") == 0
    assert (out / "notes.txt").read_text() == "mine"


def _halve_first_regret(text: str) -> str:
    frame = pd.read_csv(io.StringIO(text))
    frame.loc[0, "regret"] /= 2
    return frame.to_csv(index=False)


#: The attack's damage to run files, each of which still parsed or was never read, so the rerun said
#: "all runs already complete" and rebuilt the tables from them (7.826 ± 3.834 instead of 9.39 ± 0).
SILENT_DAMAGE = {
    "grid curve cut at a line": ("grid_curve.csv", lambda text: "".join(text.splitlines(True)[:-40])),
    "grid curve cut mid-number": ("grid_curve.csv", lambda text: text.rstrip("\n")[:-3]),
    "a regret halved in a CSV": ("clients.csv", _halve_first_regret),
    "summary regret edited": ("summary.json", lambda text: json.dumps({**json.loads(text),
                                                                       "regret": json.loads(text)["regret"] / 2})),
    "clients.csv deleted": ("clients.csv", None),
    "curve.csv replaced by garbage": ("curve.csv", lambda text: "t,regret\n1,x\n"),
}


def test_runs_damaged_in_every_way_are_redone_and_the_tables_equal_an_undamaged_sweeps(finished, capsys):
    config, out = finished
    before_runs, before_curves = pd.read_parquet(out / "runs.parquet"), pd.read_parquet(out / "curves.parquet")
    victims = {}
    for (damage, (name, edit)), rid in zip(SILENT_DAMAGE.items(), sorted(before_runs["run_id"]), strict=False):
        path = out / "runs" / rid / name
        if edit is None:
            path.unlink()
        else:
            path.write_text(edit(path.read_text()))
        victims[rid] = damage
    assert len(victims) == len(SILENT_DAMAGE) == 6
    capsys.readouterr()
    assert sweep(config, out) == 0
    captured = capsys.readouterr()
    warning = captured.err.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith("pfxab sweep: warning: 6 run(s) in "), captured.err
    assert "2 of 8 runs to do" not in captured.out and "6 of 8 runs to do (2 already complete)" in captured.out
    assert last_invocation(out)["runs_executed"] == 6  # exactly the damaged ones
    after_runs, after_curves = pd.read_parquet(out / "runs.parquet"), pd.read_parquet(out / "curves.parquet")
    numbers = [c for c in after_runs.columns if c != "wall_seconds"]
    pd.testing.assert_frame_equal(before_runs[numbers], after_runs[numbers])
    pd.testing.assert_frame_equal(before_curves, after_curves)  # every row back (1,240 of 1,620 before)
    for rid in victims:
        assert verify(out / "runs" / rid, RUN_FILES) is None
    assert sweep(config, out) == 0 and capsys.readouterr().err == ""


def test_a_damaged_run_is_not_used_for_the_tables(finished, capsys):
    """Consolidation reads only verified runs: a run damaged after the check is refused, never averaged."""
    config, out = finished
    rid = pd.read_parquet(out / "runs.parquet")["run_id"].iloc[0]
    path = out / "runs" / rid / "grid_curve.csv"
    path.write_text(path.read_text().replace("\n1,", "\n1.5,", 1) + "")
    with pytest.raises(ConfigError, match=rf"run {rid} in .* is invalid \(grid_curve.csv (has|was changed)"):
        consolidate(load_experiment(config), out)


# -- issue 37, class 7: a damaged file is judged by its size before it is read -----------------------------------


def test_a_run_file_of_50_gb_is_redone_without_being_read(finished, capsys):
    """Resume read a run's whole ``summary.json`` before checking its size: a 50 GB sparse file was a MemoryError
    on every resume; a ``sweep.json`` or ``comparison.json`` of 50 GB too."""
    import tracemalloc

    config, out = finished
    victim = out / "runs" / pd.read_parquet(out / "runs.parquet")["run_id"].iloc[0]
    os.truncate(victim / "summary.json", 50 << 30)  # sparse: no disk used, 50 GB to read
    os.truncate(out / "sweep.json", 50 << 30)
    capsys.readouterr()
    tracemalloc.start()
    try:
        assert sweep(config, out) == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 << 20  # what a run and its tables take, not the 50 GB file
    assert f"{victim.name}: summary.json has 53687091200 bytes, not the " in capsys.readouterr().err
    assert verify(victim, RUN_FILES) is None and (out / "sweep.json").stat().st_size < 1 << 20


def test_a_comparison_description_of_50_gb_is_one_line(tmp_path, capsys):
    from pfxab_flower.simulations.cli.main import main

    assert main(["compare", "--num-clients", "3", "--horizon", "2000", "--seeds", "0-1", "--no-progress", "--out",
                 str(tmp_path / "C"), *CHEAP_ALGORITHMS_FLAG]) == 0
    os.truncate(tmp_path / "C" / "comparison.json", 50 << 30)
    capsys.readouterr()
    assert main(["report", str(tmp_path / "C")]) == 2
    assert "comparison.json is unreadable: ValueError: comparison.json holds more than 1,048,576 bytes" in \
        capsys.readouterr().err
