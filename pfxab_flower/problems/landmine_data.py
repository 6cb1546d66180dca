"""The landmine data set: find ``LandmineData.mat``, verify it, split each field.

The file (29 fields of radar features, Xue et al., JMLR 2007) is not shipped
with the package. It is looked up, in order, at the path given by
``--landmine-data`` (run-config ``landmine-data``), the environment variable
``PFXAB_LANDMINE_DATA``, and ``../shared/data/landmine/LandmineData.mat``
relative to the project root (then to the current directory). Its sha256 is
checked, so a truncated or different file fails at once, with one line that
says where to get the file and where to put it, instead of producing
silently different rewards.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pfxab_flower.errors import ConfigError

#: sha256 of the one file the rewards are defined on.
LANDMINE_SHA256 = "2163ab20a80e33a8b65593c48cf283c540599dcb291105e63fa4af2ce24c2bea"
ENV_VAR = "PFXAB_LANDMINE_DATA"
FILE_NAME = "LandmineData.mat"
#: Default location, relative to the project root (the parent of the package directory).
DEFAULT_RELATIVE = Path("..") / "shared" / "data" / "landmine" / FILE_NAME
SOURCE_URL = (
    "https://github.com/daizhongxiang/Federated_Bayesian_Optimization/raw/"
    "9f46a1dfbbcfd5823e026ad9418a4cb881676ae9/LandmineData.mat"
)
#: The split of earlier federated tuning work (PyXAB, FTS), applied per field.
SPLIT = {"test_size": 0.5, "stratify": True, "random_state": 0}
SPLIT_ID = "train_test_split(test_size=0.5,stratify=y,random_state=0)"
PROJECT_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class FieldSplit:
    """One field's halves: the SVM is fit on ``train`` and scored on ``test``."""

    field: int
    X_train: np.ndarray
    X_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray


def default_locations() -> list[Path]:
    """Where the file is looked for when neither the option nor the environment names it."""
    places = [PROJECT_ROOT / DEFAULT_RELATIVE, Path.cwd() / DEFAULT_RELATIVE]
    return list(dict.fromkeys(p.resolve() for p in places))


def _problem(what: str) -> ConfigError:
    home = default_locations()[0]
    return ConfigError(
        f"{what}; get {FILE_NAME} (sha256 {LANDMINE_SHA256[:12]}...) from {SOURCE_URL} "
        f"and put it at {home} (or pass --landmine-data PATH, or set {ENV_VAR})"
    )


def resolve_path(explicit: str | None = None) -> Path:
    """The data file to use: the explicit path, else ``$PFXAB_LANDMINE_DATA``, else the default place."""
    for source, value in (("landmine-data", explicit), (ENV_VAR, os.environ.get(ENV_VAR))):
        if value:
            path = Path(value).expanduser()
            if not path.is_file():
                raise _problem(f"landmine data file {str(path)!r} (from {source}) does not exist")
            return path
    for path in default_locations():
        if path.is_file():
            return path
    raise _problem(f"landmine data file not found at {default_locations()[0]}")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_fields(path: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """All 29 fields' features ``(N_m, 9)`` float64 and labels ``(N_m,)`` int, after the sha256 check."""
    actual = file_sha256(path)
    if actual != LANDMINE_SHA256:
        raise _problem(f"landmine data file {str(path)!r} has sha256 {actual[:12]}..., not the expected one")
    import scipy.io

    mat = scipy.io.loadmat(path)
    features = [np.asarray(x, dtype=np.float64) for x in mat["feature"][0]]
    labels = [np.asarray(y).reshape(-1).astype(np.int64) for y in mat["label"][0]]
    return features, labels


def split_field(field: int, X: np.ndarray, y: np.ndarray) -> FieldSplit:
    """The spec's per-field split: stratified halves, ``random_state=0``."""
    from sklearn.model_selection import train_test_split

    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=SPLIT["test_size"], stratify=y, random_state=SPLIT["random_state"]
    )
    return FieldSplit(field, X_train, X_test, y_train, y_test)


def load_splits(fields: tuple[int, ...], explicit: str | None = None) -> tuple[list[FieldSplit], str]:
    """The chosen fields' splits and the data file's sha256 (part of every cache key)."""
    path = resolve_path(explicit)
    features, labels = load_fields(path)
    return [split_field(f, features[f], labels[f]) for f in fields], LANDMINE_SHA256
