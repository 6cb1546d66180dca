"""Outputs never clobber what is not pfxab's: devices, FIFOs, links, /proc, and a user's files of any name.

Every writer (run, compare, sweep, plot, report, landmine-table, simulate) refuses such a target
with one line before any work, and touches only the names its manifest lists.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from pfxab_flower.errors import ConfigError
from pfxab_flower.problems.landmine_table import PACKAGE_TABLE
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.simulations.cli.main import main
from pfxab_flower.simulations.experiments.sweep import LOCK_FILE, sweep_lock
from pfxab_flower.storage.manifest import MANIFEST_NAME, read_manifest, verify
from pfxab_flower.storage.outputs import write_files_atomically
from pfxab_flower.studies.comparison import compare
from tests.conftest import CHEAP_ALGORITHMS_FLAG, cli_error_line
from tests.patience import patient
from tests.test_sweep import TINY, write_config

SMALL_RUN = ("--problem", "garland", "--num-clients", "3", "--horizon", "5000")
LONG_NAME = "d" * 300


def error_line(capsys, *args: str) -> str:
    """``pfxab ARGS`` in this process (faster than :func:`cli_error_line`, same contract): its one error line."""
    capsys.readouterr()
    assert main(list(args)) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured
    return captured.err.strip()


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def is_fifo(path: Path) -> bool:
    return stat.S_ISFIFO(os.lstat(path).st_mode)


# --- single files: landmine-table --output, plot --out ---------------------------------------------------------


@pytest.mark.parametrize("case", ["/dev/full", "/proc", "a FIFO", "a link out of the directory", "a user's file",
                                  "a directory", "a name too long"])
def test_landmine_table_refuses_what_is_not_its_table_before_fitting(tmp_path, capsys, case):
    """``--output /dev/full`` printed "wrote /dev/full" and replaced the device; ``/proc/x.npz`` failed after
    all the fitting. Now each is one line; the fitting never starts (no data file is even looked for)."""
    victim = tmp_path / "thesis.npz"
    victim.write_bytes(b"my own archive")
    target = {
        "/dev/full": lambda: "/dev/full",
        "/proc": lambda: "/proc/x.npz",
        "a FIFO": lambda: str(fifo(tmp_path / "pipe.npz")),
        "a link out of the directory": lambda: (tmp_path / "out").mkdir() or (
            (tmp_path / "out" / "t.npz").symlink_to(victim) or str(tmp_path / "out" / "t.npz")),
        "a user's file": lambda: str(victim),
        "a directory": lambda: (tmp_path / "d.npz").mkdir() or str(tmp_path / "d.npz"),
        "a name too long": lambda: str(tmp_path / (LONG_NAME + ".npz")),
    }[case]()
    line = error_line(capsys, "landmine-table", "--output", target, "--landmine-data", str(tmp_path / "absent.mat"))
    assert line.startswith(f"pfxab landmine-table: error: --output='{target[:60]}")
    assert "allowed: a file name ending in .npz" in line
    assert victim.read_bytes() == b"my own archive"
    assert Path("/dev/full").is_char_device()
    if case == "a FIFO":
        assert is_fifo(tmp_path / "pipe.npz")


def test_landmine_table_may_replace_its_own_table(tmp_path):
    from pfxab_flower.problems.landmine_table import is_reward_table
    from pfxab_flower.storage.outputs import check_output_file

    copy = tmp_path / "table.npz"
    copy.write_bytes(PACKAGE_TABLE.read_bytes())
    assert check_output_file(copy, (".npz",), name="output", ours=is_reward_table) == copy


@pytest.fixture(scope="module")
def comparison_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cmp") / "cmp"
    compare(RunConfig(num_clients=2, horizon=2000), ["pf-xab"], [0], progress=False).write(out)
    return out


@pytest.mark.parametrize("case", ["a FIFO", "a link to the user's file", "a user's figure", "/proc",
                                  "a name too long"])
def test_plot_refuses_what_is_not_its_figure(comparison_dir, tmp_path, capsys, case):
    victim = tmp_path / "holiday.png"
    victim.write_bytes(b"\x89PNG my photo")
    target = {
        "a FIFO": lambda: fifo(tmp_path / "f.png"),
        "a link to the user's file": lambda: (tmp_path / "l.png").symlink_to(victim) or tmp_path / "l.png",
        "a user's figure": lambda: victim,
        "/proc": lambda: Path("/proc/f.png"),
        "a name too long": lambda: tmp_path / (LONG_NAME + ".png"),
    }[case]()
    line = error_line(capsys, "plot", str(comparison_dir), "--out", str(target))
    assert line.startswith(f"pfxab plot: error: --out='{str(target)[:60]}") and " is invalid" in line
    assert victim.read_bytes() == b"\x89PNG my photo"


def test_plot_replaces_its_own_figure(comparison_dir, tmp_path, capsys):
    figure = tmp_path / "f.png"
    assert main(["plot", str(comparison_dir), "--out", str(figure)]) == 0
    first = figure.read_bytes()
    assert b"pfxab plot" in first  # the mark that makes it recognisably ours
    assert main(["plot", str(comparison_dir), "--out", str(figure)]) == 0


# --- result directories replaced as a unit: run, compare, simulate ----------------------------------------------


@pytest.mark.parametrize("command", ["run", "compare", "simulate"])
@pytest.mark.parametrize("name", [".draft.tmp", "summary.json", ".bashrc.old", MANIFEST_NAME])
def test_a_users_file_of_any_name_in_a_result_directory_is_refused_and_kept(tmp_path, capsys, command, name):
    """``pfxab run --out DIR`` deleted a user's ``.draft.tmp`` (hidden ``.*.tmp`` counted as an old writer's)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / name).write_text("the user's")
    args = {"run": ["run", *SMALL_RUN], "compare": ["compare", *SMALL_RUN, "--seeds", "0", *CHEAP_ALGORITHMS_FLAG],
            "simulate": ["simulate", *SMALL_RUN]}[command]
    line = error_line(capsys, *args, "--out", str(out))
    assert line.startswith(f"pfxab {command}: error: --out='{out}' is invalid ('{name}' there ")
    assert "pfxab never replaces or removes it" in line
    assert (out / name).read_text() == "the user's" and len(list(out.iterdir())) == 1


