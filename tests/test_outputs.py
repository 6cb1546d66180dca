"""Output paths are checked before any work, and results are written whole or not at all."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pfxab_flower.storage.outputs as outputs
from pfxab_flower.errors import ConfigError
from pfxab_flower.running.results import RESULT_FILES
from pfxab_flower.simulations.cli.main import main
from pfxab_flower.storage.manifest import MANIFEST_NAME
from pfxab_flower.storage.outputs import OutputError, check_output_dir, check_output_file, write_files_atomically
from tests.conftest import cli_error_line
from tests.patience import patient

SMALL_RUN = ("--problem", "garland", "--num-clients", "3", "--horizon", "10000")


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, timeout=patient(30))
    return probe.returncode == 0


needs_mounts = pytest.mark.skipif(not _can_unshare(), reason="needs unshare -rm to mount a private tmpfs")


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


@pytest.fixture
def no_work(monkeypatch):
    """Every command's work fails the test if reached: the output check must come first."""
    def forbidden(*args, **kwargs):
        raise AssertionError("work started before the output path was checked")

    import pfxab_flower.running.engine as engine
    import pfxab_flower.simulations.experiments.sweep as sweep_module
    import pfxab_flower.simulations.flower.flwr_run_launcher as flwr_run
    import pfxab_flower.studies.comparison as compare_module

    monkeypatch.setattr(engine, "run_config", forbidden)
    monkeypatch.setattr(compare_module, "compare", forbidden)
    monkeypatch.setattr(sweep_module, "run_sweep", forbidden)
    monkeypatch.setattr(flwr_run, "simulate", forbidden)


