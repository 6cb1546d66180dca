"""Where results go: output paths checked before any work, results written whole or not at all.

Three promises, for every command that writes (``run``, ``compare``, ``sweep``,
``plot``, ``simulate``, ``landmine-table``):

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

**Only what is ours.** pfxab touches only the names it owns, whatever else a
directory holds (:mod:`pfxab_flower.manifest`): a result directory replaced as a
unit must be new, empty or hold nothing but what pfxab wrote there (its manifest
lists it); a directory written into piece by piece (a sweep's) has each name
*claimed* in its manifest before it is written (:func:`claim`), and a name already
taken by a file pfxab did not write is refused; an output file is replaced only if
it is a regular file pfxab recognises as its own (``ours``). A link, FIFO, socket
or device is never written through, and every refusal comes before any work. Names
too long for the file system (with the temporary sibling's extra characters) are
refused on the text, before any file-system call.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path

from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.manifest import MANIFEST_NAME, Manifest, entry_kind, foreign_entries, read_manifest, unit_manifest

#: Suffix of the hidden temporary siblings this module creates (a crash may leave one behind).
TEMP_SUFFIX = ".pfxab-tmp"
#: What a temporary sibling adds to a name: ``.`` + name + ``.`` + 8 random characters + suffix + ``.parquet``.
TEMP_OVERHEAD = 2 + 8 + len(TEMP_SUFFIX) + len(".parquet")
#: Longest name in a directory (Linux file systems: 255 bytes) and longest path (``PATH_MAX`` 4096 less room for
#: the names a result adds below it, e.g. ``runs/<run id>/grid_curve.csv``).
NAME_MAX = 255
MAX_PATH = 4096 - 256
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class OutputError(ConfigError):
    """Writing a result failed (disk full, I/O error); the previous contents are unchanged."""


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _refuse(name: str, value: str | os.PathLike[str], allowed: str, why: str = "") -> ConfigError:
    detail = f" ({why})" if why else ""
    return ConfigError(f"{spelled(name)}={str(value)!r} is invalid{detail}; allowed: {allowed}")


def _absolute(text: str, name: str, what: str) -> Path:
    """``text`` as an absolute path, refused first if a name in it is too long for the file system.

    Checked on the text, before any file-system call (which would raise ``ENAMETOOLONG``): the
    last name gets a hidden temporary sibling, ``TEMP_OVERHEAD`` characters longer.
    """
    if not text.strip() or "\0" in text:
        raise _refuse(name, text, what)
    out = Path(text).expanduser().absolute()
    longest = max((len(os.fsencode(part)) for part in out.parts[1:-1]), default=0)
    last = len(os.fsencode(out.name))
    if longest > NAME_MAX or last > NAME_MAX - TEMP_OVERHEAD or len(os.fsencode(out)) > MAX_PATH:
        raise _refuse(name, text if len(text) <= 80 else text[:60] + "...", what,
                      f"a name in it is longer than {NAME_MAX - TEMP_OVERHEAD} bytes or the path longer than "
                      f"{MAX_PATH}")
    return out


def _probe_writable(directory: Path, name: str, value: str | os.PathLike[str], allowed: str) -> None:
    """Create and remove a temporary file in ``directory`` (the only honest test of writability)."""
    if not directory.is_dir():
        raise _refuse(name, value, allowed, f"{directory} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".pfxab-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise _refuse(name, value, allowed, f"cannot write in {directory}: {exc.strerror}") from None


def _not_ours(directory: Path, names: Collection[str] | None = None) -> str | None:
    """Why pfxab may not write ``names`` (every entry if None) in ``directory``: the first one it does not own."""
    try:
        foreign = foreign_entries(directory, names)
    except OSError as exc:
        return f"cannot list it: {exc.strerror}"
    if not foreign:
        return None
    first = foreign[0]
    kind = entry_kind(directory / first)
    what = ("is a link, FIFO, socket or device" if kind == "other"
            else "is not one pfxab wrote (its manifest does not list it)")
    return (f"{first!r} there {what}; pfxab never replaces or removes it"
            + (f" ({len(foreign)} such entries)" if len(foreign) > 1 else ""))


def check_output_dir(
    path: str | os.PathLike[str],
    name: str = "out",
    result_files: Collection[str] | None = None,
    writes: Collection[str] | None = None,
) -> Path:
    """Refuse, with one line, an output directory that cannot take a result; returns it as a Path.

    ``result_files`` given: the directory is replaced as a unit by a result made of
    these files, so it must be new, empty or hold nothing but what pfxab wrote there
    (its manifest's names), and its parent must be writable. Not given (a sweep
    directory, written into): the directory itself must be writable, and each of the
    names it ``writes`` must be absent or pfxab's; what else it holds is kept.
    """
    text = os.fspath(path)
    what = "a new or empty directory" if result_files is not None else "a directory"
    if result_files is not None:
        what += f", or one holding only a result pfxab wrote ({', '.join(sorted(result_files))})"
    what += ", on a writable file system"
    out = _absolute(text, name, what)
    if out.exists() and not out.is_dir():
        raise _refuse(name, text, what, "it exists and is not a directory")
    existing = _nearest_existing(out)
    if not existing.is_dir():
        raise _refuse(name, text, what, f"{existing} is not a directory")
    if out.is_dir() and (result_files is not None or writes):
        why = _not_ours(out, None if result_files is not None else writes)
        if why:
            raise _refuse(name, text, what, why)
    probe = existing if result_files is None else _nearest_existing(out.parent)
    _probe_writable(probe, name, text, what)
    return out


def check_output_file(
    path: str | os.PathLike[str], suffixes: Collection[str], name: str = "out",
    ours: Callable[[Path], bool] | None = None,
) -> Path:
    """Refuse, with one line, an output file path that cannot take the file; returns it as a Path.

    An existing file is replaced only if it is a regular file (not a link, device, FIFO,
    socket) that ``ours(path)`` recognises as written by pfxab (no ``ours``: never).
    """
    text = os.fspath(path)
    what = (f"a file name ending in {' or '.join(suffixes)}, in a writable directory, new or a file pfxab "
            "wrote there")
    out = _absolute(text, name, what)
    if out.suffix.lower() not in {s.lower() for s in suffixes}:
        raise _refuse(name, text, what)
    kind = entry_kind(out) if out.parent.is_dir() else None
    if kind == "dir" or kind == "other":
        raise _refuse(name, text, what, "it exists and is not a regular file")
    if kind == "file" and (ours is None or not ours(out)):
        raise _refuse(name, text, what, "it exists and pfxab did not write it; pfxab never replaces it")
    existing = _nearest_existing(out.parent)
    if not existing.is_dir():
        raise _refuse(name, text, what, f"{existing} is not a directory")
    _probe_writable(existing, name, text, what)
    return out


def claim(directory: Path, names: Collection[str]) -> None:
    """List ``names`` as pfxab's in ``directory``'s manifest before writing them; one line if one is not ours.

    For a directory written into piece by piece (a sweep's), by its one writer (who holds
    its lock). Claiming first means a crash never leaves an unlisted file of ours.
    """
    why = _not_ours(directory, names)
    if why:
        raise _refuse("out", directory, "a directory whose entries of these names pfxab wrote "
                      f"({', '.join(sorted(names))})", why)
    manifest = read_manifest(directory) or Manifest()
    if not manifest.owned >= set(names):
        write_file_atomically(directory / MANIFEST_NAME, manifest.claiming(names).to_bytes())


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
    out_dir: str | os.PathLike[str], files: Mapping[str, str | bytes], *, replace_all: bool = False
) -> Path:
    """Write ``files`` (name -> text or bytes) as the whole content of ``out_dir``, as a unit.

    The files go into a hidden temporary sibling directory, then their manifest
    (:data:`~pfxab_flower.manifest.MANIFEST_NAME`: each file's size and sha256, written
    last), are fsynced with it, and the directory is swapped into place (see the
    module docstring). Unless ``replace_all`` (a directory pfxab owns whole, a sweep's
    run), an existing ``out_dir`` holding anything pfxab did not write there is refused
    (:class:`ConfigError`) and left alone. Any failure removes the temporary
    directory, leaves ``out_dir`` as it was and raises :class:`OutputError`.
    Returns the directory written (symbolic links resolved).
    """
    target = Path(os.path.realpath(Path(out_dir).expanduser()))
    kind = entry_kind(target)
    if kind not in (None, "dir"):
        raise _refuse("out", out_dir, "a directory", "it exists and is not a directory")
    if kind == "dir" and not replace_all:
        why = _not_ours(target)
        if why:
            raise _refuse("out", out_dir, "a new or empty directory, or one holding only a result pfxab wrote", why)
    data = {name: value if isinstance(value, bytes) else value.encode("utf-8") for name, value in files.items()}
    data[MANIFEST_NAME] = unit_manifest(data).to_bytes()  # last: present only once every file is
    tmp: Path | None = None
    swapped = False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=TEMP_SUFFIX))
        for name, content in data.items():
            write_bytes_synced(tmp / name, content)
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700: give the directory the usual mode
        _fsync_dir(tmp)
        tmp, swapped = _swap_into_place(tmp, target), True  # tmp: the previous result, to delete
        _fsync_dir(target.parent)
    except OSError as exc:
        state = "were replaced but not confirmed on disk" if swapped else "are unchanged"
        raise OutputError(f"{spelled('out')}={str(out_dir)!r} could not be written ({exc.strerror or exc}); "
                          f"allowed: a location with room for the result; the previous contents {state}") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[Path]:
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
        raise OutputError(f"{spelled('out')}={str(path)!r} could not be written ({exc.strerror or exc}); "
                          f"allowed: a location with room for the file; the previous file {state}") from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def write_file_atomically(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Replace one file whole (fsynced temporary file renamed over it)."""
    with atomic_file(path) as tmp:
        tmp.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return Path(path)


def save_or_keep(
    write: Callable[[str], Path], out: str | None, names: Collection[str]
) -> tuple[Path | None, OutputError | None]:
    """``write(out)`` (if ``out``): where it wrote, or the error to raise *after* the result is printed.

    A computed result is never thrown away because its files could not be written (a
    full disk after an hour's run): the command prints it first, then fails with one
    line naming what was not written (exit status 2).
    """
    if out is None:
        return None, None
    try:
        return write(out), None
    except OutputError as exc:
        return None, OutputError(f"{exc}; not written: {', '.join(names)} (the result is printed on stdout)")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
