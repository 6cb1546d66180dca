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

**Checked once, written there.** The path is resolved (symbolic links followed, a loop or a
link into ``/proc`` refused) and checked once, before any work; the command writes to the
path it checked, never a path re-read after the run. A name must be UTF-8 text (Parquet and
the terminal need it: ``sw\xffbad`` failed after the whole sweep).

**One kind per directory.** A run, a comparison and a sweep each own their kind of
directory (its manifest says which, :mod:`pfxab_flower.manifest`): a command never replaces
another kind's result unless asked in so many words (``--replace``, after which it says what
it replaced), and never anything in a directory a live sweep holds (its lock).

**No temporary left for good.** A writer holds an ``flock`` on its temporary sibling while it
writes; a temporary that no process holds (its writer was SIGKILLed) is removed by the next
write beside it.

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
import fcntl
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path

from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.manifest import (
    MANIFEST_NAME,
    Manifest,
    ManifestError,
    entry_kind,
    foreign_entries,
    read_manifest,
    unit_manifest,
)

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
#: The kinds of result, as a command's error names what a directory holds.
KINDS = {
    "run": "a run's result (pfxab run --out)",
    "comparison": "a comparison (pfxab compare --out)",
    "sweep": "a sweep (pfxab sweep --out)",
    "sweep-run": "one run of a sweep (its runs/)",
}
#: The file in a directory a writer holds (a sweep's) naming its pid; the lock itself is ``flock`` on the directory.
LOCK_FILE = ".pfxab-sweep.lock"
#: A temporary sibling this module made for NAME: ``.NAME.<8 random>.pfxab-tmp[.suffix]`` (a probe too).
_TEMPORARY = re.compile(rf"\.(?P<name>.+)\.[a-z0-9_]{{8}}{re.escape(TEMP_SUFFIX)}(?:\.[a-z]+)?")
#: Deepest chain of symbolic links followed while a path is resolved (the kernel's own limit).
_MAX_LINKS = 40
#: A temporary younger than this is never stale (between its creation and its writer's lock, microseconds pass).
_STALE_AFTER_SECONDS = 2.0


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
    """``text`` as an absolute path, refused first if a name in it is too long for the file system or not text.

    Checked on the text, before any file-system call (which would raise ``ENAMETOOLONG``): the
    last name gets a hidden temporary sibling, ``TEMP_OVERHEAD`` characters longer.
    """
    if not text.strip() or "\0" in text:
        raise _refuse(name, text, what)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a byte that is not UTF-8 (Python keeps it as a surrogate)
        byte = os.fsencode(text[exc.start])[0]
        raise _refuse(name, text, what, f"byte 0x{byte:02x} in it is not UTF-8 text, which Parquet and the "
                      "terminal need") from None
    try:
        out = Path(text).expanduser().absolute()
    except RuntimeError as exc:  # ~ with no home directory
        raise _refuse(name, text, what, str(exc)) from None
    except OSError as exc:  # a relative path, and the current directory was removed
        raise _refuse(name, text, what, f"the current directory is gone: {exc.strerror}") from None
    longest = max((len(os.fsencode(part)) for part in out.parts[1:-1]), default=0)
    last = len(os.fsencode(out.name))
    if longest > NAME_MAX or last > NAME_MAX - TEMP_OVERHEAD or len(os.fsencode(out)) > MAX_PATH:
        raise _refuse(name, text if len(text) <= 80 else text[:60] + "...", what,
                      f"a name in it is longer than {NAME_MAX - TEMP_OVERHEAD} bytes or the path longer than "
                      f"{MAX_PATH}")
    return out


def _resolved(out: Path, name: str, text: str, what: str, links: int = 0) -> Path:
    """``out`` with every symbolic link followed, also a dangling one (where it points is where the result
    would go); one line for a loop, a path through a file, or one that cannot be looked at."""
    try:
        return Path(os.path.realpath(out, strict=True))
    except FileNotFoundError:
        pass
    except NotADirectoryError:
        raise _refuse(name, text, what, f"{_nearest_existing(out)} is not a directory") from None
    except OSError as exc:  # ELOOP (a link to itself), EACCES
        raise _refuse(name, text, what, exc.strerror or str(exc)) from None
    if links > _MAX_LINKS:
        raise _refuse(name, text, what, os.strerror(errno.ELOOP))
    parent = out.parent if out.parent == out else _resolved(out.parent, name, text, what, links)
    entry = parent / out.name
    if os.path.islink(entry):  # dangling: resolve where it points
        return _resolved(parent / os.readlink(entry), name, text, what, links + 1)
    return entry