def bad_dirs(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """Output directories that cannot take a result, and a fragment of the reason printed."""
    a_file = tmp_path / "a-file"
    a_file.write_text("mine\n")
    return {
        "empty": ("", "allowed: a "),
        "a file": (str(a_file), "it exists and is not a directory"),
        "under a file": (str(a_file / "sub"), "is not a directory"),
        "/dev/full": ("/dev/full", "it exists and is not a directory"),
        "/proc": ("/proc/pfxab-test/out", "cannot write in /proc"),
    }


@pytest.mark.parametrize("case", ["empty", "a file", "under a file", "/dev/full", "/proc"])
@pytest.mark.parametrize("command", ["run", "compare", "sweep", "simulate"])
def test_a_bad_out_dir_is_one_line_before_any_work(tmp_path, capsys, no_work, command, case):
    value, fragment = bad_dirs(tmp_path)[case]
    config = tmp_path / "tiny.toml"
    config.write_text('[fixed]\nproblem = "garland"\nnum_clients = 3\nhorizon = 5000\n[grid]\nseed = [0]\n')
    args = {"run": ["run", *SMALL_RUN], "compare": ["compare", *SMALL_RUN, "--seeds", "0"],
            "sweep": ["sweep", str(config)], "simulate": ["simulate", *SMALL_RUN]}[command]
    assert main([*args, "--out", value]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == "" and len(lines) == 1, captured.err
    assert lines[0].startswith(f"pfxab {command}: error: --out={value!r} is invalid") and fragment in lines[0]
    assert (tmp_path / "a-file").read_text() == "mine\n"  # nothing of the user's touched


@pytest.mark.parametrize("case", ["empty", "a directory", "under a file", "/proc", "wrong suffix"])
def test_a_bad_plot_out_is_one_line_before_reading_the_sweep(tmp_path, case):
    (tmp_path / "a-file").write_text("x")
    value = {"empty": "", "a directory": str(tmp_path / "d.png"), "under a file": str(tmp_path / "a-file" / "f.png"),
             "/proc": "/proc/pfxab-test/f.png", "wrong suffix": str(tmp_path / "f.svg")}[case]
    (tmp_path / "d.png").mkdir()
    line = cli_error_line("plot", str(tmp_path / "no-such-sweep"), "--out", value)
    assert line.startswith(f"pfxab plot: error: --out={value!r} is invalid")  # not the missing sweep: out came first


def test_a_directory_holding_other_files_is_refused_and_kept(tmp_path, no_work):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    (mine / "summary.json").write_text("{}")  # a result's name, but the user's file: pfxab did not write it
    line = cli_error_line("run", *SMALL_RUN, "--out", str(mine))
    assert "'summary.json' there is not one pfxab wrote (its manifest does not list it)" in line
    assert "(2 such entries)" in line
    with pytest.raises(ConfigError, match=r"summary\.json"):
        write_files_atomically(mine, {"summary.json": "{}\n"})  # the writer refuses too (a race with the check)
    assert (mine / "thesis.tex").read_text() == "years of work" and (mine / "summary.json").read_text() == "{}"


def test_the_checks_accept_what_they_should(tmp_path):
    assert check_output_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    write_files_atomically(tmp_path / "old", {"curve.csv": "t,regret\n"})  # a result pfxab wrote
    assert check_output_dir(tmp_path / "old", result_files=RESULT_FILES).is_dir()
    assert check_output_file(tmp_path / "figs" / "f.PDF", (".png", ".pdf")).name == "f.PDF"
    assert leftovers(tmp_path) == []  # the writability probe removed its file


def test_run_out_replaces_an_old_result_whole_and_says_where(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", *SMALL_RUN, "--seed", "2", "--out", str(out)]) == 0
    assert main(["run", "--problem", "garland", "--num-clients", "5", "--horizon", "10000", "--seed", "3",
                 "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert f"wrote {', '.join(RESULT_FILES)} to {out}" in captured.out  # the first, readable report
    assert captured.err.strip() == f"pfxab run: wrote {out}"  # with --json, stdout stays one object
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["num_clients"], summary["seed"]) == (5, 3)
    assert len((out / "clients.csv").read_text().splitlines()) == 1 + 5
    assert sorted(p.name for p in out.iterdir()) == sorted([*RESULT_FILES, MANIFEST_NAME])
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_a_failed_write_keeps_the_old_result_whole_and_leaves_no_temporary(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(outputs, "_exchange", lambda a, b: False)
    out = tmp_path / "result"
    old = {"clients.csv": "client\n0\n", "curve.csv": "t,regret\n0,0\n", "summary.json": '{"seed": 2}\n'}
    write_files_atomically(out, old)
    real, written = outputs.write_bytes_synced, []

    def disk_full_on_the_third_file(path: Path, data: bytes) -> None:
        if len(written) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        written.append(path.name)
        real(path, data)

    monkeypatch.setattr(outputs, "write_bytes_synced", disk_full_on_the_third_file)
    new = {"clients.csv": "client\n0\n1\n", "curve.csv": "t,regret\n0,1\n", "summary.json": '{"seed": 3}\n'}
    with pytest.raises(OutputError, match=r"No space left on device.*previous contents are unchanged"):
        write_files_atomically(out, new)
    assert {p.name: p.read_text() for p in out.iterdir() if p.name != MANIFEST_NAME} == old
    assert leftovers(tmp_path) == []
    monkeypatch.setattr(outputs, "write_bytes_synced", real)
    write_files_atomically(out, new)  # and a later write replaces it whole, by either swap
    assert {p.name: p.read_text() for p in out.iterdir() if p.name != MANIFEST_NAME} == new
    assert leftovers(tmp_path) == []


def test_a_symlinked_out_dir_stays_a_symlink(tmp_path):
    real = tmp_path / "real"
    write_files_atomically(real, {"summary.json": "{}\n"})
    (tmp_path / "link").symlink_to(real)
    write_files_atomically(tmp_path / "link", {"summary.json": '{"new": 1}\n'})
    assert (tmp_path / "link").is_symlink() and json.loads((real / "summary.json").read_text()) == {"new": 1}


def _in_private_mounts(tmp_path: Path, script: str) -> dict:
    """Run ``script`` (shell) in a user+mount namespace where it may mount; returns its last stdout line as JSON."""
    proc = subprocess.run(["unshare", "-rm", "sh", "-ec", script], capture_output=True, text=True, timeout=patient(120),
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@needs_mounts
def test_a_full_disk_keeps_the_old_result_prints_the_new_one_and_is_one_line_exit_2(tmp_path):
    """Real ENOSPC: a 40 KiB tmpfs holds a small result (5 pages) but not a larger one beside it (7 pages).

    The computed result is not thrown away: ``--json`` prints it on stdout, and the one error line
    says which files were not written.
    """
    cli = f"{sys.executable} -m pfxab_flower.simulations.cli.main"
    script = f"""
mkdir -p disk && mount -t tmpfs -o size=40k tmpfs disk
{cli} run {' '.join(SMALL_RUN)} --seed 2 --out disk/r > /dev/null
cp -r disk/r before
set +e
{cli} run --problem garland --num-clients 40 --horizon 200000 --seed 3 --out disk/r --json > out.txt 2> err.txt
status=$?
set -e
{sys.executable} -c 'import json, os; print(json.dumps({{"status": '$status', "out": open("out.txt").read(),
  "err": open("err.txt").read(), "same": all(open("before/" + f).read() == open("disk/r/" + f).read()
                for f in os.listdir("before")),
  "files": sorted(os.listdir("disk/r")), "disk": sorted(os.listdir("disk"))}}))'
"""
    seen = _in_private_mounts(tmp_path, script)
    assert seen["status"] == 2, seen
    summary = json.loads(seen["out"])  # the result, on stdout although it could not be saved
    assert (summary["seed"], summary["num_clients"]) == (3, 40) and summary["regret"] > 0
    assert seen["err"].count("\n") == 1 and "No space left on device" in seen["err"], seen["err"]
    assert f"not written: {', '.join(RESULT_FILES)} (the result is printed on stdout)" in seen["err"]
    assert seen["err"].startswith(f"pfxab run: error: --out='{tmp_path}/disk/r' could not be written")  # as checked
    assert "Traceback" not in seen["err"]
    assert seen["same"] and seen["files"] == sorted([*RESULT_FILES, MANIFEST_NAME]) and seen["disk"] == ["r"], seen


@needs_mounts
def test_a_read_only_mount_is_refused_before_the_run(tmp_path):
    cli = f"{sys.executable} -m pfxab_flower.simulations.cli.main"
    script = f"""
mkdir -p ro && mount -t tmpfs -o ro,size=64k tmpfs ro
set +e
{cli} run {' '.join(SMALL_RUN)} --out ro/r 2> err.txt
status=$?
set -e
{sys.executable} -c 'import json; print(json.dumps({{"status": '$status', "err": open("err.txt").read()}}))'
"""
    seen = _in_private_mounts(tmp_path, script)
    assert seen["status"] == 2 and seen["err"].count("\n") == 1
    assert "--out='ro/r' is invalid (cannot write in" in seen["err"] and "Read-only file system" in seen["err"]


def test_a_relative_out_after_the_current_directory_was_removed_is_one_line(tmp_path):
    """``cd gone; rmdir ../gone; pfxab run --out r``: a ``FileNotFoundError`` traceback (found again, issue 37)."""
    (tmp_path / "gone").mkdir()
    done = subprocess.run(["bash", "-c", f"cd gone && rmdir ../gone && exec {sys.executable} -m "
                           "pfxab_flower.simulations.cli.main run --horizon 100 --out r"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=patient(120),
                          env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")})  # no relative path
                          # Python itself must make absolute before our code runs
    lines = [line for line in done.stderr.splitlines() if not line.startswith("with nu1")]
    assert done.returncode == 2 and len(lines) == 1 and "(the current directory is gone: No such file or directory)" \
        in lines[0], done.stderr
