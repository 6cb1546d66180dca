"""Fetching LandmineData.mat like a scientific library: from a URL, sha256-checked, stored atomically.

Every download here is served by a local HTTP server on 127.0.0.1 (see
``tests/landmine_files.py``); a failed download must give one line naming the
URL and how to place the file by hand, exit 2, and leave nothing behind. The file served
is the small generated one: the downloads that must succeed accept its checksum
(:func:`~tests.landmine_files.accepting`), the ones that must fail run the product as it is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from pfxab_flower.problems.landmine_data import (
    ENV_VAR,
    FILE_NAME,
    URL_ENV_VAR,
    cached_path,
    file_sha256,
    resolve_path,
)
from tests.landmine_files import NOWHERE, LandmineFile, accepting, serve
from tests.patience import patient


@pytest.fixture
def served(tmp_path, landmine_file: LandmineFile):
    """A directory with the good file and a copy with one byte flipped, served on 127.0.0.1."""
    root = tmp_path / "www"
    root.mkdir()
    content = landmine_file.path.read_bytes()
    (root / FILE_NAME).write_bytes(content)
    bad = bytearray(content)
    bad[len(bad) // 2] ^= 0xFF
    (root / "corrupted.mat").write_bytes(bytes(bad))
    with serve(root) as base:
        yield base


@pytest.fixture(autouse=True)
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PFXAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv(URL_ENV_VAR, NOWHERE)


@pytest.fixture
def accepted(landmine_file: LandmineFile):
    """The generated file is the one whose checksum the product expects, for this test."""
    with accepting(landmine_file):
        yield landmine_file.sha256


def test_missing_file_is_downloaded_checked_and_cached(served, accepted, monkeypatch, capsys):
    monkeypatch.setenv(URL_ENV_VAR, f"{served}/{FILE_NAME}")
    path = resolve_path(None)
    assert path == cached_path() and file_sha256(path) == accepted
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "downloaded it from" in err[0] and served in err[0]
    monkeypatch.setenv(URL_ENV_VAR, NOWHERE)  # the second time it is found in the cache, no download
    assert resolve_path(None) == path
    assert capsys.readouterr().err == ""
    assert sorted(p.name for p in path.parent.iterdir()) == [FILE_NAME]  # no temporary file left


def test_a_cached_copy_that_changed_is_downloaded_again(served, accepted, monkeypatch):
    monkeypatch.setenv(URL_ENV_VAR, f"{served}/{FILE_NAME}")
    cached_path().parent.mkdir(parents=True)
    cached_path().write_bytes(b"half a file")
    assert file_sha256(resolve_path(None)) == accepted


def _cli_in_env(url: str, env_cache: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PFXAB_CACHE_DIR=env_cache, **{URL_ENV_VAR: url})
    env.pop(ENV_VAR, None)
    return subprocess.run(
        [sys.executable, "-m", "pfxab_flower.simulations.cli.main", "run", "--problem", "landmine", "--num-clients",
         "2",
         "--horizon", "100", "--json"],
        capture_output=True, text=True, timeout=patient(120), env=env,
    )


@pytest.mark.parametrize("case", ["refused", "truncated", "wrong checksum", "not the real file", "not found"])
def test_a_bad_download_is_one_line_exit_2_and_leaves_nothing(case, served, tmp_path):
    """The product as shipped (a fresh process, its own checksum): none of these is the real file."""
    url = {
        "refused": NOWHERE,
        "truncated": f"{served}/truncated/{FILE_NAME}",
        "wrong checksum": f"{served}/corrupted.mat",
        "not the real file": f"{served}/{FILE_NAME}",
        "not found": f"{served}/absent.mat",
    }[case]
    cache = tmp_path / "cache"
    proc = _cli_in_env(url, str(cache))
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    error = lines[0]
    assert error.startswith("pfxab run: error: landmine data download from")
    assert url in error and "by hand" in error and "put it at" in error
    if case in ("wrong checksum", "not the real file"):
        assert "(ValueError: its sha256 is not the expected one)" in error
    leftovers = list(cache.rglob("*")) if cache.exists() else []
    assert leftovers == [], leftovers  # no data file, no temporary file, no empty folder


def test_a_silent_server_times_out_in_one_line(served, monkeypatch):
    from pfxab_flower.errors import ConfigError
    from pfxab_flower.problems import landmine_data

    monkeypatch.setattr(landmine_data, "DOWNLOAD_TIMEOUT", 0.5)
    monkeypatch.setenv(URL_ENV_VAR, f"{served}/silent/{FILE_NAME}")
    with pytest.raises(ConfigError, match=r"download from .*/silent/.* failed \(.*(Timeout|timed out)"):
        resolve_path(None)
    assert not cached_path().parent.exists()


@pytest.mark.parametrize("case", ["drip", "endless"])
def test_a_download_has_a_deadline_and_a_size_cap_and_leaves_nothing(served, monkeypatch, case):
    """A byte every 0.1 s never tripped the 30 s read timeout (killed at 100 s, a tmp file left); an endless
    stream filled 8 MB for a 1.08 MB file. Now: a total deadline, at most the file's size, nothing left."""
    from pfxab_flower.errors import ConfigError
    from pfxab_flower.problems import landmine_data

    monkeypatch.setattr(landmine_data, "DOWNLOAD_DEADLINE", 1.0)
    monkeypatch.setenv(URL_ENV_VAR, f"{served}/{case}/{FILE_NAME}")
    why = "did not finish within 1 s" if case == "drip" else "sent more than the file's 1,085,456 bytes"
    with pytest.raises(ConfigError, match=rf"download from .*/{case}/.* failed \(ValueError: the (download|server) "):
        try:
            resolve_path(None)
        except ConfigError as exc:
            assert why in str(exc) and str(exc).count("\n") == 0
            raise
    assert not cached_path().parent.exists()  # no partial file, no temporary file, no folder


def test_a_temporary_file_a_killed_download_left_is_removed_by_the_next(served, accepted, monkeypatch):
    from pfxab_flower.problems import landmine_data

    folder = cached_path().parent
    folder.mkdir(parents=True)
    stale, live = folder / "tmpab12cd34", folder / "tmpfresh000"
    stale.write_bytes(b"half")
    live.write_bytes(b"another process is downloading")
    old = time.time() - 3 * (landmine_data.DOWNLOAD_DEADLINE + landmine_data.DOWNLOAD_TIMEOUT)
    os.utime(stale, (old, old))
    monkeypatch.setenv(URL_ENV_VAR, f"{served}/{FILE_NAME}")
    assert file_sha256(resolve_path(None)) == accepted
    assert sorted(p.name for p in folder.iterdir()) == [FILE_NAME, "tmpfresh000"]
