"""Where results go: output paths checked before any work, results written whole or not at all.

Two promises, for every command that writes (``run``, ``compare``, ``sweep``,
``plot``, ``simulate``):

* **Checked first.** :func:`check_output_dir` / :func:`check_output_file` refuse a
  path that cannot take the result (empty, an existing non-directory, a path under
  a file, a read-only mount, ``/proc``, ``/dev/full``) with one
  :class:`~pfxab_flower.errors.ConfigError` line, so a long run never ends in a
  traceback because of a typo in ``--out``. Writability is *probed* (a temporary
  file is created and removed in the nearest existing ancestor) because
  permission bits do not tell about read-only mounts, pseudo file systems or root.
* **Written as a unit.** :func:`write_files_atomically` writes a result directory
  into a hidden temporary sibling, fsyncs every file and the directory, then swaps
  it into place, so an older complete result is either kept whole or replaced
  whole. On Linux the swap is ``renameat2(RENAME_EXCHANGE)`` (atomic: there is no
  moment without a complete directory); elsewhere, or on a file system that lacks
  it, two renames (old aside, new in): a crash between them leaves the old result
  whole under ``.<name>.<random>.old/old`` and no directory at the target. In both
  cases a crash after the swap but before the old copy is deleted leaves that
  hidden sibling behind (it is the old, complete result; delete it at will).
  A failed write (disk full, ...) removes the temporary directory, leaves the old
  result untouched and raises :class:`OutputError` (one line).

A directory that exists and holds files that are **not** part of the result is
refused (by the check and again by the writer): replacing the directory as a unit
would otherwise delete them, and nothing of the user's may be lost.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import tempfile
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

from pfxab_flower.errors import ConfigError, spelled

#: Suffix of the hidden temporary siblings this module creates (a crash may leave one behind).
TEMP_SUFFIX = ".pfxab-tmp"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class OutputError(ConfigError):
    """Writing a result failed (disk full, I/O error); the previous contents are unchanged."""


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _refuse(name: str, value: str | os.PathLike, allowed: str, why: str = "") -> ConfigError:
    detail = f" ({why})" if why else ""
    return ConfigError(f"{spelled(name)}={str(value)!r} is invalid{detail}; allowed: {allowed}")


def _probe_writable(directory: Path, name: str, value: str | os.PathLike, allowed: str) -> None:
    """Create and remove a temporary file in ``directory`` (the only honest test of writability)."""
    if not directory.is_dir():
        raise _refuse(name, value, allowed, f"{directory} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".pfxab-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise _refuse(name, value, allowed, f"cannot write in {directory}: {exc.strerror}") from None


def _foreign(directory: Path, owned: Collection[str]) -> list[str]:
    """Entries of ``directory`` that are not result files (nor an old writer's hidden ``.*.tmp`` files)."""
    return sorted(
        entry.name for entry in directory.iterdir()
        if entry.name not in owned and not (entry.name.startswith(".") and entry.name.endswith(".tmp"))
    )


def check_output_dir(path: str | os.PathLike, name: str = "out", result_files: Collection[str] | None = None) -> Path:
    """Refuse, with one line, an output directory that cannot take a result; returns it as a Path.

    ``result_files`` given: the directory is replaced as a unit by a result made of
    these files, so it must be new, empty or hold nothing but these files, and its
    parent must be writable. Not given (a sweep directory, written into): the
    directory itself must be writable; what else it holds is kept.
    """
    text = os.fspath(path)
    what = "a new or empty directory" if result_files is not None else "a directory"
    if result_files is not None:
        what += f", or one holding only a previous result ({', '.join(sorted(result_files))})"
    what += ", on a writable file system"
    if not text.strip():
        raise _refuse(name, text, what)
    out = Path(text).expanduser().absolute()
    if out.exists() and not out.is_dir():
        raise _refuse(name, text, what, "it exists and is not a directory")
    existing = _nearest_existing(out)
    if not existing.is_dir():
        raise _refuse(name, text, what, f"{existing} is not a directory")
    if out.is_dir() and result_files is not None:
        try:
            foreign = _foreign(out, result_files)
        except OSError as exc:
            raise _refuse(name, text, what, f"cannot list it: {exc.strerror}") from None
        if foreign:
            raise _refuse(name, text, what, f"it holds {len(foreign)} other file(s), e.g. {foreign[0]!r}, "
                          "which replacing it would delete")
    probe = existing if result_files is None else _nearest_existing(out.parent)
    _probe_writable(probe, name, text, what)
    return out


def check_output_file(path: str | os.PathLike, suffixes: Collection[str], name: str = "out") -> Path:
    """Refuse, with one line, an output file path that cannot take the file; returns it as a Path."""
    text = os.fspath(path)
    what = f"a file name ending in {' or '.join(suffixes)}, in a writable directory"
    if not text.strip():
        raise _refuse(name, text, what)
    out = Path(text).expanduser().absolute()
    if out.suffix.lower() not in {s.lower() for s in suffixes}:
        raise _refuse(name, text, what)
    if out.exists() and not out.is_file():
        raise _refuse(name, text, what, "it exists and is not a regular file")
    existing = _nearest_existing(out.parent)
    if not existing.is_dir():
        raise _refuse(name, text, what, f"{existing} is not a directory")
    _probe_writable(existing, name, text, what)
    return out


def _fsync_dir(directory: Path) -> None:
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


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths (Linux ``renameat2``); False where unsupported."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), os.fspath(b))


def _swap_into_place(tmp: Path, target: Path) -> Path | None:
    """Put ``tmp`` at ``target``; returns where the old directory went (to delete), or None."""
    for _ in range(5):  # another writer may create or remove the target between our steps
        if not target.exists():
            try:
                os.rename(tmp, target)  # also replaces an empty directory created meanwhile
                return None
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                continue
        try:
            if _exchange(tmp, target):
                return tmp  # the old result now lives at the temporary name
        except FileNotFoundError:
            continue
        aside = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".old"))
        os.rename(target, aside / "old")
        try:
            os.rename(tmp, target)
        except OSError:
            os.rename(aside / "old", target)  # put the old result back before reporting
            os.rmdir(aside)
            raise
        return aside
    raise OSError(errno.EBUSY, "the output directory kept changing while it was being replaced", os.fspath(target))