def _probe_writable(directory: Path, name: str, value: str | os.PathLike[str], allowed: str,
                    entry: str = "pfxab") -> None:
    """Create and remove a temporary file named like ``entry``'s in ``directory`` (the only honest test that
    ``entry`` can be written there: permissions, mounts, and names the file system refuses)."""
    if not directory.is_dir():
        raise _refuse(name, value, allowed, f"{directory} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=f".{entry}.", suffix=TEMP_SUFFIX)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise _refuse(name, value, allowed, f"cannot write in {directory}: {exc.strerror}") from None


def kind_of(manifest: Manifest | None) -> str | None:
    """Which kind of result a manifest describes (``None``: none, an empty directory); a sweep's, written before
    kinds existed, is the one that claims names without checksums; a unit of another age is ``"result"``."""
    if manifest is None or not manifest.owned:
        return None
    return manifest.kind or ("result" if manifest.checksums else "sweep")


def _kind_conflict(directory: Path, kind: str, files: Collection[str] | None) -> str | None:
    """Why a result of ``kind`` may not take ``directory``: it holds pfxab's result of another kind; else ``None``.

    A unit written before kinds existed is of the same kind when it holds the same files.
    """
    try:
        manifest = read_manifest(directory)
    except (ManifestError, OSError):
        return None  # not a manifest of ours: the ownership check says why
    theirs = kind_of(manifest)
    assert manifest is not None or theirs is None
    if theirs is None or theirs == kind or (theirs == "result" and manifest is not None and files is not None
                                            and set(manifest.checksums) == set(files)):
        return None
    assert manifest is not None
    return f"it holds {describe(manifest)}, not {KINDS.get(kind, kind)}"


def describe(manifest: Manifest) -> str:
    """What a directory holds, for a line: its kind, or the files of an older unit."""
    kind = kind_of(manifest)
    if kind in KINDS:
        return KINDS[kind]
    return f"a pfxab result ({', '.join(sorted(manifest.owned))})"


def lock_holder(directory: Path) -> str | None:
    """The pid of the live writer holding ``directory``'s lock (``"unknown"`` if it wrote none), or ``None``.

    The lock is ``flock`` on the directory itself (a sweep holds it while it runs); looking takes
    it shared for an instant, which only a holder's exclusive lock refuses.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return written_pid(directory)
    except OSError:
        return None
    finally:
        os.close(fd)  # also releases the shared lock
    return None


def written_pid(directory: Path) -> str:
    """The pid the lock holder wrote in :data:`LOCK_FILE` (never read through a link; "unknown" if none yet)."""
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return "unknown"
    try:
        text = os.read(fd, 32).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    return text if text.isdecimal() else "unknown"


def live_writer(path: Path) -> str | None:
    """Why nothing may be written at ``path``: it, or a directory it lies in, is held by a live sweep; else ``None``.

    Only directories whose manifest says they are a sweep's are looked at (another program's
    ``flock`` on, say, the home directory means nothing here).
    """
    for directory in (path, *path.parents):
        try:
            kind = kind_of(read_manifest(directory)) if directory.is_dir() else None
        except (ManifestError, OSError):
            kind = None
        if kind == "sweep" and (pid := lock_holder(directory)) is not None:
            return (f"another pfxab sweep, pid {pid}, is writing there" if directory == path else
                    f"it lies in {directory}, where another pfxab sweep, pid {pid}, is writing")
    return None


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
    kind: str | None = None,
    replace: bool = False,
) -> Path:
    """Refuse, with one line, an output directory that cannot take a result; returns where to write (resolved).

    ``result_files`` given: the directory is replaced as a unit by a result of ``kind`` made of
    these files, so it must be new, empty or hold nothing but what pfxab wrote there (its
    manifest's names) as a result of the same kind, and its parent must be writable. Not given (a
    sweep directory, written into): the directory itself must be writable, each of the names it
    ``writes`` must be absent or pfxab's, and it must not hold another kind's result; what else it
    holds is kept. ``replace`` allows another kind's result (never a file pfxab did not write, nor a
    directory a live sweep holds). The path is resolved here, once: write to the returned one.
    """
    text = os.fspath(path)
    what = "a new or empty directory" if result_files is not None else "a directory"
    if result_files is not None:
        what += f", or one holding only a result pfxab wrote ({', '.join(sorted(result_files))})"
    what += ", on a writable file system"
    out = _resolved(_absolute(text, name, what), name, text, what)
    if out.parent.is_dir():  # an old result a crash moved aside is put back first, and checked like any
        remove_stale_temporaries(out)
    if out.exists() and not out.is_dir():
        raise _refuse(name, text, what, "it exists and is not a directory")
    existing = _nearest_existing(out)
    if not existing.is_dir():
        raise _refuse(name, text, what, f"{existing} is not a directory")
    if (why := live_writer(out)) is not None:
        raise _refuse(name, text, what + ", that no other pfxab command is writing in (wait for it, or choose "
                      "another --out)", why)
    if out.is_dir() and (result_files is not None or writes):
        why = _not_ours(out, None if result_files is not None else writes)
        if why is None and kind is not None and not replace:
            why = _kind_conflict(out, kind, result_files)
            what += " (--replace replaces another kind's result)" if why is not None else ""
        if why:
            raise _refuse(name, text, what, why)
    if result_files is None:
        _probe_writable(existing, name, text, what, out.relative_to(existing).parts[0] if existing != out else "pfxab")
    else:
        parent = _nearest_existing(out.parent)
        _probe_writable(parent, name, text, what, out.relative_to(parent).parts[0])
    return out


def replaced_kind(path: Path, kind: str) -> str | None:
    """What ``--replace`` is about to replace at ``path``: another kind's result (described), or ``None``."""
    try:
        manifest = read_manifest(path) if path.is_dir() else None
    except (ManifestError, OSError):
        return None
    theirs = kind_of(manifest)
    return describe(manifest) if manifest is not None and theirs not in (None, kind) else None


