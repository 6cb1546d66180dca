"""Refined optima kept in the evaluation cache, keyed by what they were computed from.

Refining needs scipy.optimize, whose import alone costs more than the rest of a default run
(docs/performance.md), so the deterministic result is stored once and read back exactly. The key
is a digest of the content it depends on (every client's values on the grid, the grid, the domain,
the method's constants, the installed scipy); if the cache is unusable the optimum is computed.
"""

from __future__ import annotations

import hashlib
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from pfxab_flower.storage.cache import EvaluationStore

#: Bump when the refinement (or what is stored) changes meaning.
METHOD_VERSION = 1
_VALUE = b"value"


def _scipy_build() -> bytes:
    """The installed scipy's ``version.py`` (version and git revision), read without importing scipy."""
    spec = find_spec("scipy")
    if spec is None or not spec.submodule_search_locations:
        return b"no scipy"
    try:
        return (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_bytes()
    except OSError:
        return b"unknown scipy"


class RefinementKey:
    """A namespace naming everything a refinement depends on (see the module docstring), fed chunk by chunk."""

    def __init__(self, *parts: object) -> None:
        self._digest = hashlib.sha256()
        for part in (METHOD_VERSION, *parts):
            self._digest.update(repr(part).encode() + b"\0")

    def update(self, array: np.ndarray) -> None:
        """Add an array's dtype, shape and bytes (grid points or personalised values)."""
        self._digest.update(repr((array.dtype.str, array.shape)).encode())
        self._digest.update(np.ascontiguousarray(array).tobytes())

    @property
    def namespace(self) -> str:
        digest = self._digest.copy()
        digest.update(_scipy_build())
        return f"optimum-v{METHOD_VERSION}/{digest.hexdigest()}"


def load_refined(key: str, num_clients: int, ndim: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Stored ``(values (M,), unit points (M, d))``, or None unless every client's entry is whole."""
    store = EvaluationStore()
    stored = store.load(key, range(num_clients))
    store.close()
    values = np.empty(num_clients)
    points = np.empty((num_clients, ndim))
    names = [_VALUE, *(_coordinate(j) for j in range(ndim))]
    for m in range(num_clients):
        entry = stored[m]
        if any(name not in entry for name in names):
            return None
        values[m] = entry[_VALUE]
        points[m] = [entry[_coordinate(j)] for j in range(ndim)]
    return values, points


def save_refined(key: str, values: np.ndarray, points: np.ndarray) -> None:
    """Store every client's refined value and unit point under ``key`` (one transaction)."""
    rows = []
    for m, (value, point) in enumerate(zip(values, points, strict=True)):
        rows.append((m, _VALUE, float(value)))
        rows.extend((m, _coordinate(j), float(x)) for j, x in enumerate(point))
    store = EvaluationStore()
    store.save(key, rows)
    store.close()


def _coordinate(axis: int) -> bytes:
    return f"x{axis}".encode()
