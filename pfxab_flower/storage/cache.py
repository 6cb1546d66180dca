"""A persistent cache of expensive, deterministic evaluations (one SQLite file, safe across processes).

Values are keyed by a namespace (everything the value depends on), an item and the exact point.
The cache is only a speed-up: when it cannot be used a warning is issued and the run goes on
without it; a corrupt file of ours is moved aside and a damaged row is recomputed, never used.
Why SQLite and how it heals: docs/landmine.md ("Evaluation cache") and docs/reliability.md.
"""

from __future__ import annotations

import hashlib
import math
import os
import sqlite3
import struct
import sys
import time
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pfxab_flower.errors import ConfigError
from pfxab_flower.processes.remote import in_ray_task

#: Bump when the table layout or the meaning of stored values changes (2: a checksum per row).
CACHE_FORMAT = 2
ENV_VAR = "PFXAB_CACHE_DIR"
#: Longest wait for another process's lock: a writer of ours holds it for milliseconds (15 concurrent writers
#: wait under a second); a lock held longer (another program's ``BEGIN EXCLUSIVE``) cost 60 s per statement.
_TIMEOUT_SECONDS = 2.0
#: How long a cache found unusable stays unused in this process before it is tried again.
RETRY_SECONDS = 60.0
#: ``PRAGMA application_id`` of our cache files ("pfxb"): what tells them from another application's database.
APPLICATION_ID = 0x70667862
#: The table's columns, in order: a file of ours with other columns was written by another layout.
_COLUMNS = ("namespace", "item", "point", "value", "checksum")
_TABLE = ("CREATE TABLE IF NOT EXISTS evaluations (namespace TEXT NOT NULL, item INTEGER NOT NULL, "
          "point BLOB NOT NULL, value REAL NOT NULL, checksum BLOB NOT NULL, "
          "PRIMARY KEY (namespace, item, point)) WITHOUT ROWID")
#: Cache files this process found unusable: when, and why (said once, not per store or per statement).
_UNUSABLE: dict[Path, tuple[float, str]] = {}
_POINTS_PER_QUERY = 500
#: Connections a forked process inherited: kept referenced (never closed, never used) in that process.
_INHERITED: list[sqlite3.Connection] = []


class NotOurs(sqlite3.DatabaseError):
    """A database at the cache path that is not a pfxab cache (another application's): never written to."""


class WrongLayout(sqlite3.DatabaseError):
    """A pfxab cache file whose table has other columns (another layout): moved aside like a corrupt one."""


def cache_dir() -> Path:
    """The user's cache directory for this package; one :class:`ConfigError` line if there is none.

    ``Path.home()`` raises for a user without a passwd entry and no ``HOME`` (a container's uid).
    """
    try:
        if os.environ.get(ENV_VAR):
            return Path(os.environ[ENV_VAR]).expanduser()
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base).expanduser() / "pfxab-flower"
    except RuntimeError as exc:  # no home directory to expand ~ or to put .cache in
        raise ConfigError(f"the cache directory is unknown ({exc}); allowed: a home directory, or "
                          f"{ENV_VAR} or XDG_CACHE_HOME set to a directory") from None


