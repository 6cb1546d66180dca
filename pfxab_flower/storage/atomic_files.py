"""One file written whole or not at all, and the temporaries a killed writer leaves removed.

A writer fills a hidden temporary sibling (``.NAME.<8 random>.pfxab-tmp``), holding an ``flock``
on it, fsyncs it and renames it into place; a temporary no process holds (its writer was
SIGKILLed) is removed by the next write beside it. A failed write is one :class:`OutputError` line.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.storage.manifest import entry_kind

#: Suffix of the hidden temporary siblings pfxab creates (a crash may leave one behind).
TEMP_SUFFIX = ".pfxab-tmp"
#: A temporary sibling made for NAME: ``.NAME.<8 random>.pfxab-tmp[.suffix]`` (a probe too).
TEMPORARY = re.compile(rf"\.(?P<name>.+)\.[a-z0-9_]{{8}}{re.escape(TEMP_SUFFIX)}(?:\.[a-z]+)?")
#: Suffix of the hidden sibling a two-rename swap moves NAME's old result into.
SWAPPED_OUT_SUFFIX = ".old"
#: The old result of NAME moved aside by a swap: ``.NAME.<8 random>.old``.
SWAPPED_OUT = re.compile(rf"\.(?P<name>.+)\.[a-z0-9_]{{8}}{re.escape(SWAPPED_OUT_SUFFIX)}")
#: A temporary younger than this is never stale (between its creation and its writer's lock, microseconds pass).
_STALE_AFTER_SECONDS = 2.0


class OutputError(ConfigError):
    """Writing a result failed (disk full, I/O error); the previous contents are unchanged."""


def fsync_dir(directory: Path) -> None:
    """Flush ``directory``'s entries to disk (a rename in it survives a crash only after this)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_synced(path: Path, data: bytes) -> None:
    """Create ``path`` (mode 0666 minus the umask) holding ``data``, flushed to disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def leftover_owner(entry_name: str) -> str | None:
    """The NAME whose temporary (:data:`TEMPORARY`) or swapped-out old result (:data:`SWAPPED_OUT`)
    ``entry_name`` is, or ``None`` when it is neither (then it is not ours to remove)."""
    found = TEMPORARY.fullmatch(entry_name) or SWAPPED_OUT.fullmatch(entry_name)
    return None if found is None else found["name"]


@contextlib.contextmanager
def held(path: Path) -> Iterator[None]:
    """Hold ``flock`` on ``path`` (a temporary being written) for the block; the kernel drops it if we die."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Remove the temporary siblings that writers of ``target``'s directory left when they were killed; the removed.

    A temporary is ``.NAME.<8 random>.pfxab-tmp[.suffix]`` (:data:`TEMPORARY`, any NAME: the
    suffix is ours), or ``.TARGET.<8 random>.old`` (a two-rename swap's old result: only beside
    ``target``, and put back first if ``target`` is missing). One is stale when no process holds
    its ``flock``: a live writer does, for as long as it writes.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for item in entries:
        swapped = SWAPPED_OUT.fullmatch(item.name)
        is_old = swapped is not None and swapped["name"] == target.name
        if not (TEMPORARY.fullmatch(item.name) or is_old):
            continue
        path = Path(item.path)
        try:
            if time.time() - os.lstat(path).st_mtime < _STALE_AFTER_SECONDS:
                continue  # just made: its writer may not hold it yet
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue  # a link, or gone: not ours to follow
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a live writer holds it
        else:
            if is_old and entry_kind(target) is None and entry_kind(path / "old") == "dir":
                os.rename(path / "old", target)  # the old result, whole, back where it was
            kind = entry_kind(path)
            if kind == "dir":
                shutil.rmtree(path, ignore_errors=True)
            elif kind == "file":
                path.unlink(missing_ok=True)
            removed.append(path)
        finally:
            os.close(fd)
    return removed


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str], flag: str = "out") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success fsync it and rename it to ``path``.

    For writers that want a file name (matplotlib, Parquet). On any failure the
    temporary file is removed and ``path`` keeps its old content; an ``OSError``
    becomes one :class:`OutputError` line naming the parameter ``flag`` that gave ``path``
    (``--plot`` for ``pfxab calibrate``). Temporaries a killed writer left beside
    ``path`` are removed first (:func:`remove_stale_temporaries`).
    """
    target = Path(path)
    tmp: Path | None = None
    fd: int | None = None
    try:
        remove_stale_temporaries(target)
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=TEMP_SUFFIX + target.suffix)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held while it is written: not stale
        tmp = Path(name)
        yield tmp
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600: give the file the usual mode
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        tmp = None
        fsync_dir(target.parent)
    except OSError as exc:
        state = "is unchanged" if tmp is not None else "was replaced but not confirmed on disk"
        raise OutputError(f"{spelled(flag)}={str(path)!r} could not be written ({exc.strerror or exc}); "
                          f"allowed: a location with room for the file; the previous file {state}") from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        if fd is not None:
            os.close(fd)


def write_file_atomically(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Replace one file whole (fsynced temporary file renamed over it)."""
    with atomic_file(path) as tmp:
        tmp.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return Path(path)


def current_umask() -> int:
    """This process's umask (reading it means setting it: put back at once)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
