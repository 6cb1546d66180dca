"""The shipped landmine reward table: what it records, that its values are the real fits, and that runs use it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sklearn

from pfxab_flower.config import RunConfig
from pfxab_flower.engine import run_config
from pfxab_flower.noise import NoiseModel
from pfxab_flower.problems import landmine
from pfxab_flower.problems.landmine import cache_namespace, landmine_federation, svm_auc
from pfxab_flower.problems.landmine_data import ENV_VAR, SPLIT_ID, URL_ENV_VAR, file_sha256, load_splits
from pfxab_flower.problems.landmine_table import ENV_VAR as TABLE_ENV_VAR
from pfxab_flower.problems.landmine_table import NUM_FIELDS, PACKAGE_TABLE, RewardTable, table_points
from tests.conftest import cli_error_line
from tests.landmine_files import NOWHERE, SHARED_COPY, shared_copy


@pytest.fixture(scope="module")
def table() -> RewardTable:
    return RewardTable.read(PACKAGE_TABLE)


@pytest.fixture(autouse=True)
def local_only(tmp_path, monkeypatch):
    monkeypatch.setenv("PFXAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(ENV_VAR, str(SHARED_COPY))
    monkeypatch.setenv(URL_ENV_VAR, NOWHERE)
    monkeypatch.delenv(TABLE_ENV_VAR, raising=False)


def test_the_table_records_the_data_split_and_library_it_was_made_from(table):
    assert table.data_sha256 == file_sha256(shared_copy())
    assert table.split == SPLIT_ID
    assert table.namespace == cache_namespace(table.data_sha256)  # objective version and this scikit-learn
    assert table.sklearn_version == sklearn.__version__
    assert table.generated_at.startswith("20") and table.generation_seconds >= 0
    assert table.values.shape == (NUM_FIELDS, 2 ** (table.depth + 1) - 1) and table.values.dtype == np.float64


def test_the_optimum_grid_is_inside_the_table(table):
    assert table.depth >= landmine.OPTIMUM_GRID_DEPTH


def test_random_table_entries_equal_a_fresh_fit(table):
    splits, _ = load_splits(tuple(range(NUM_FIELDS)), str(shared_copy()))
    ids, points = table_points(table.depth)
    rng = np.random.default_rng(2026)
    fields = rng.integers(0, NUM_FIELDS, 24)
    columns = rng.integers(0, len(ids), 24)
    columns[:4] = [0, len(ids) - 1, 2 ** table.depth - 1, 2 ** table.depth]  # the root, the last, the deepest
    for f, k in zip(fields.tolist(), columns.tolist(), strict=True):
        C, gamma = points[k]
        assert abs(table.values[f, k] - svm_auc(splits[f], float(C), float(gamma))) <= 1e-9, (f, ids[k])


def test_a_run_within_the_table_fits_no_svm(table, monkeypatch):
    monkeypatch.setattr(landmine, "OPTIMUM_GRID_DEPTH", min(table.depth, 8))
    federation = landmine_federation(RunConfig(problem="landmine", clients=3, alpha=0.4), NoiseModel())
    federation.optimum(0.4)
    assert federation.evaluator.fits == 0


def test_table_and_live_fits_give_the_same_run(tmp_path, monkeypatch):
    monkeypatch.setattr(landmine, "OPTIMUM_GRID_DEPTH", 5)
    config = RunConfig(problem="landmine", fields="1,16,28", clients=3, alpha=0.4, horizon=30_000, seed=0)
    with_table = run_config(config).summary
    monkeypatch.setenv(TABLE_ENV_VAR, "none")
    monkeypatch.setenv("PFXAB_CACHE_DIR", str(tmp_path / "live-cache"))  # nothing from the first run is reused
    live = run_config(config).summary
    for key in ("regret_per_client", "optimum_personalised", "final_nodes", "evaluations_per_client"):
        assert live[key] == with_table[key], key


def test_a_table_for_another_namespace_is_not_used(table, tmp_path, monkeypatch, capsys):
    other = tmp_path / "other.npz"
    dataclasses.replace(table, namespace=table.namespace + "/sklearn=0.0").write(other)
    monkeypatch.setenv(TABLE_ENV_VAR, str(other))
    monkeypatch.setattr(landmine, "OPTIMUM_GRID_DEPTH", 2)
    federation = landmine_federation(RunConfig(problem="landmine", clients=2, alpha=0.4), NoiseModel())
    federation.optimum(0.4)
    assert federation.evaluator.fits == 2 * 7  # every grid point fit live
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "fitting the SVMs instead" in lines[0]


def test_the_command_writes_a_table_equal_to_the_shipped_one(table, tmp_path):
    import subprocess
    import sys

    out = tmp_path / "t.npz"
    proc = subprocess.run(
        [sys.executable, "-m", "pfxab_flower.simulations.cli", "landmine-table", "--depth", "3", "--output", str(out),
         "--landmine-data", str(shared_copy())],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    small = RewardTable.read(out)
    assert small.depth == 3 and small.fits == NUM_FIELDS * 15 and small.namespace == table.namespace
    np.testing.assert_allclose(small.values, table.values[:, :15], rtol=0, atol=1e-12)


@pytest.mark.parametrize("args", [("--depth", "-1"), ("--depth", "x"), ("--depth", "40"), ("--workers", "0"),
                                  ("--output", "/")])
def test_bad_command_values_are_one_line(args):
    line = cli_error_line("landmine-table", *args)
    assert "is invalid; allowed:" in line


def test_an_output_that_cannot_be_written_is_refused_before_fitting(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    line = cli_error_line("landmine-table", "--depth", "0", "--output", str(blocker / "t.npz"),
                          "--landmine-data", str(shared_copy()))
    assert "output=" in line and "is invalid" in line


def test_a_bad_table_setting_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(TABLE_ENV_VAR, str(tmp_path / "absent.npz"))
    line = cli_error_line("run", "--problem", "landmine", "--clients", "2", "--horizon", "100")
    assert TABLE_ENV_VAR in line and "is invalid" in line