def check_output_file(
    path: str | os.PathLike[str], suffixes: Collection[str], name: str = "out",
    ours: Callable[[Path], bool] | None = None,
) -> Path:
    """Refuse, with one line, an output file path that cannot take the file; returns where to write (resolved).

    An existing file is replaced only if it is a regular file (not a link, device, FIFO,
    socket) that ``ours(path)`` recognises as written by pfxab (no ``ours``: never).
    """
    text = os.fspath(path)
    what = (f"a file name ending in {' or '.join(suffixes)}, in a writable directory, new or a file pfxab "
            "wrote there")
    out = _absolute(text, name, what)
    if out.suffix.lower() not in {s.lower() for s in suffixes}:
        raise _refuse(name, text, what)
    out = _resolved(out.parent, name, text, what) / out.name  # the file itself is never followed: see below
    kind = entry_kind(out) if out.parent.is_dir() else None
    if kind == "dir" or kind == "other":
        raise _refuse(name, text, what, "it exists and is not a regular file")
    if kind == "file" and (ours is None or not ours(out)):
        raise _refuse(name, text, what, "it exists and pfxab did not write it; pfxab never replaces it")
    existing = _nearest_existing(out.parent)
    if not existing.is_dir():
        raise _refuse(name, text, what, f"{existing} is not a directory")
    _probe_writable(existing, name, text, what, out.relative_to(existing).parts[0])
    return out


def claim(directory: Path, names: Collection[str], kind: str = "sweep") -> None:
    """List ``names`` as pfxab's in ``directory``'s manifest before writing them; one line if one is not ours.

    For a directory written into piece by piece (a sweep's), by its one writer (who holds
    its lock). Claiming first means a crash never leaves an unlisted file of ours. A directory
    holding another kind's result (a run's) is refused: clear it first (:func:`clear_result`).
    """
    allowed = f"a directory whose entries of these names pfxab wrote ({', '.join(sorted(names))})"
    why = _not_ours(directory, names) or _kind_conflict(directory, kind, None)
    if why:
        raise _refuse("out", directory, allowed, why)
    manifest = read_manifest(directory) or Manifest()
    if not manifest.owned >= set(names) or manifest.kind != kind:
        write_file_atomically(directory / MANIFEST_NAME, manifest.claiming(names, kind).to_bytes())


