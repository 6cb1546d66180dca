"""Landmine fields as real sites: each site's data in a file of its own, and the objective a site computes from it.

For a deployment where each SuperNode holds one field (``docs/examples/landmine_sites``):
:func:`write_site_files` writes the per-field files from ``LandmineData.mat`` with the federation's
split, and :func:`site_objective` is one site's objective (the held-out ROC-AUC of the RBF SVM).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from pfxab_flower.errors import ConfigError
from pfxab_flower.problems.landmine import DOMAIN, svm_auc
from pfxab_flower.problems.landmine_data import FieldSplit, load_splits
from pfxab_flower.problems.registry import LANDMINE_FIELD_COUNT

#: What a site file holds: the field's two halves.
SITE_ARRAYS = ("X_train", "X_test", "y_train", "y_test")

__all__ = ["DOMAIN", "site_objective", "write_site_files"]


def write_site_files(out_dir: str | os.PathLike[str], fields: Sequence[int], data: str | None = None) -> list[Path]:
    """``OUT_DIR/field-<f>.npz`` for each field ``f``: its training and held-out halves; the paths in order.

    ``data`` is the ``LandmineData.mat`` to read (default: fetched and checked as the
    landmine problem does). Each file is written whole (a temporary file renamed into place).
    """
    chosen = list(fields)
    if not chosen or any(isinstance(f, bool) or not isinstance(f, int) or not 0 <= f < LANDMINE_FIELD_COUNT
                         for f in chosen) or len(set(chosen)) != len(chosen):
        raise ConfigError(f"fields={chosen!r} is invalid; allowed: distinct field indices in "
                          f"[0, {LANDMINE_FIELD_COUNT})")
    splits, _ = load_splits(tuple(chosen), data)
    directory = Path(out_dir)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for split in splits:
        path = directory / f"field-{split.field}.npz"
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        with os.fdopen(handle, "wb") as file:
            np.savez(file, **{name: getattr(split, name) for name in SITE_ARRAYS})
        os.replace(temporary, path)
        paths.append(path)
    return paths


def load_site(path: str | os.PathLike[str]) -> FieldSplit:
    """A site file's halves; a one-line :class:`ConfigError` if it is not one."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            arrays = {name: np.asarray(saved[name]) for name in SITE_ARRAYS}
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"data-path={str(path)!r} is invalid; allowed: a site file written by write_site_files "
                          f"({exc.__class__.__name__}: {exc})") from None
    return FieldSplit(-1, arrays["X_train"], arrays["X_test"], arrays["y_train"], arrays["y_test"])


def site_objective(path: str | os.PathLike[str]) -> Callable[[np.ndarray], np.ndarray]:
    """The site's objective: each ``(C, gamma)`` row's held-out ROC-AUC of the SVM fit on its own training half."""
    split = load_site(path)

    def objective(points: np.ndarray) -> np.ndarray:
        return np.array([svm_auc(split, float(C), float(gamma)) for C, gamma in np.asarray(points)], dtype=float)

    return objective
