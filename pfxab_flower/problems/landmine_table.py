"""The shipped table of landmine rewards (``landmine_table.npz``): every field at every cell centre down to a depth.

The regret oracle needs those rewards (thousands of SVM fits per field), so ``pfxab landmine-table``
computes them once and the package ships them. This module reads, checks and finds the file; a
table that does not match the run's data, split or library versions is not used. Why and how:
docs/landmine.md ("The reward table").
"""

from __future__ import annotations

import hashlib
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pfxab_flower.errors import ConfigError

#: Where the shipped table lives (package data).
PACKAGE_TABLE = Path(__file__).resolve().parent / "landmine_table.npz"
#: ``PFXAB_LANDMINE_TABLE=PATH`` uses another table; ``=none`` fits every SVM live.
ENV_VAR = "PFXAB_LANDMINE_TABLE"
NUM_FIELDS = 29


@dataclass(frozen=True)
class RewardTable:
    """``values[f, k - 1]``: field ``f``'s reward at the centre of node ``k``, for depths ``0..depth``."""

    values: np.ndarray
    depth: int
    namespace: str
    data_sha256: str
    split: str
    sklearn_version: str
    generated_at: str
    generation_seconds: float
    #: SVM fits this generation ran (the rest came from the on-disk cache of an earlier, interrupted one).
    fits: int

    @property
    def node_ids(self) -> np.ndarray:
        return np.arange(1, 2 ** (self.depth + 1), dtype=np.int64)

    def write(self, path: Path) -> None:
        """Write atomically (fsynced temporary file, then rename): a reader never sees half a table."""
        from pfxab_flower.storage.outputs import atomic_file

        path.parent.mkdir(parents=True, exist_ok=True)
        values = np.asarray(self.values, dtype=np.float64)
        with atomic_file(path) as tmp, open(tmp, "wb") as out:
            np.savez_compressed(
                out,
                values=values,
                values_sha256=np.str_(values_digest(values)),
                depth=np.int64(self.depth),
                namespace=np.str_(self.namespace),
                data_sha256=np.str_(self.data_sha256),
                split=np.str_(self.split),
                sklearn_version=np.str_(self.sklearn_version),
                generated_at=np.str_(self.generated_at),
                generation_seconds=np.float64(self.generation_seconds),
                fits=np.int64(self.fits),
            )
        os.chmod(path, 0o644)  # package data: readable by all

    @classmethod
    def read(cls, path: Path) -> RewardTable:
        """The table at ``path``; ``ValueError`` if it is not one, or its values are not those it was written with."""
        with np.load(path, allow_pickle=False) as data:
            if "values_sha256" not in data or str(data["values_sha256"]) != values_digest(data["values"]):
                raise ValueError(f"table {path} values do not match their recorded sha256 (damaged or edited)")
            table = cls(
                values=np.array(data["values"], dtype=np.float64),
                depth=int(data["depth"]),
                namespace=str(data["namespace"]),
                data_sha256=str(data["data_sha256"]),
                split=str(data["split"]),
                sklearn_version=str(data["sklearn_version"]),
                generated_at=str(data["generated_at"]),
                generation_seconds=float(data["generation_seconds"]),
                fits=int(data["fits"]),
            )
        expected = (NUM_FIELDS, 2 ** (table.depth + 1) - 1)
        if table.values.shape != expected or not np.all((table.values >= 0) & (table.values <= 1)):
            raise ValueError(f"table {path} is malformed (values shape {table.values.shape}, expected {expected})")
        return table


def values_digest(values: np.ndarray) -> str:
    """sha256 of the values as little-endian float64 (recorded in the file, checked on every read)."""
    return hashlib.sha256(np.ascontiguousarray(values, dtype="<f8").tobytes()).hexdigest()


def is_reward_table(path: Path) -> bool:
    """Whether ``path`` is a reward table file (what ``pfxab landmine-table`` may replace)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {"values", "namespace", "data_sha256", "depth"} <= set(data.files)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return False


def table_location() -> Path | None:
    """The table runs use: ``$PFXAB_LANDMINE_TABLE`` (``none``: no table), else the packaged one if present."""
    value = os.environ.get(ENV_VAR, "")
    if value.lower() == "none":
        return None
    if value:
        path = Path(value).expanduser()
        if not path.is_file():
            raise ConfigError(f"{ENV_VAR}={value!r} is invalid; allowed: an existing table file, or none")
        return path
    return PACKAGE_TABLE if PACKAGE_TABLE.is_file() else None


def load_table(namespace: str) -> RewardTable | None:
    """The table for this namespace, or ``None`` (with one line on stderr if one exists but does not apply)."""
    path = table_location()
    if path is None:
        return None
    try:
        table = RewardTable.read(path)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        print(f"pfxab: landmine reward table {path} unreadable ({reason}); fitting the SVMs instead", file=sys.stderr)
        return None
    if table.namespace != namespace:
        print(
            f"pfxab: landmine reward table {path} was made for {table.namespace!r}, this run needs "
            f"{namespace!r}; fitting the SVMs instead (`pfxab landmine-table` makes a matching one)",
            file=sys.stderr,
        )
        return None
    return table