def test_a_result_directory_of_ours_is_replaced_but_a_link_inside_it_is_refused(tmp_path, capsys):
    out, victim = tmp_path / "out", tmp_path / "precious.txt"
    victim.write_text("keep")
    assert main(["run", *SMALL_RUN, "--out", str(out)]) == 0
    assert verify(out, ["clients.csv", "curve.csv", "phases.csv", "communication.csv", "summary.json"]) is None
    assert main(["run", *SMALL_RUN, "--seed", "1", "--out", str(out)]) == 0  # ours: replaced whole
    (out / "curve.csv").unlink()
    (out / "curve.csv").symlink_to(victim)  # a name we own, but now a link out of the directory
    line = error_line(capsys, "run", *SMALL_RUN, "--out", str(out))
    assert "'curve.csv' there is a link, FIFO, socket or device" in line
    assert victim.read_text() == "keep" and (out / "curve.csv").is_symlink()


def test_the_writer_refuses_too_and_a_squatted_manifest_is_not_ours(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / MANIFEST_NAME).write_text('{"written_by": "someone else"}')
    with pytest.raises(ConfigError, match=rf"'{MANIFEST_NAME}' there is not one pfxab wrote"):
        write_files_atomically(out, {"summary.json": "{}\n"})
    fifo(out / "pipe")
    (out / MANIFEST_NAME).unlink()
    with pytest.raises(ConfigError, match=r"'pipe' there is a link, FIFO, socket or device"):
        write_files_atomically(out, {"summary.json": "{}\n"})
    assert is_fifo(out / "pipe") and read_manifest(out) is None