class EvaluationStore:
    """Values of ``(namespace, item, point bytes)`` in ``<cache_dir>/evaluations-v<format>.sqlite``."""

    def __init__(self, path: Path | None = None) -> None:
        self._connection: sqlite3.Connection | None = None
        self._owner = os.getpid()  # the process whose connection ``_connection`` is
        self._disabled = False
        try:
            self.path = path if path is not None else cache_dir() / f"evaluations-v{CACHE_FORMAT}.sqlite"
        except ConfigError as exc:
            self.path = Path(f"evaluations-v{CACHE_FORMAT}.sqlite")  # named in messages only: never opened
            self._disable(exc)
        self._connect()

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the location only (Flower's Ray backend ships federations to its workers)."""
        return {"path": self.path, "disabled": self._disabled}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path, self._disabled, self._connection = state["path"], state["disabled"], None
        self._owner = os.getpid()

    def _drop_inherited(self) -> None:
        """In a forked process (sweeps fork after computing the optima in the parent), set aside the
        parent's connection: SQLite forbids using one across fork(), and closing it in the child
        could disturb the parent's locks, so it is kept referenced, unused; the child opens its own."""
        if self._connection is not None and self._owner != os.getpid():
            _INHERITED.append(self._connection)
            self._connection = None
        self._owner = os.getpid()

    def _connect(self) -> sqlite3.Connection | None:
        self._drop_inherited()
        if self._connection is not None or self._disabled:
            return self._connection
        when, _ = _UNUSABLE.get(self.path, (-math.inf, ""))
        if time.monotonic() - when < RETRY_SECONDS:  # found unusable a moment ago, and said so then
            self._disabled = True
            return None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._connection = self._open()
            except sqlite3.Error as exc:
                if not _is_corruption(exc):
                    raise
                self._move_aside(exc)
                self._connection = self._open()
        except (OSError, sqlite3.Error) as exc:
            self._disable(exc)
        return self._connection

    def _open(self) -> sqlite3.Connection:
        """A connection to our cache file, made ours first if it is new; :class:`NotOurs` for another's database."""
        connection = sqlite3.connect(self.path, timeout=_TIMEOUT_SECONDS, isolation_level=None)
        try:
            _claim(connection)  # reads only, unless the file is new or already ours
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(_TABLE)
        except BaseException:
            connection.close()
            raise
        return connection

    def _move_aside(self, exc: sqlite3.Error) -> None:
        """Rename the corrupt file (and its WAL/SHM companions) so a fresh cache can take its place."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{self.path}{suffix}")
            if source.exists():
                os.replace(source, f"{aside}{suffix}")
        print(f"pfxab: evaluation cache {self.path} was corrupt ({exc}); moved it to {aside} and started a new one",
              file=sys.stderr)

    @property
    def enabled(self) -> bool:
        return self._connect() is not None

    def _disable(self, exc: Exception) -> None:
        """Evaluate without the cache from now on; said once per process and file (tried again later)."""
        if self.path not in _UNUSABLE:
            warnings.warn(f"evaluation cache {self.path} disabled ({exc}); evaluating without it", stacklevel=3)
        _UNUSABLE[self.path] = (time.monotonic(), str(exc))
        if self._connection is not None:
            self._connection.close()
        self._connection = None
        self._disabled = True

    def load(
        self, namespace: str, items: Iterable[int], bounds: tuple[float, float] = (-math.inf, math.inf),
        points: Sequence[bytes] | None = None,
    ) -> dict[int, dict[bytes, float]]:
        """Every stored value of these items (only at ``points``, if given): ``{item: {point bytes: value}}``.

        Values outside ``bounds`` (the objective's range), not finite, or whose row
        checksum does not match cannot be right: they are deleted from the file (so
        they get recomputed and stored again) and left out, with one line on stderr.
        """
        result: dict[int, dict[bytes, float]] = {int(i): {} for i in items}
        if not result:
            return result
        marks = ",".join("?" * len(result))
        query = f"SELECT item, point, value, checksum FROM evaluations WHERE namespace = ? AND item IN ({marks})"
        if points is None:
            rows = self._read(query, (namespace, *result))
        else:  # in slices: SQLite limits the parameters of one statement
            rows = []
            for start in range(0, len(points), _POINTS_PER_QUERY):
                chunk = points[start : start + _POINTS_PER_QUERY]
                rows += self._read(f"{query} AND point IN ({','.join('?' * len(chunk))})",
                                   (namespace, *result, *chunk))
        low, high = bounds
        bad, changed = [], 0
        for item, point, value, check in rows:
            intact = isinstance(value, float) and isinstance(check, bytes) and check == row_checksum(
                namespace, item, bytes(point), value)
            if intact and math.isfinite(value) and low <= value <= high:
                result[item][bytes(point)] = value
            else:
                bad.append((namespace, item, point))
                changed += not intact
        if bad:
            why = f"{changed} whose checksum does not match (changed on disk), " if changed else ""
            print(f"pfxab: evaluation cache {self.path} held {len(bad)} unusable value(s) ({why}outside "
                  f"[{low:g}, {high:g}] or not finite); dropped them (they are recomputed)", file=sys.stderr)
            self._write("DELETE FROM evaluations WHERE namespace = ? AND item = ? AND point = ?", bad)
        return result

    def _read(self, query: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Run a query; a corrupt file is moved aside once (then it reads as empty)."""
        for attempt in (1, 2):
            connection = self._connect()
            if connection is None:
                return []
            try:
                return connection.execute(query, parameters).fetchall()
            except sqlite3.Error as exc:
                if attempt == 1 and _is_corruption(exc):
                    self._move_aside(exc)
                    continue
                self._disable(exc)
        return []

    def _write(self, statement: str, rows: list[tuple[Any, ...]]) -> None:
        connection = self._connect()
        if connection is None or not rows:
            return
        try:
            with connection:  # BEGIN ... COMMIT, ROLLBACK on error
                connection.execute("BEGIN IMMEDIATE")
                connection.executemany(statement, rows)
        except sqlite3.Error as exc:
            self._disable(exc)

    def save(self, namespace: str, rows: Iterable[tuple[int, bytes, float]]) -> None:
        """Store ``(item, point bytes, value)`` rows in one transaction (existing keys are kept).

        Not in a Ray task: on a cluster only the driver writes the cache (a task may run on
        another machine, and many tasks at once would contend for the file).
        """
        if in_ray_task():
            return
        rows = [(int(i), p, float(v)) for i, p, v in rows]
        self._write("INSERT OR IGNORE INTO evaluations VALUES (?, ?, ?, ?, ?)",
                    [(namespace, i, p, v, row_checksum(namespace, i, p, v)) for i, p, v in rows])

    def close(self) -> None:
        self._drop_inherited()
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def row_checksum(namespace: str, item: int, point: bytes, value: float) -> bytes:
    """The first 16 bytes of the sha256 of a row's key and value (the value as float64 bytes)."""
    digest = hashlib.sha256(namespace.encode("utf-8"))
    digest.update(struct.pack("<q", item))
    digest.update(point)
    digest.update(struct.pack("<d", value))
    return digest.digest()[:16]


def _claim(connection: sqlite3.Connection) -> None:
    """Make sure the database is ours before anything is written to it: new (then marked), or marked ours.

    A file without the mark that holds nothing but our table is ours from before the mark (marked now).
    Another application's database raises :class:`NotOurs`; ours with other columns :class:`WrongLayout`.
    """
    mark = connection.execute("PRAGMA application_id").fetchone()[0]
    names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")}
    if mark not in (0, APPLICATION_ID) or (mark == 0 and names - {"evaluations"}):
        raise NotOurs(f"it is not a pfxab cache (application_id {mark}, tables {', '.join(sorted(names))}): another "
                      f"application's database is left alone; set {ENV_VAR} to use another directory")
    if "evaluations" in names:
        columns = tuple(row[1] for row in connection.execute("PRAGMA table_info(evaluations)"))
        if columns != _COLUMNS:
            raise WrongLayout(f"its table has the columns {', '.join(columns)}, not {', '.join(_COLUMNS)}")
    if mark == 0:
        connection.execute(f"PRAGMA application_id={APPLICATION_ID}")


def _is_corruption(exc: sqlite3.Error) -> bool:
    """Whether the file itself is damaged (not a database, malformed, another layout of ours), as opposed to
    locked, unwritable or another application's."""
    if isinstance(exc, WrongLayout):
        return True
    if isinstance(exc, sqlite3.OperationalError | NotOurs):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    return code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or (
        code is None and isinstance(exc, sqlite3.DatabaseError)
    )
