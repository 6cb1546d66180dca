"""Issue 47 (the fourth attack), classes 1-3, 9 and 15: a result goes where its path was checked, or is printed.

A sweep holds its directory by handle from the check to the last write (moved, its files follow it;
removed, it stops; never written into what took its name); ``--replace`` removes only what manifests
list, at every depth; a run or comparison whose ``--out`` changed under it prints its result and says
what was not written; a sweep's tables carry checksums; a lock is named after whoever holds it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import pfxab_flower.simulations.experiments.sweep as sweep_module
from pfxab_flower.errors import ConfigError
from pfxab_flower.printable import shown
from pfxab_flower.simulations.cli.main import main
from pfxab_flower.simulations.experiments.sweep import sweep_lock
from pfxab_flower.storage.manifest import read_manifest
from pfxab_flower.storage.outputs import clear_result
from tests.test_sweep import TINY, write_config

RUN_ARGS = ("--num-clients", "3", "--horizon", "2000")
COMPARE_ARGS = ("--num-clients", "3", "--horizon", "2000", "--seeds", "0-1", "--no-progress", "--algorithms",
                "pf-xab,fed-pne")


def digests(directory: Path) -> dict[str, str]:
    """Every file below ``directory`` by relative path, with its sha256 (the victim's fingerprint)."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def sweep_into(config: Path, out: Path, *extra: str) -> int:
    return main(["sweep", str(config), "--out", str(out), "--no-progress", "--workers", "1", *extra])


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("attack4")
    assert sweep_into(write_config(root, TINY.format(seeds="[0]")), root / "S") == 0
    return root / "S"


@pytest.fixture
def sweep_copy(finished_sweep, tmp_path) -> Path:
    shutil.copytree(finished_sweep, tmp_path / "S")
    return tmp_path / "S"


def during_the_sweep(monkeypatch, after_runs: int, act) -> None:
    """Call ``act()`` once, as the sweep's ``after_runs``-th run ends (the runs are computed in this process)."""
    real, calls = sweep_module.run_files, []

    def run_files(*args, **kwargs):
        calls.append(1)
        if len(calls) == after_runs + 1:
            act()
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep_module, "run_files", run_files)


# --- class 1: a sweep's directory moved or removed while it runs ----------------------------------------------------


def test_a_sweep_whose_directory_is_moved_writes_into_the_moved_directory_never_into_what_took_its_name(
        tmp_path, monkeypatch, capsys, finished_sweep):
    """Before: the sweep kept writing by path, into whatever had the name (another sweep's locked directory: its
    runs.parquet was rewritten); the moved directory held only its config and manifest."""
    out, moved, victim = tmp_path / "S", tmp_path / "S-moved", tmp_path / "victim"
    shutil.copytree(finished_sweep, victim)
    before = digests(victim)
    locked: list[object] = []

    def move_and_put_a_locked_sweep_in_its_place():
        os.rename(out, moved)
        os.rename(victim, out)  # another sweep's directory, held by that sweep
        locked.append(sweep_lock(out))
        locked[0].__enter__()  # type: ignore[attr-defined]

    during_the_sweep(monkeypatch, 2, move_and_put_a_locked_sweep_in_its_place)
    config = write_config(tmp_path, TINY.format(seeds="[0]"))
    capsys.readouterr()
    try:
        assert sweep_into(config, out) == 0
    finally:
        locked[0].__exit__(None, None, None)  # type: ignore[attr-defined]
    err = capsys.readouterr().err
    assert f"the directory was moved to {moved} while the sweep ran" in err
    pinned = {name: digest for name, digest in digests(out).items() if name != ".pfxab-sweep.lock"}
    assert pinned == {name: digest for name, digest in before.items() if name != ".pfxab-sweep.lock"}
    runs = pd.read_parquet(moved / "runs.parquet")  # the whole sweep, in the moved directory
    assert len(runs) == 4 and sorted(os.listdir(moved / "runs")) == sorted(runs["run_id"])


def test_a_sweep_whose_directory_is_removed_stops_with_one_line_and_writes_nowhere(tmp_path, monkeypatch, capsys):
    """Before: the sweep went on writing by path (recreating runs/ at the name)."""
    out = tmp_path / "S"
    during_the_sweep(monkeypatch, 1, lambda: shutil.rmtree(out))
    capsys.readouterr()
    assert sweep_into(write_config(tmp_path, TINY.format(seeds="[0]")), out) == 2
    captured = capsys.readouterr()
    line = captured.err.strip()
    assert line.count("\n") == 0 and "Traceback" not in captured.err, captured.err
    assert "it was removed while the sweep ran; nothing more was written, nowhere else" in line
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["tiny.toml"]


