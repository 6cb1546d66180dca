"""The landmine reward table: what it records, that its values are the fits, and that runs use it.

The shipped table is checked against the real data when ``PFXAB_LANDMINE_DATA`` names the
file (otherwise those tests skip); the table machinery (the command, a run reading a table,
a table of another namespace) is checked on a table the tests make from the generated file.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import sklearn

from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.problems import landmine, landmine_data
from pfxab_flower.problems.landmine import cache_namespace, landmine_federation, svm_auc, table_points
from pfxab_flower.problems.landmine_data import (
    ENV_VAR,
    LANDMINE_SHA256,
    SPLIT_ID,
    URL_ENV_VAR,
    file_sha256,
    load_splits,
)
from pfxab_flower.problems.landmine_table import ENV_VAR as TABLE_ENV_VAR
from pfxab_flower.problems.landmine_table import NUM_FIELDS, PACKAGE_TABLE, RewardTable
from pfxab_flower.running.engine import run_config
from pfxab_flower.schema.run_config import RunConfig
from tests.conftest import cli_error_line
from tests.landmine_files import NOWHERE, LandmineFile, accepting, accepting_cli, real_landmine_file
from tests.patience import patient

#: The product's checksum of the real file, kept before any test replaces it.
REAL_SHA256 = LANDMINE_SHA256
#: Depth of the table the tests make from the generated file (63 cell centres per field, a few seconds).
SMALL_DEPTH = 5


@pytest.fixture(scope="module")
def table() -> RewardTable:
    return RewardTable.read(PACKAGE_TABLE)


#: The tests of the small table run in one pytest-xdist worker, so that only one makes it (it fits 1,827 SVMs).
ONE_SMALL_TABLE = pytest.mark.xdist_group("small-landmine-table")


@pytest.fixture(scope="module")
def small_table(landmine_file: LandmineFile, tmp_path_factory) -> tuple[RewardTable, Path]:
    """A table made by ``pfxab landmine-table`` in a fresh process from the generated file."""
    root = tmp_path_factory.mktemp("small-table")
    out = root / "table.npz"
    proc = subprocess.run(
        [*accepting_cli(landmine_file), "landmine-table", "--depth", str(SMALL_DEPTH), "--output", str(out),
         "--landmine-data", str(landmine_file.path)],
        capture_output=True, text=True, timeout=patient(300), env=dict(os.environ, PFXAB_CACHE_DIR=str(root / "cache")),
    )
    assert proc.returncode == 0, proc.stderr
    assert f"landmine-table: wrote {out} (depth {SMALL_DEPTH}" in proc.stderr
    return RewardTable.read(out), out


@pytest.fixture(autouse=True)
def local_only(tmp_path, monkeypatch, landmine_file: LandmineFile):
    """An empty cache, the generated data (accepted), no download; the shipped table unless a test sets another."""
    monkeypatch.setenv("PFXAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(ENV_VAR, str(landmine_file.path))
    monkeypatch.setenv(URL_ENV_VAR, NOWHERE)
    monkeypatch.delenv(TABLE_ENV_VAR, raising=False)
    with accepting(landmine_file):
        yield


@pytest.fixture
def real_data(local_only) -> Iterator[Path]:
    """For the tests of the shipped table: the real file (or skip), with the product's own checksum.

    Depends on ``local_only`` so that its changes are undone first (they nest inside it).
    """
    path = real_landmine_file()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(landmine_data, "LANDMINE_SHA256", REAL_SHA256)
        patch.setenv(ENV_VAR, str(path))
        yield path


# --- the shipped table (made from the real data) ---


def test_the_table_records_the_data_split_and_library_it_was_made_from(table):
    assert table.data_sha256 == REAL_SHA256  # the real file's; the real-data tests check the file has it
    assert table.split == SPLIT_ID
    assert table.namespace == cache_namespace(table.data_sha256)  # objective version and this scikit-learn
    assert table.sklearn_version == sklearn.__version__
    assert table.generated_at.startswith("20") and table.generation_seconds >= 0
    assert table.values.shape == (NUM_FIELDS, 2 ** (table.depth + 1) - 1) and table.values.dtype == np.float64


def test_the_optimum_grid_is_inside_the_table(table):
    assert table.depth >= landmine.OPTIMUM_GRID_DEPTH


def test_random_table_entries_equal_a_fresh_fit_of_the_real_data(table, real_data):
    path = real_data
    assert table.data_sha256 == file_sha256(path)
    splits, _ = load_splits(tuple(range(NUM_FIELDS)), str(path))
    _assert_random_entries_are_fresh_fits(table, splits, count=24)


def test_a_real_run_within_the_shipped_table_fits_no_svm(table, real_data, monkeypatch):
    monkeypatch.setattr(landmine, "OPTIMUM_GRID_DEPTH", min(table.depth, 8))
    federation = landmine_federation(RunConfig(problem="landmine", num_clients=3, alpha=0.4), NoiseModel())
    federation.optimum(0.4)
    assert federation.evaluator.fits == 0


def test_the_command_writes_a_table_equal_to_the_shipped_one(table, tmp_path, real_data):
    path = real_data
    out = tmp_path / "t.npz"
    proc = subprocess.run(
        [sys.executable, "-m", "pfxab_flower.simulations.cli.main", "landmine-table", "--depth", "3",
         "--output", str(out), "--landmine-data", str(path)],
        capture_output=True, text=True, timeout=patient(300),
    )
    assert proc.returncode == 0, proc.stderr
    small = RewardTable.read(out)
    assert small.depth == 3 and small.fits == NUM_FIELDS * 15 and small.namespace == table.namespace
    np.testing.assert_allclose(small.values, table.values[:, :15], rtol=0, atol=1e-12)


# --- the table machinery, on a table made from the generated file ---


def _assert_random_entries_are_fresh_fits(table: RewardTable, splits, count: int) -> None:
    """``count`` entries (the root, the last and the deepest among them) equal a fresh fit to 1e-9."""
    ids, points = table_points(table.depth)
    rng = np.random.default_rng(2026)
    fields = rng.integers(0, NUM_FIELDS, count)
    columns = rng.integers(0, len(ids), count)
    columns[:4] = [0, len(ids) - 1, 2 ** table.depth - 1, 2 ** table.depth]  # the root, the last, the deepest
    for f, k in zip(fields.tolist(), columns.tolist(), strict=True):
        C, gamma = points[k]
        assert abs(table.values[f, k] - svm_auc(splits[f], float(C), float(gamma))) <= 1e-9, (f, ids[k])


@ONE_SMALL_TABLE
def test_the_command_writes_a_table_of_the_data_it_was_given(small_table, landmine_file):
    table, _ = small_table
    assert table.depth == SMALL_DEPTH and table.fits == NUM_FIELDS * (2 ** (SMALL_DEPTH + 1) - 1)
    assert table.data_sha256 == landmine_file.sha256 and table.split == SPLIT_ID
    assert table.namespace == cache_namespace(landmine_file.sha256)
    assert table.sklearn_version == sklearn.__version__ and table.generated_at.startswith("20")
    splits, _ = load_splits(tuple(range(NUM_FIELDS)), str(landmine_file.path))
    _assert_random_entries_are_fresh_fits(table, splits, count=40)


@ONE_SMALL_TABLE
def test_a_run_within_the_table_fits_no_svm(small_table, monkeypatch):
    table, path = small_table
    monkeypatch.setenv(TABLE_ENV_VAR, str(path))
    monkeypatch.setattr(landmine, "OPTIMUM_GRID_DEPTH", table.depth)
    federation = landmine_federation(RunConfig(problem="landmine", num_clients=3, alpha=0.4), NoiseModel())
    federation.optimum(0.4)
    assert federation.evaluator.fits == 0


@ONE_SMALL_TABLE
def test_table_and_live_fits_give_the_same_run(small_table, tmp_path, monkeypatch):
    _, path = small_table
    monkeypatch.setenv(TABLE_ENV_VAR, str(path))
    monkeypatch.setattr(landmine, "OPTIMUM_GRID_DEPTH", SMALL_DEPTH)
    config = RunConfig(problem="landmine", fields="1,16,28", num_clients=3, alpha=0.4, horizon=30_000, seed=0)
    with_table = run_config(config).summary
    monkeypatch.setenv(TABLE_ENV_VAR, "none")
    monkeypatch.setenv("PFXAB_CACHE_DIR", str(tmp_path / "live-cache"))  # nothing from the first run is reused
    live = run_config(config).summary
    for key in ("regret_per_client", "optimum_personalised", "final_nodes", "evaluations_per_client"):
        assert live[key] == with_table[key], key


@ONE_SMALL_TABLE
def test_a_table_for_another_namespace_is_not_used(small_table, tmp_path, monkeypatch, capsys):
    table, _ = small_table
    other = tmp_path / "other.npz"
    dataclasses.replace(table, namespace=table.namespace + "/sklearn=0.0").write(other)
    monkeypatch.setenv(TABLE_ENV_VAR, str(other))
    monkeypatch.setattr(landmine, "OPTIMUM_GRID_DEPTH", 2)
    federation = landmine_federation(RunConfig(problem="landmine", num_clients=2, alpha=0.4), NoiseModel())
    federation.optimum(0.4)
    assert federation.evaluator.fits == 2 * 7  # every grid point fit live
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "fitting the SVMs instead" in lines[0]


@pytest.mark.parametrize("args", [("--depth", "-1"), ("--depth", "x"), ("--depth", "40"), ("--workers", "0"),
                                  ("--output", "/")])
def test_bad_command_values_are_one_line(args):
    line = cli_error_line("landmine-table", *args)
    assert "is invalid; allowed:" in line


def test_an_output_that_cannot_be_written_is_refused_before_fitting(tmp_path, landmine_file):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    line = cli_error_line("landmine-table", "--depth", "0", "--output", str(blocker / "t.npz"),
                          "--landmine-data", str(landmine_file.path))  # in this process: the file is accepted
    assert "output=" in line and "is invalid" in line


def test_a_bad_table_setting_is_one_line(tmp_path, monkeypatch, landmine_file):
    monkeypatch.setenv(TABLE_ENV_VAR, str(tmp_path / "absent.npz"))
    line = cli_error_line("run", "--problem", "landmine", "--num-clients", "2", "--horizon", "100")
    assert TABLE_ENV_VAR in line and "is invalid" in line