@pytest.mark.parametrize("command", ["run", "compare", "sweep", "simulate"])
def test_a_name_too_long_is_one_line_before_any_work(tmp_path, command):
    """A 300-character ``--out`` name was ``OSError: [Errno 36] File name too long`` (a traceback)."""
    config = write_config(tmp_path, TINY.format(seeds="[0]"))
    args = {"run": ["run", *SMALL_RUN], "compare": ["compare", *SMALL_RUN, "--seeds", "0", *CHEAP_ALGORITHMS_FLAG],
            "sweep": ["sweep", str(config)], "simulate": ["simulate", *SMALL_RUN]}[command]
    line = cli_error_line(*args, "--out", str(tmp_path / LONG_NAME))
    assert line.startswith(f"pfxab {command}: error: --out='{str(tmp_path)[:20]}")
    assert "a name in it is longer than" in line


# --- a sweep directory, written into: only its own names --------------------------------------------------------


@pytest.mark.parametrize("name", ["config.toml", "runs.parquet", "runs", "sweep.json", LOCK_FILE])
def test_a_sweep_refuses_a_users_file_of_its_names_and_keeps_every_other(tmp_path, capsys, name):
    """A sweep overwrote the user's own ``DIR/config.toml``; now it is one line and nothing is touched."""
    out = tmp_path / "out"
    out.mkdir()
    mine = out / name
    if name == "runs":
        mine.mkdir()
        (mine / "notes").write_text("the user's")
    else:
        mine.write_text("the user's")
    line = error_line(capsys, "sweep", str(write_config(tmp_path, TINY.format(seeds="[0]"))), "--out", str(out))
    assert line.startswith(f"pfxab sweep: error: --out='{out}' is invalid ('{name}' there is not one pfxab wrote")
    assert sorted(p.name for p in out.iterdir()) == [name]  # no manifest, no lock, nothing written
    assert (mine / "notes" if name == "runs" else mine).read_text() == "the user's"