def write_files_atomically(
    out_dir: str | os.PathLike, files: Mapping[str, str | bytes], *, replace_all: bool = False
) -> Path:
    """Write ``files`` (name -> text or bytes) as the whole content of ``out_dir``, as a unit.

    The files go into a hidden temporary sibling directory, are fsynced with it,
    and the directory is swapped into place (see the module docstring). Unless
    ``replace_all``, an existing ``out_dir`` holding other files is refused
    (:class:`ConfigError`) and left alone. Any failure removes the temporary
    directory, leaves ``out_dir`` as it was and raises :class:`OutputError`.
    Returns the directory written (symbolic links resolved).
    """
    target = Path(os.path.realpath(Path(out_dir).expanduser()))
    if target.is_dir() and not replace_all:
        foreign = _foreign(target, files)
        if foreign:
            raise _refuse("out", out_dir, "a new or empty directory, or one holding only a previous result",
                          f"it holds {len(foreign)} other file(s), e.g. {foreign[0]!r}")
    tmp: Path | None = None
    swapped = False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=TEMP_SUFFIX))
        for name, data in files.items():
            write_bytes_synced(tmp / name, data if isinstance(data, bytes) else data.encode("utf-8"))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700: give the directory the usual mode
        _fsync_dir(tmp)
        tmp, swapped = _swap_into_place(tmp, target), True  # tmp: the previous result, to delete
        _fsync_dir(target.parent)
    except OSError as exc:
        state = "were replaced but not confirmed on disk" if swapped else "are unchanged"
        raise OutputError(f"out={str(out_dir)!r} could not be written ({exc.strerror or exc}); "
                          f"allowed: a location with room for the result; the previous contents {state}") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success fsync it and rename it to ``path``.

    For writers that want a file name (matplotlib, Parquet). On any failure the
    temporary file is removed and ``path`` keeps its old content; an ``OSError``
    becomes one :class:`OutputError` line.
    """
    target = Path(path)
    tmp: Path | None = None
    try:
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=TEMP_SUFFIX + target.suffix)
        os.close(fd)
        tmp = Path(name)
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600: give the file the usual mode
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        tmp = None
        _fsync_dir(target.parent)
    except OSError as exc:
        state = "is unchanged" if tmp is not None else "was replaced but not confirmed on disk"
        raise OutputError(f"out={str(path)!r} could not be written ({exc.strerror or exc}); "
                          f"allowed: a location with room for the file; the previous file {state}") from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def write_file_atomically(path: str | os.PathLike, data: str | bytes) -> Path:
    """Replace one file whole (fsynced temporary file renamed over it)."""
    with atomic_file(path) as tmp:
        tmp.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return Path(path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
