"""A small persistent cache of expensive, deterministic evaluations (one SQLite file).

Why SQLite: it is in the standard library, every write is an atomic
transaction (an interrupted run leaves either the whole batch or none of it),
and in WAL mode several processes (parallel runs, Flower client processes) can
read while one writes; concurrent writers wait on a lock (``busy timeout``)
instead of corrupting the file. Values are keyed by a *namespace* (which
must name everything the value depends on: data checksum, split, library
version, cache version), an integer *item* (e.g. a landmine field) and the
exact point as float64 bytes.

The cache lives in ``$PFXAB_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/pfxab-flower``,
else ``~/.cache/pfxab-flower``. If it cannot be opened or written, a warning
is issued once and evaluation goes on without it: the cache is only a speed-up.
"""

from __future__ import annotations

import os
import sqlite3
import warnings
from collections.abc import Iterable
from pathlib import Path

#: Bump when the table layout or the meaning of stored values changes.
CACHE_FORMAT = 1
ENV_VAR = "PFXAB_CACHE_DIR"
_TIMEOUT_SECONDS = 60.0


def cache_dir() -> Path:
    """The user's cache directory for this package."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "pfxab-flower"


class EvaluationStore:
    """Values of ``(namespace, item, point bytes)`` in ``<cache_dir>/evaluations-v<format>.sqlite``."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else cache_dir() / f"evaluations-v{CACHE_FORMAT}.sqlite"
        self._connection: sqlite3.Connection | None = None
        self._disabled = False
        self._connect()

    def __getstate__(self) -> dict:
        """Pickle the location only (Flower's Ray backend ships federations to its workers)."""
        return {"path": self.path, "disabled": self._disabled}

    def __setstate__(self, state: dict) -> None:
        self.path, self._disabled, self._connection = state["path"], state["disabled"], None

    def _connect(self) -> sqlite3.Connection | None:
        if self._connection is not None or self._disabled:
            return self._connection
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.path, timeout=_TIMEOUT_SECONDS, isolation_level=None)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(
                "CREATE TABLE IF NOT EXISTS evaluations (namespace TEXT NOT NULL, item INTEGER NOT NULL, "
                "point BLOB NOT NULL, value REAL NOT NULL, PRIMARY KEY (namespace, item, point)) WITHOUT ROWID"
            )
            self._connection = connection
        except (OSError, sqlite3.Error) as exc:
            self._disable(exc)
        return self._connection

    @property
    def enabled(self) -> bool:
        return self._connect() is not None

    def _disable(self, exc: Exception) -> None:
        warnings.warn(f"evaluation cache {self.path} disabled ({exc}); evaluating without it", stacklevel=3)
        if self._connection is not None:
            self._connection.close()
        self._connection = None
        self._disabled = True

    def load(self, namespace: str, items: Iterable[int]) -> dict[int, dict[bytes, float]]:
        """Every stored value of these items: ``{item: {point bytes: value}}``."""
        result: dict[int, dict[bytes, float]] = {int(i): {} for i in items}
        connection = self._connect()
        if connection is None or not result:
            return result
        marks = ",".join("?" * len(result))
        try:
            rows = connection.execute(
                f"SELECT item, point, value FROM evaluations WHERE namespace = ? AND item IN ({marks})",
                (namespace, *result),
            ).fetchall()
        except sqlite3.Error as exc:
            self._disable(exc)
            return result
        for item, point, value in rows:
            result[item][bytes(point)] = value
        return result

    def save(self, namespace: str, rows: Iterable[tuple[int, bytes, float]]) -> None:
        """Store ``(item, point bytes, value)`` rows in one transaction (existing keys are kept)."""
        rows = [(namespace, int(i), p, float(v)) for i, p, v in rows]
        connection = self._connect()
        if connection is None or not rows:
            return
        try:
            with connection:  # BEGIN ... COMMIT, ROLLBACK on error
                connection.execute("BEGIN IMMEDIATE")
                connection.executemany("INSERT OR IGNORE INTO evaluations VALUES (?, ?, ?, ?)", rows)
        except sqlite3.Error as exc:
            self._disable(exc)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