def test_a_lock_that_is_a_link_is_refused_and_its_target_kept(tmp_path, capsys):
    """The lock file was opened through a symbolic link and its target truncated."""
    out, victim = tmp_path / "out", tmp_path / "thesis.tex"
    victim.write_text("years of work")
    config = write_config(tmp_path, TINY.format(seeds="[0]"))
    assert main(["sweep", str(config), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    (out / LOCK_FILE).unlink()
    (out / LOCK_FILE).symlink_to(victim)
    capsys.readouterr()
    assert main(["sweep", str(config), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"'{LOCK_FILE}' there is a link, FIFO, socket or device" in err[0]
    assert victim.read_text() == "years of work"


def test_a_deleted_lock_file_does_not_let_a_second_sweep_in(tmp_path, capsys):
    """The lock was on the file: deleting it let a second sweep take a new one. Now it is on the directory."""
    out = tmp_path / "out"
    config = write_config(tmp_path, TINY.format(seeds="[0]"))
    assert main(["sweep", str(config), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    capsys.readouterr()
    with sweep_lock(out):
        (out / LOCK_FILE).unlink()
        assert main(["sweep", str(config), "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"another program, pid {os.getpid()} (" in err and "holds a lock on it" in err
    assert main(["sweep", str(config), "--out", str(out), "--no-progress"]) == 0


def test_a_sweep_directory_lists_what_it_claims(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["sweep", str(write_config(tmp_path, TINY.format(seeds="[0]"))), "--out", str(out),
                 "--workers", "1", "--no-progress"]) == 0
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert sorted(manifest["owned"]) == sorted(["config.toml", "sweep.json", "runs", "runs.parquet",
                                                "curves.parquet", LOCK_FILE])
    assert "notes.txt" not in manifest["owned"] and (out / "notes.txt").read_text() == "mine"


# --- issue 37, class 1: each command owns its kind of directory -------------------------------------------------

RUN_ARGS = ("--num-clients", "3", "--horizon", "2000")
COMPARE_ARGS = ("--num-clients", "3", "--horizon", "2000", "--seeds", "0-1", "--no-progress", *CHEAP_ALGORITHMS_FLAG)


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


KIND_DIRECTORIES = {"sweep": "S", "run": "R", "comparison": "C"}


@pytest.fixture(scope="module")
def three_kinds_written(tmp_path_factory) -> Path:
    """A sweep, a run and a comparison written once for the module (5 s; each test gets its own copy)."""
    where = tmp_path_factory.mktemp("kinds")
    writers = {**COMMAND_OF, "sweep": ("sweep", str(write_config(where)), "--no-progress", "--workers", "1")}
    for kind, name in KIND_DIRECTORIES.items():
        assert main([*writers[kind], "--out", str(where / name)]) == 0
    return where


@pytest.fixture
def three_kinds(tmp_path, three_kinds_written) -> dict[str, Path]:
    """A sweep, a run and a comparison, each in its own directory of this test's (a result may be moved: attack 4)."""
    for name in KIND_DIRECTORIES.values():
        shutil.copytree(three_kinds_written / name, tmp_path / name, symlinks=True)
    return {kind: tmp_path / name for kind, name in KIND_DIRECTORIES.items()}


COMMAND_OF = {"run": ("run", *RUN_ARGS), "comparison": ("compare", *COMPARE_ARGS)}


@pytest.mark.parametrize(("writer", "victim"), [("run", "sweep"), ("comparison", "sweep"), ("run", "comparison"),
                                                ("comparison", "run"), ("sweep", "run"), ("sweep", "comparison")])
def test_a_command_never_replaces_another_kinds_result(tmp_path, capsys, three_kinds, writer, victim):
    """``pfxab run --out S`` over a sweep exited 0 and S held only the run's files (issue 37, class 1)."""
    target = three_kinds[victim]
    before = _snapshot(target)
    args = COMMAND_OF[writer] if writer != "sweep" else ("sweep", str(write_config(tmp_path, name="other.toml")),
                                                        "--no-progress")
    line = error_line(capsys, *args, "--out", str(target))
    assert f"is invalid (it holds {outputs_kinds()[victim]}, not {outputs_kinds()[writer]})" in line
    assert line.endswith("(--replace replaces another kind's result)")
    assert _snapshot(target) == before


def outputs_kinds() -> dict[str, str]:
    from pfxab_flower.storage.outputs import KINDS

    return KINDS


def test_replace_replaces_another_kind_and_says_what(tmp_path, capsys, three_kinds):
    capsys.readouterr()
    assert main(["run", *RUN_ARGS, "--out", str(three_kinds["sweep"]), "--replace"]) == 0
    assert f"pfxab run: replaced a sweep (pfxab sweep --out) that was in {three_kinds['sweep']} (--replace)" in \
        capsys.readouterr().err
    assert verify(three_kinds["sweep"], RESULT_FILES) is None and not (three_kinds["sweep"] / "runs").exists()
    assert main(["sweep", str(write_config(tmp_path, name="t.toml")), "--out", str(three_kinds["run"]),
                 "--no-progress", "--workers", "1", "--replace"]) == 0
    assert "pfxab sweep: replaced a run's result (pfxab run --out) that was in" in capsys.readouterr().err
    assert not (three_kinds["run"] / "summary.json").exists() and (three_kinds["run"] / "runs.parquet").is_file()


def test_nothing_is_written_where_a_live_sweep_is_writing_even_with_replace(tmp_path, capsys, three_kinds):
    """Done while the sweep ran, the run replaced its directory: the sweep failed, and S was refused from then on."""
    sweep_dir = three_kinds["sweep"]
    before = _snapshot(sweep_dir)
    with sweep_lock(sweep_dir):  # a live sweep holds it (this process: the flock is what others see)
        for args in (("run", *RUN_ARGS, "--out", str(sweep_dir), "--replace"),
                     ("compare", *COMPARE_ARGS, "--out", str(sweep_dir / "runs" / "x")),
                     ("run", *RUN_ARGS, "--out", str(sweep_dir / "new"))):
            line = cli_error_line(*args)  # another process, as another user of the directory is
            assert "pfxab sweep, pid " in line and "is writing" in line, line
    assert _snapshot(sweep_dir) == {**before, LOCK_FILE: f"{os.getpid()}\n".encode()}


# --- class 2: a path is resolved and checked once, before any work, and written where it was checked -----------


@pytest.mark.parametrize("case", ["a link to itself", "under a link to itself", "a dangling link into /proc"])
def test_an_out_path_that_cannot_be_written_is_refused_before_the_run(tmp_path, capsys, case):
    """``--out loop/x`` (loop a link to itself) ran the whole job, then ``OSError: Too many levels of symbolic
    links``; a dangling link into /proc passed the check and failed after the run."""
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "dangling").symlink_to("/proc/1/no-such/place")
    out, why = {"a link to itself": ("loop", "Too many levels of symbolic links"),
                "under a link to itself": ("loop/x", "Too many levels of symbolic links"),
                "a dangling link into /proc": ("dangling", "cannot write in /proc")}[case]
    for args in (("run", *RUN_ARGS), ("compare", *COMPARE_ARGS)):
        line = error_line(capsys, *args, "--out", str(tmp_path / out))
        assert why in line, line


def test_the_result_goes_where_the_path_was_checked_even_if_a_link_moves(tmp_path, monkeypatch):
    """The link is followed once, when checked: moving it during the run does not move the result."""
    import pfxab_flower.running.engine as engine

    (tmp_path / "A").mkdir()
    (tmp_path / "B").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "A")
    real = engine.run_config

    def run_and_move_the_link(*args, **kwargs):
        link.unlink()
        link.symlink_to(tmp_path / "B")  # someone re-points it while the run works
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "run_config", run_and_move_the_link)
    assert main(["run", *RUN_ARGS, "--out", str(link / "r")]) == 0
    assert (tmp_path / "A" / "r" / "summary.json").is_file() and not (tmp_path / "B" / "r").exists()


# --- class 8: a name that is not UTF-8 is refused before the work, by every command ----------------------------


def test_an_out_name_that_is_not_utf8_is_one_line_before_any_work(tmp_path, capsys):
    """``pfxab sweep small.toml --out $'sw\\xffbad'`` completed 8 runs, then a ``UnicodeEncodeError`` traceback
    (pyarrow); ``report``/``plot`` then called the table "unreadable"."""
    bad = str(tmp_path / os.fsdecode(b"sw\xffbad"))
    config = write_config(tmp_path)
    for args in (("sweep", str(config), "--out", bad, "--no-progress"), ("run", *RUN_ARGS, "--out", bad),
                 ("compare", *COMPARE_ARGS, "--out", bad), ("plot", str(tmp_path), "--out", bad + ".png")):
        line = error_line(capsys, *args)
        assert "is invalid (byte 0xff in it is not UTF-8 text" in line, line
    assert error_line(capsys, "report", bad).endswith(
        "is invalid (its name is not UTF-8 text); allowed: a finished sweep directory (`pfxab sweep --out`, with "
        "config.toml) or a comparison directory (`pfxab compare --out`, with comparison.json)")
    assert not os.path.exists(os.fsencode(bad))


# --- class 12: no temporary of a killed writer stays for good ---------------------------------------------------

_KILLED_WRITE = """
import os, signal, sys
import pfxab_flower.storage.outputs as outputs
from pfxab_flower.simulations.cli.main import main
real, written = outputs.write_bytes_synced, []
def write_then_signal(path, data):
    real(path, data)
    written.append(path)
    if len(written) == 2:  # mid-way through the result's files
        os.kill(os.getpid(), getattr(signal, sys.argv[1]))
outputs.write_bytes_synced = write_then_signal
sys.exit(main(["run", "--num-clients", "3", "--horizon", "2000", "--out", sys.argv[2]]))
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_a_write_killed_midway_leaves_no_temporary_for_good(tmp_path, sig):
    """SIGTERM/SIGKILL while ``run --out`` wrote left ``.R1.<random>.pfxab-tmp``, which no later run removed."""
    import subprocess
    import sys
    import time

    out = tmp_path / "R1"
    done = subprocess.run([sys.executable, "-c", _KILLED_WRITE, sig, str(out)], capture_output=True, text=True,
                          timeout=patient(120))
    temporaries = [p for p in tmp_path.iterdir() if p.name.startswith(".R1.")]
    if sig == "SIGTERM":  # an interrupt: the clean-up ran, one line, status 143
        assert done.returncode == 143 and done.stderr.strip().splitlines()[-1] == "pfxab run: interrupted (SIGTERM)"
        assert temporaries == [] and not out.exists()
        return
    assert done.returncode == -9 and len(temporaries) == 1  # SIGKILL: nothing can clean up at once
    time.sleep(2.5)  # no longer a fresh temporary a live writer might be about to lock
    assert main(["run", *RUN_ARGS, "--out", str(out)]) == 0  # the next write there removes it
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".R1.")] == []
    assert verify(out, RESULT_FILES) is None


def test_a_temporary_a_live_writer_holds_is_kept(tmp_path):
    import fcntl

    from pfxab_flower.storage.outputs import remove_stale_temporaries

    target = tmp_path / "R"
    held, stale = tmp_path / ".R.abcdefgh.pfxab-tmp", tmp_path / ".R.zzzzzzzz.pfxab-tmp"
    held.mkdir()
    stale.mkdir()
    os.utime(held, (0, 0))
    os.utime(stale, (0, 0))
    fd = os.open(held, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # its writer is alive
        assert remove_stale_temporaries(target) == [stale]
    finally:
        os.close(fd)
    assert held.exists() and not stale.exists()


def test_a_killed_plot_leaves_no_temporary_for_good(tmp_path, monkeypatch):
    """``plot`` killed left ``.<name>.png.<random>.pfxab-tmp.png``; the next plot to that file removes it."""
    config = write_config(tmp_path)
    assert main(["sweep", str(config), "--out", str(tmp_path / "S"), "--no-progress", "--workers", "1"]) == 0
    leftover = tmp_path / ".fig.png.abcd1234.pfxab-tmp.png"
    leftover.write_bytes(b"half a figure")  # what a SIGKILLed plot left, a while ago
    os.utime(leftover, (0, 0))
    assert main(["plot", str(tmp_path / "S"), "--out", str(tmp_path / "fig.png")]) == 0
    assert not leftover.exists() and (tmp_path / "fig.png").is_file()


RESULT_FILES = ("clients.csv", "curve.csv", "phases.csv", "communication.csv", "summary.json")


def test_an_old_result_a_crash_left_aside_is_put_back_and_checked_not_replaced(tmp_path, capsys):
    """A crash between a two-rename swap's renames leaves the old result in ``.R.<random>.old/old`` and nothing at
    ``R``: the next write beside it put it back and then replaced it with another kind's result (found by the
    re-attack of issue 37). It is put back before the check now, which then refuses another kind."""
    target = tmp_path / "R"
    assert main(["run", *RUN_ARGS, "--out", str(target)]) == 0
    before = _snapshot(target)
    aside = tmp_path / ".R.abcd1234.old"
    aside.mkdir()
    os.rename(target, aside / "old")
    os.utime(aside, (0, 0))  # left a while ago
    line = error_line(capsys, "compare", *COMPARE_ARGS, "--out", str(target))
    assert "it holds a run's result (pfxab run --out), not a comparison" in line
    assert _snapshot(target) == before and not aside.exists()
