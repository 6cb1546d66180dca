"""The landmine loader: file lookup, checksum, the 29 fields, the split, and the one-line errors.

On the small generated landmine-format file (``tests/landmine_files.py``), except the check
of the real file's documented sizes, which runs when ``PFXAB_LANDMINE_DATA`` names it.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.model_selection import train_test_split

from pfxab_flower.errors import ConfigError
from pfxab_flower.problems import landmine_data
from pfxab_flower.problems.landmine_data import (
    ENV_VAR,
    URL_ENV_VAR,
    file_sha256,
    load_fields,
    load_splits,
    resolve_path,
)
from pfxab_flower.problems.registry import landmine_fields
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.simulations.cli import main as cli
from tests.landmine_files import NOWHERE, LandmineFile, accepting, real_landmine_file


@pytest.fixture(autouse=True)
def local_only(tmp_path, monkeypatch):
    """An empty cache, and any download pointed at a port where nothing listens."""
    monkeypatch.setenv("PFXAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(URL_ENV_VAR, NOWHERE)


@pytest.fixture(scope="module")
def data(landmine_file: LandmineFile):
    with accepting(landmine_file):
        return load_fields(landmine_file.path)


def _assert_29_fields_of_9_features(features: list[np.ndarray], labels: list[np.ndarray]) -> None:
    assert len(features) == len(labels) == 29
    for X, y in zip(features, labels, strict=True):
        assert X.shape == (len(y), 9) and X.dtype == np.float64
        assert y.shape == (len(y),) and y.dtype == np.int64 and set(np.unique(y)) == {0, 1}


def test_the_loader_reads_29_fields_of_features_and_labels(data, landmine_file):
    features, labels = data
    _assert_29_fields_of_9_features(features, labels)
    assert [len(y) for y in labels] == list(landmine_file.sizes)
    assert [int(y.sum()) for y in labels] == list(landmine_file.positives)


def test_the_real_file_has_the_documented_checksum_sizes_and_labels():
    path = real_landmine_file()
    assert file_sha256(path) == landmine_data.LANDMINE_SHA256
    features, labels = load_fields(path)
    _assert_29_fields_of_9_features(features, labels)
    sizes = [len(y) for y in labels]
    assert min(sizes) == 445 and max(sizes) == 690
    assert sum(sizes) == 14_820
    assert sum(int(y.sum()) for y in labels) == 904


def test_split_is_the_spec_stratified_half(data, landmine_file):
    features, labels = data
    fields = (0, 15, 28)
    with accepting(landmine_file):
        splits, sha = load_splits(fields, str(landmine_file.path))
    assert sha == file_sha256(landmine_file.path)
    for split in splits:
        X, y = features[split.field], labels[split.field]
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, stratify=y, random_state=0)
        np.testing.assert_array_equal(split.X_train, X_train)
        np.testing.assert_array_equal(split.X_test, X_test)
        np.testing.assert_array_equal(split.y_train, y_train)
        np.testing.assert_array_equal(split.y_test, y_test)
        assert len(split.y_train) + len(split.y_test) == len(y)
        assert abs(int(split.y_train.sum()) - int(split.y_test.sum())) <= 1  # stratified


def _run_landmine(capsys, *extra: str) -> tuple[int, str]:
    code = cli.main(["run", "--problem", "landmine", "--num-clients", "2", "--horizon", "100", *extra])
    return code, capsys.readouterr().err


def _assert_one_line_with_instructions(err: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "LandmineData.mat" in lines[0] and "put it at" in lines[0] and "http" in lines[0]


def test_missing_file_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    code, err = _run_landmine(capsys, "--landmine-data", str(tmp_path / "absent.mat"))
    assert code == 2
    _assert_one_line_with_instructions(err)
    assert "absent.mat" in err


def test_missing_file_from_environment_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "elsewhere.mat"))
    code, err = _run_landmine(capsys)
    assert code == 2
    _assert_one_line_with_instructions(err)
    assert ENV_VAR in err


def test_no_file_anywhere_tries_the_download_and_says_where_to_put_it(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(ConfigError, match=r"download from http://127\.0\.0\.1:9/.* failed .*put it at .*landmine"):
        resolve_path(None)


def test_corrupted_file_exits_2_with_one_line(landmine_file, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    bad = tmp_path / "LandmineData.mat"
    content = bytearray(landmine_file.path.read_bytes())
    content[len(content) // 2] ^= 0xFF
    bad.write_bytes(bytes(content))
    with accepting(landmine_file):  # the intact file would be accepted; one flipped byte is not
        code, err = _run_landmine(capsys, "--landmine-data", str(bad))
    assert code == 2
    _assert_one_line_with_instructions(err)
    assert "sha256" in err


def test_a_file_other_than_the_real_one_exits_2_with_one_line(landmine_file, capsys, monkeypatch):
    """The product's own checksum (not replaced here) refuses any file but the real ``LandmineData.mat``."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    code, err = _run_landmine(capsys, "--landmine-data", str(landmine_file.path))
    assert code == 2
    _assert_one_line_with_instructions(err)
    assert f"has sha256 {landmine_file.sha256[:12]}..., not the expected one" in err
    assert landmine_data.LANDMINE_SHA256[:12] in err


@pytest.mark.parametrize("fields", ["0,0", "29", "-1", "a,b", "", "1,,2"])
def test_bad_fields_are_rejected(fields):
    with pytest.raises(ConfigError, match="fields="):
        RunConfig(problem="landmine", fields=fields, num_clients=1)


def test_clients_take_the_first_fields_and_may_not_exceed_them():
    assert landmine_fields(RunConfig(problem="landmine")) == tuple(range(0, 29, 3))
    assert landmine_fields(RunConfig(problem="landmine", num_clients=3)) == (0, 3, 6)
    assert landmine_fields(RunConfig(problem="landmine", fields="5,1,20", num_clients=2)) == (5, 1)
    with pytest.raises(ConfigError, match="num_clients=4"):
        RunConfig(problem="landmine", fields="5,1,20", num_clients=4)
    with pytest.raises(ConfigError, match="num_clients=11"):
        RunConfig(problem="landmine", num_clients=11)
    assert RunConfig(problem="garland", num_clients=20).num_clients == 20  # fields only bound landmine