def clear_result(directory: Path) -> None:
    """Remove the result pfxab wrote in ``directory`` (what ``--replace`` replaces when it writes into it).

    Only when every entry is pfxab's (listed in its manifest, a plain file or directory); the
    manifest goes last, so an interrupted clearing leaves listed names, never foreign-looking ones.
    """
    why = _not_ours(directory)
    if why:
        raise _refuse("out", directory, "a directory holding only a result pfxab wrote", why)
    for entry in sorted(os.listdir(directory)):
        if entry == MANIFEST_NAME:
            continue
        path = directory / entry
        if entry_kind(path) == "dir":
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    (directory / MANIFEST_NAME).unlink(missing_ok=True)
    _fsync_dir(directory)


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
        with _held(aside):  # the old result is in it: not stale while we move it
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
    out_dir: str | os.PathLike[str], files: Mapping[str, str | bytes], *, kind: str | None = None,
    replace: bool = False, replace_all: bool = False,
) -> Path:
    """Write ``files`` (name -> text or bytes) as the whole content of ``out_dir``, a result of ``kind``, as a unit.

    The files go into a hidden temporary sibling directory, then their manifest
    (:data:`~pfxab_flower.manifest.MANIFEST_NAME`: each file's size and sha256 and the kind,
    written last), are fsynced with it, and the directory is swapped into place (see the
    module docstring). Unless ``replace_all`` (a directory pfxab owns whole under the caller's
    lock, a sweep's run), an existing ``out_dir`` holding anything pfxab did not write there,
    another kind's result (unless ``replace``) or lying where a live sweep writes is refused
    (:class:`ConfigError`) and left alone. Any failure removes the temporary directory, leaves
    ``out_dir`` as it was and raises :class:`OutputError`. Returns the directory written
    (symbolic links resolved).
    """
    target = Path(os.path.realpath(Path(out_dir).expanduser()))
    if not replace_all and target.parent.is_dir():  # first: an old result a crash moved aside is put back, and
        remove_stale_temporaries(target)            # checked like any (a sweep's runs/ is cleaned by the sweep)
    entry = entry_kind(target)
    if entry not in (None, "dir"):
        raise _refuse("out", out_dir, "a directory", "it exists and is not a directory")
    if not replace_all:
        allowed = "a new or empty directory, or one holding only a result pfxab wrote"
        why = live_writer(target) or (_not_ours(target) if entry == "dir" else None)
        if why is None and entry == "dir" and kind is not None and not replace:
            why = _kind_conflict(target, kind, files)
        if why:
            raise _refuse("out", out_dir, allowed, why)
    data = {name: value if isinstance(value, bytes) else value.encode("utf-8") for name, value in files.items()}
    data[MANIFEST_NAME] = unit_manifest(data, kind).to_bytes()  # last: present only once every file is
    tmp: Path | None = None
    swapped = False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=TEMP_SUFFIX))
        with _held(tmp):  # while it is written: a later writer sees it is not stale
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
def _held(path: Path) -> Iterator[None]:
    """Hold ``flock`` on ``path`` (a temporary being written) for the block; the kernel drops it if we die."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Remove the temporary siblings that writers of ``target``'s directory left when they were killed; the removed.

    A temporary is ``.NAME.<8 random>.pfxab-tmp[.suffix]`` (:data:`_TEMPORARY`, any NAME: the
    suffix is ours), or ``.TARGET.<8 random>.old`` (a two-rename swap's old result: only beside
    ``target``, and put back first if ``target`` is missing). One is stale when no process holds
    its ``flock``: a live writer does, for as long as it writes.
    """
    removed: list[Path] = []
    old = re.compile(rf"\.{re.escape(target.name)}\.[a-z0-9_]{{8}}\.old")
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for item in entries:
        if not (_TEMPORARY.fullmatch(item.name) or old.fullmatch(item.name)):
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
            if old.fullmatch(item.name) and entry_kind(target) is None and entry_kind(path / "old") == "dir":
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
def atomic_file(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success fsync it and rename it to ``path``.

    For writers that want a file name (matplotlib, Parquet). On any failure the
    temporary file is removed and ``path`` keeps its old content; an ``OSError``
    becomes one :class:`OutputError` line. Temporaries a killed writer left beside
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
        if fd is not None:
            os.close(fd)


def write_file_atomically(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Replace one file whole (fsynced temporary file renamed over it)."""
    with atomic_file(path) as tmp:
        tmp.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return Path(path)


def save_or_keep(
    write: Callable[[Path], Path], out: Path | None, names: Collection[str]
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