def test_a_sweep_refuses_a_directory_that_changed_between_its_check_and_its_start(tmp_path, monkeypatch, capsys):
    """The path is checked first; if another directory takes the name before the sweep holds it, nothing is written."""
    from pfxab_flower.simulations.cli.commands import sweep as command

    out, elsewhere = tmp_path / "S", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mine.txt").write_text("kept")
    real = command.PathIdentity.of

    def check_then_swap(path):
        identity = real(path)
        os.rename(elsewhere, out)  # another program makes the name between the check and the sweep's start
        return identity

    monkeypatch.setattr(command.PathIdentity, "of", check_then_swap)
    capsys.readouterr()
    assert sweep_into(write_config(tmp_path, TINY.format(seeds="[0]")), out) == 2
    assert "something was made at that name by another program after it was checked" in capsys.readouterr().err
    assert sorted(os.listdir(out)) == ["mine.txt"]


# --- class 2: --replace removes only what manifests list, at every depth ---------------------------------------------


@pytest.mark.parametrize("command", ["run", "compare"])
def test_replace_over_a_sweep_never_removes_a_users_file_inside_its_runs(sweep_copy, capsys, command):
    """Before: ``run/compare --out S --replace`` over a finished sweep deleted the user's files inside ``S/runs/``."""
    (sweep_copy / "runs" / "notes.txt").write_text("my notes")
    inner = next(p for p in (sweep_copy / "runs").iterdir() if p.is_dir())
    (inner / "plot-draft.png").write_bytes(b"mine")
    before = digests(sweep_copy)
    args = ("run", *RUN_ARGS) if command == "run" else ("compare", *COMPARE_ARGS)
    capsys.readouterr()
    assert main([*args, "--out", str(sweep_copy), "--replace"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1  # refused before the work
    assert f"'runs/{inner.name}/plot-draft.png' there is not one pfxab wrote" in captured.err
    assert "(2 such entries)" in captured.err
    assert digests(sweep_copy) == before


def test_clearing_a_result_refuses_before_removing_anything_when_a_users_file_lies_deep(sweep_copy):
    (sweep_copy / "runs" / "data").mkdir()
    (sweep_copy / "runs" / "data" / "raw.csv").write_text("1,2\n")
    before = digests(sweep_copy)
    with pytest.raises(ConfigError, match=r"'runs/data' there is not one pfxab wrote"):
        clear_result(sweep_copy)
    assert digests(sweep_copy) == before


def test_replace_still_replaces_a_sweep_that_holds_only_what_pfxab_wrote(sweep_copy, capsys):
    leftover = next(p for p in (sweep_copy / "runs").iterdir() if p.is_dir()).name
    (sweep_copy / "runs" / f".{leftover}.k2x_9q0a.pfxab-tmp").mkdir()  # a killed writer's temporary: ours
    assert main(["run", *RUN_ARGS, "--out", str(sweep_copy), "--replace"]) == 0
    assert not (sweep_copy / "runs").exists() and (sweep_copy / "summary.json").is_file()


# --- class 3: a result that cannot be written where it was checked is printed ----------------------------------------


def _during_the_run(monkeypatch, act) -> None:
    import pfxab_flower.running.engine as engine

    real = engine.run_config

    def run_then_act(*args, **kwargs):
        result = real(*args, **kwargs)
        act()
        return result

    monkeypatch.setattr(engine, "run_config", run_then_act)


def _during_the_comparison(monkeypatch, act) -> None:
    import pfxab_flower.studies.comparison as comparison

    real = comparison.compare

    def compare_then_act(*args, **kwargs):
        result = real(*args, **kwargs)
        act()
        return result

    monkeypatch.setattr(comparison, "compare", compare_then_act)


def _changes(case: str, out: Path):
    def user_file():
        (out / "draft.txt").write_text("mine")

    def moved_and_recreated():
        os.rename(out, out.with_name("R-moved"))
        out.mkdir()

    def moved_and_another_result_in_its_place():
        os.rename(out, out.with_name("R-moved"))
        shutil.copytree(out.with_name("R-moved"), out)

    def parent_moved():
        os.rename(out.parent, out.parent.with_name(out.parent.name + "-moved"))
        out.parent.mkdir()

    def link_to_another():
        os.rename(out, out.with_name("R-moved"))
        (out.parent / "elsewhere").mkdir()
        (out.parent / "elsewhere" / "keep.txt").write_text("mine")
        os.symlink(out.parent / "elsewhere", out)

    def parent_removed():
        shutil.rmtree(out.parent)

    def replaced_by_a_file():
        shutil.rmtree(out)
        out.write_text("a file of mine")

    return {"a user's file appears in it": user_file, "moved and recreated": moved_and_recreated,
            "moved, a copy put in its place": moved_and_another_result_in_its_place,
            "its parent moved and recreated": parent_moved, "moved, a link to another directory put in its place":
            link_to_another, "its parent removed": parent_removed, "replaced by a file": replaced_by_a_file}[case]


CHANGES = ["a user's file appears in it", "moved and recreated", "moved, a copy put in its place",
           "its parent moved and recreated", "moved, a link to another directory put in its place",
           "its parent removed", "replaced by a file"]


@pytest.mark.parametrize("case", CHANGES)
def test_a_run_whose_out_changed_under_it_prints_its_result_and_one_line(tmp_path, monkeypatch, capsys, case):
    """Before: the finished run was thrown away, nothing printed even with ``--json``, exit 2."""
    out = tmp_path / "work" / "R"
    out.parent.mkdir()
    assert main(["run", *RUN_ARGS, "--seed", "1", "--out", str(out)]) == 0  # an older result of ours
    _during_the_run(monkeypatch, _changes(case, out))
    capsys.readouterr()
    assert main(["run", *RUN_ARGS, "--json", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    summary = json.loads(captured.out)  # the result, whole, on stdout
    assert summary["seed"] == 0 and summary["regret"] > 0
    line = captured.err.strip()
    assert line.count("\n") == 0 and "not written: clients.csv," in line and "the result is printed on stdout" in line
    if case == "a user's file appears in it":
        assert (out / "draft.txt").read_text() == "mine"
    if case.startswith("moved"):
        assert json.loads((out.with_name("R-moved") / "summary.json").read_text())["seed"] == 1
    if case == "moved, a link to another directory put in its place":
        assert sorted(os.listdir(out.parent / "elsewhere")) == ["keep.txt"]
    if case == "its parent removed":
        assert not out.parent.exists()  # not made again
    if case == "replaced by a file":
        assert out.read_text() == "a file of mine"


@pytest.mark.parametrize("case", [CHANGES[0], CHANGES[1], CHANGES[4], CHANGES[5], CHANGES[6]])
def test_a_comparison_whose_out_changed_under_it_prints_its_table_and_one_line(tmp_path, monkeypatch, capsys, case):
    out = tmp_path / "work" / "C"
    out.parent.mkdir()
    assert main(["compare", *COMPARE_ARGS, "--out", str(out)]) == 0
    _during_the_comparison(monkeypatch, _changes(case, out))
    capsys.readouterr()
    assert main(["compare", *COMPARE_ARGS, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "\npf-xab " in captured.out and "\nfed-pne " in captured.out  # the table, whole
    assert captured.err.count("\n") == 1 and "not written: comparison.json" in captured.err


# --- class 15: small ones ---------------------------------------------------------------------------------------------


def test_a_sweep_directory_locked_by_another_program_names_that_program(sweep_copy, capsys):
    """Before: another program's lock (beside a pid file naming pid 1) was "another pfxab sweep, pid 1"."""
    (sweep_copy / ".pfxab-sweep.lock").write_text("1\n")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(sweep_copy)!r}, os.O_RDONLY)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        capsys.readouterr()
        assert sweep_into(write_config(sweep_copy.parent, TINY.format(seeds="[0]")), sweep_copy) == 2
        err = capsys.readouterr().err
        assert f"another program, pid {holder.pid} (" in err and "holds a lock on it" in err
        assert "pfxab sweep, pid 1" not in err
    finally:
        holder.kill()
        holder.wait()


def test_a_live_sweep_is_still_named_as_one(sweep_copy, capsys):
    with sweep_lock(sweep_copy):
        capsys.readouterr()
        assert main(["run", *RUN_ARGS, "--out", str(sweep_copy / "x")]) == 2
        assert f"another pfxab sweep, pid {os.getpid()}, is writing" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["a\x1b]0;owned\x07b", "two\nlines", "bell\x07", "rtl\u202eevil"])
def test_an_out_with_escapes_or_newlines_is_echoed_as_one_printable_line(tmp_path, capsys, name):
    """Before: ``--out`` was echoed raw (an OSC title sequence reached the terminal, a newline split the line)."""
    out = tmp_path / name
    capsys.readouterr()
    assert main(["run", *RUN_ARGS, "--json", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.isprintable() is False  # only the final newline is not printable
    assert err[:-1].isprintable() and "pfxab run: wrote " in err
    (out / "user.txt").write_text("x")  # now refused: the error line is one printable line too
    assert main(["run", *RUN_ARGS, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err[:-1].isprintable()


def test_a_lock_file_pid_without_a_lock_lets_the_sweep_in(sweep_copy, capsys):
    """A stale pid file (its sweep was SIGKILLed) holds nothing: the flock is what counts."""
    (sweep_copy / ".pfxab-sweep.lock").write_text("1\n")
    fd = os.open(sweep_copy, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # nobody holds it exclusively
    finally:
        os.close(fd)
    assert sweep_into(write_config(sweep_copy.parent, TINY.format(seeds="[0]")), sweep_copy) == 0
    assert read_manifest(sweep_copy) is not None


# --- class 9: a sweep's consolidated tables are checksummed ----------------------------------------------------------


def _edited_regret(directory: Path) -> float:
    """Halve one run's regret in ``runs.parquet`` (a valid table, every column and run id in place)."""
    runs = pd.read_parquet(directory / "runs.parquet")
    runs.loc[0, "regret"] = runs.loc[0, "regret"] / 2
    runs.to_parquet(directory / "runs.parquet", index=False)
    return float(runs.loc[0, "regret"])


def test_an_edited_runs_table_is_refused_by_report_and_plot(sweep_copy, capsys):
    """Before: an edited runs.parquet was reported as it was (the comparison's tables had checksums, a sweep's none)."""
    _edited_regret(sweep_copy)
    for command in (["report", str(sweep_copy)], ["plot", str(sweep_copy), "--out", str(sweep_copy.parent / "f.png")]):
        capsys.readouterr()
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "runs.parquet was changed after it was written (sha256 differs)" in err


def test_a_resume_rebuilds_an_edited_table_from_the_runs(sweep_copy, capsys):
    """Before: a resume kept the edited table ("all runs already complete")."""
    original = pd.read_parquet(sweep_copy / "runs.parquet")
    edited = _edited_regret(sweep_copy)
    assert sweep_into(write_config(sweep_copy.parent, TINY.format(seeds="[0]")), sweep_copy) == 0
    rebuilt = pd.read_parquet(sweep_copy / "runs.parquet")
    assert rebuilt.loc[0, "regret"] != edited
    numbers = [c for c in original.columns if c != "wall_seconds"]
    pd.testing.assert_frame_equal(original[numbers], rebuilt[numbers])
    assert main(["report", str(sweep_copy)]) == 0


def test_the_manifest_records_both_tables(finished_sweep):
    manifest = read_manifest(finished_sweep)
    assert manifest is not None and set(manifest.checksums) == {"runs.parquet", "curves.parquet"}
    assert manifest.kind == "sweep"


# --- the re-attack: user text echoed by every command is one printable line -----------------------------------------

ESCAPES = ["osc-title\x1b]0;owned\x07", "two\nlines", "bidi\u202eevil"]


def _one_printable_line_each(text: str) -> bool:
    return all(line.isprintable() for line in text.splitlines()) and "\x1b" not in text and "\x07" not in text


@pytest.mark.parametrize("name", ESCAPES)
def test_compare_sweep_and_plot_echo_a_hostile_out_escaped(tmp_path, capsys, name):
    """Before: compare's and sweep's 'wrote ...' and plot's 'wrote ...' echoed the name raw."""
    config = write_config(tmp_path, TINY.format(seeds="[0]"))
    capsys.readouterr()
    assert main(["compare", *COMPARE_ARGS, "--out", str(tmp_path / f"c{name}")]) == 0
    assert sweep_into(config, tmp_path / f"s{name}") == 0
    assert main(["plot", str(tmp_path / f"s{name}"), "--out", str(tmp_path / f"p{name}.png")]) == 0
    captured = capsys.readouterr()
    assert _one_printable_line_each(captured.out) and _one_printable_line_each(captured.err)
    assert shown(name) in captured.err and shown(name) in captured.out  # named, escaped


@pytest.mark.parametrize("where", ["a [fixed] key", "the experiment's name", "the file's name", "a [grid] key"])
def test_a_sweep_file_with_escapes_is_echoed_escaped(tmp_path, capsys, where):
    """Before: an unknown key ``"\\u001b[2J" = 1`` cleared the terminal through the error line; an experiment
    named with an escape set the window title; a file name with a newline split the error line."""
    text, name = TINY.format(seeds="[0]"), "tiny.toml"
    if where == "a [fixed] key":
        text = text.replace("[fixed]\n", '[fixed]\n"\\u001b[2J" = 1\n')
    elif where == "a [grid] key":
        text = text.replace("[grid]\n", '[grid]\n"x\\ny" = [1]\n')
    elif where == "the experiment's name":
        text = text.replace('name = "tiny"', 'name = "tiny\\u001b]0;owned\\u0007"')
    else:
        name, text = "bad\nname.toml", "not toml ["
    config = write_config(tmp_path, text, name)
    capsys.readouterr()
    status = sweep_into(config, tmp_path / "S")
    captured = capsys.readouterr()
    assert status == (0 if where == "the experiment's name" else 2)
    assert _one_printable_line_each(captured.out) and _one_printable_line_each(captured.err), captured
    assert "Traceback" not in captured.err and (status == 0 or captured.err.count("\n") == 1)


def test_a_resume_never_follows_a_run_directory_that_is_a_link(sweep_copy, capsys):
    run = next(p for p in sorted((sweep_copy / "runs").iterdir()) if p.is_dir())
    users = sweep_copy.parent / "users"
    users.mkdir()
    (users / "data.csv").write_text("1,2")
    shutil.rmtree(run)
    run.symlink_to(users)
    capsys.readouterr()
    assert sweep_into(write_config(sweep_copy.parent, TINY.format(seeds="[0]")), sweep_copy) == 1
    assert "it exists and is not a directory" in capsys.readouterr().err
    assert sorted(os.listdir(users)) == ["data.csv"] and run.is_symlink()


@pytest.mark.parametrize("plant", ["a file", "a directory", "a link"])
def test_a_resume_never_removes_what_a_user_put_in_a_run_it_redoes(sweep_copy, capsys, plant):
    """Before: redoing a damaged run replaced its directory whole, a user's notes in it included."""
    run = next(p for p in sorted((sweep_copy / "runs").iterdir()) if p.is_dir())
    (run / "summary.json").write_text("{}")  # damaged: the resume redoes it
    if plant == "a file":
        (run / "notes.txt").write_text("my notes")
    elif plant == "a directory":
        (run / "mine").mkdir()
        (run / "mine" / "a.csv").write_text("1")
    else:
        os.symlink("/etc/hostname", run / "link")
    before = {name: digest for name, digest in digests(run).items() if name != "summary.json"}
    capsys.readouterr()
    assert sweep_into(write_config(sweep_copy.parent, TINY.format(seeds="[0]")), sweep_copy) == 1
    err = capsys.readouterr().err
    assert f"pfxab sweep: run {run.name} failed: " in err and "there is not one of them; pfxab never replaces" in err
    assert {name: digest for name, digest in digests(run).items() if name != "summary.json"} == before


# --- the re-attack: a directory taken between the last check and the swap ---------------------------------------------


@pytest.mark.parametrize("existed", [False, True])
def test_a_result_directory_taken_while_the_result_is_written_is_never_written_over(tmp_path, monkeypatch, existed):
    """Before: two ``pfxab run --out R`` into one new R, finishing together, both exited 0 and the first result was
    replaced by the second (each had checked R before the other wrote). The swap itself is now conditional
    (``renameat2`` with RENAME_NOREPLACE, or an exchange undone when what came out is not what was checked)."""
    import pfxab_flower.storage.outputs as outputs

    target = tmp_path / "R"
    if existed:
        outputs.write_files_atomically(target, {"summary.json": "{}"}, kind="run")
    checked = outputs.PathIdentity.of(target)
    real, taken = outputs.write_bytes_synced, []

    def write_then_another_takes_the_name(path, data):
        real(path, data)
        if not taken:
            taken.append(1)
            if existed:
                os.rename(target, tmp_path / "R-first")
            target.mkdir()
            (target / "theirs.txt").write_text("another writer's result")

    monkeypatch.setattr(outputs, "write_bytes_synced", write_then_another_takes_the_name)
    with pytest.raises(ConfigError, match="after it was checked"):
        outputs.write_files_atomically(target, {"summary.json": '{"mine": 1}'}, kind="run", checked=checked)
    assert sorted(os.listdir(target)) == ["theirs.txt"] and (target / "theirs.txt").read_text().startswith("another")
    assert [p.name for p in tmp_path.iterdir() if "pfxab-tmp" in p.name] == []



SWEEP_CHANGES = {
    "its parent moved": lambda out: os.rename(out.parent, out.parent.with_name(out.parent.name + "-moved")),
    "replaced by a link to a user's directory": lambda out: (
        os.rename(out, out.with_name("S-moved")), (out.parent / "users").mkdir(),
        (out.parent / "users" / "data.csv").write_text("1"), os.symlink(out.parent / "users", out)),
    "its runs/ moved away": lambda out: os.rename(out / "runs", out.parent / "my-runs"),
    "runs.parquet made a link to a user's file": lambda out: (
        (out.parent / "mine.parquet").write_bytes(b"my table"), os.symlink(out.parent / "mine.parquet",
                                                                          out / "runs.parquet")),
}


@pytest.mark.parametrize("change", list(SWEEP_CHANGES))
def test_a_sweep_whose_directory_changes_under_it_writes_only_into_its_own(tmp_path, monkeypatch, capsys, change):
    work = tmp_path / "work"
    work.mkdir()
    out = work / "S"
    during_the_sweep(monkeypatch, 2, lambda: SWEEP_CHANGES[change](out))
    config = write_config(tmp_path, TINY.format(seeds="[0]"))
    capsys.readouterr()
    status = sweep_into(config, out)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if change == "its parent moved":
        moved = tmp_path / "work-moved" / "S"
        assert status == 0 and not work.exists() and len(pd.read_parquet(moved / "runs.parquet")) == 4
        assert f"the directory was moved to {moved}" in err
    elif change == "replaced by a link to a user's directory":
        assert status == 0 and sorted(os.listdir(tmp_path / "work" / "users")) == ["data.csv"]
        assert len(pd.read_parquet(work / "S-moved" / "runs.parquet")) == 4
    elif change == "its runs/ moved away":
        assert status == 2 and err.count("\n") == 1 and len(list((work / "my-runs").glob("garland-*"))) == 2
        assert sweep_into(config, out) == 0  # the resume redoes what went with the user
    else:
        assert status == 0 and (work / "mine.parquet").read_bytes() == b"my table"


REPLACE_PLANTS = {
    "a link inside runs/": lambda s: os.symlink("/etc/hostname", s / "runs" / "link"),
    "a FIFO inside runs/": lambda s: os.mkfifo(s / "runs" / "pipe"),
    "a directory named like a run, without a manifest": lambda s: (
        (s / "runs" / "garland-pf-xab-a0.5-s9-000000000000").mkdir(),
        (s / "runs" / "garland-pf-xab-a0.5-s9-000000000000" / "x").write_text("mine")),
}


@pytest.mark.parametrize("plant", list(REPLACE_PLANTS))
def test_replace_refuses_every_kind_of_entry_it_did_not_write_at_any_depth(sweep_copy, capsys, plant):
    REPLACE_PLANTS[plant](sweep_copy)
    before = digests(sweep_copy)
    capsys.readouterr()
    assert main(["compare", *COMPARE_ARGS, "--out", str(sweep_copy), "--replace"]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and digests(sweep_copy) == before


def test_a_sweep_replace_over_a_comparison_keeps_a_users_file(tmp_path, capsys):
    comparison = tmp_path / "C"
    assert main(["compare", *COMPARE_ARGS, "--out", str(comparison)]) == 0
    (comparison / "notes.md").write_text("mine")
    before = digests(comparison)
    capsys.readouterr()
    assert sweep_into(write_config(tmp_path, TINY.format(seeds="[0]")), comparison, "--replace") == 2
    assert "'notes.md' there is not one pfxab wrote" in capsys.readouterr().err and digests(comparison) == before


TABLE_DAMAGE = {
    "runs.parquet lost its last byte": lambda s: (s / "runs.parquet").write_bytes(
        (s / "runs.parquet").read_bytes()[:-1]),
    "runs.parquet's wall times changed": lambda s: pd.read_parquet(s / "runs.parquet").assign(
        wall_seconds=lambda f: f["wall_seconds"] + 1).to_parquet(s / "runs.parquet", index=False),
    "curves.parquet lost its last rows": lambda s: pd.read_parquet(s / "curves.parquet").iloc[:-5].to_parquet(
        s / "curves.parquet", index=False),
    "runs.parquet a link to a copy of itself": lambda s: (
        shutil.copy(s / "runs.parquet", s.parent / "copy.parquet"), (s / "runs.parquet").unlink(),
        os.symlink(s.parent / "copy.parquet", s / "runs.parquet")),
    "the manifest lost the tables' checksums": lambda s: (s / "pfxab-manifest.json").write_text(json.dumps(
        {**json.loads((s / "pfxab-manifest.json").read_text()), "files": {}})),
}


@pytest.mark.parametrize("damage", list(TABLE_DAMAGE))
def test_every_kind_of_table_damage_is_one_line_and_a_resume_heals_it(sweep_copy, capsys, damage):
    TABLE_DAMAGE[damage](sweep_copy)
    capsys.readouterr()
    assert main(["report", str(sweep_copy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("runs.parquet" in err or "curves.parquet" in err)
    config = write_config(sweep_copy.parent, TINY.format(seeds="[0]"))
    if damage == "runs.parquet a link to a copy of itself":  # a link at its name is the user's: never replaced
        copy = (sweep_copy.parent / "copy.parquet").read_bytes()
        assert sweep_into(config, sweep_copy) == 2 and (sweep_copy.parent / "copy.parquet").read_bytes() == copy
        return
    assert sweep_into(config, sweep_copy) == 0
    assert main(["report", str(sweep_copy)]) == 0


@pytest.mark.parametrize("pid_file", [os.urandom(10240), None])
def test_a_lock_of_another_program_is_named_whatever_its_pid_file_holds(sweep_copy, capsys, pid_file):
    if pid_file is None:
        (sweep_copy / ".pfxab-sweep.lock").unlink()
    else:
        (sweep_copy / ".pfxab-sweep.lock").write_bytes(pid_file)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(sweep_copy)!r}, os.O_RDONLY)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        capsys.readouterr()
        assert main(["run", *RUN_ARGS, "--out", str(sweep_copy / "x")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"another program, pid {holder.pid} (" in err
    finally:
        holder.kill()
        holder.wait()


def test_a_run_whose_out_a_sweep_took_meanwhile_prints_its_result(tmp_path, monkeypatch, capsys):
    """Before: the run's files were refused (a live sweep holds the directory) and nothing was printed."""
    out = tmp_path / "S"
    holding = []
    _during_the_run(monkeypatch, lambda: (out.mkdir(), holding.append(sweep_lock(out)), holding[0].__enter__()))
    capsys.readouterr()
    try:
        assert main(["run", *RUN_ARGS, "--json", "--out", str(out / "r")]) == 2
    finally:
        holding[0].__exit__(None, None, None)
    captured = capsys.readouterr()
    assert json.loads(captured.out)["num_clients"] == 3 and "is writing" in captured.err and not (out / "r").exists()


def test_a_write_through_a_held_directory_that_was_removed_fails_and_makes_nothing(tmp_path):
    """Through ``/proc/self/fd/N`` a removed directory cannot take a file; resolved first, its path would have been
    ``.../S (deleted)/runs/...``, a directory to make anew beside the one removed."""
    from pfxab_flower.storage.identity import HeldDirectory
    from pfxab_flower.storage.outputs import OutputError, write_files_atomically

    (tmp_path / "S" / "runs").mkdir(parents=True)
    held = HeldDirectory(tmp_path / "S")
    try:
        shutil.rmtree(tmp_path / "S")
        assert held.removed() and held.where() is None
        with pytest.raises(OutputError, match="could not be written"):
            write_files_atomically(held.via / "runs" / "r", {"summary.json": "{}"}, kind="sweep-run", replace_all=True)
    finally:
        held.close()
    assert os.listdir(tmp_path) == []
