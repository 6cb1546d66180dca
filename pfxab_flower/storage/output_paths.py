"""Output paths checked before any work: one line for a path that cannot take the result.

A path is resolved once (links followed, a loop refused), its names checked on the text (UTF-8,
short enough for the file system), its writability *probed* (permission bits do not tell about
read-only mounts or ``/proc``), and what it holds checked for ownership; the command then writes to
the path returned, never one re-read after the run.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable, Collection
from pathlib import Path

from pfxab_flower.storage.atomic_files import TEMP_SUFFIX, remove_stale_temporaries
from pfxab_flower.storage.manifest import entry_kind
from pfxab_flower.storage.result_ownership import kind_conflict, live_writer, not_ours, refusal

#: What a temporary sibling adds to a name: ``.`` + name + ``.`` + 8 random characters + suffix + ``.parquet``.
TEMP_OVERHEAD = 2 + 8 + len(TEMP_SUFFIX) + len(".parquet")
#: Longest name in a directory (Linux file systems: 255 bytes) and longest path (``PATH_MAX`` 4096 less room for
#: the names a result adds below it, e.g. ``runs/<run id>/grid_curve.csv``).
NAME_MAX = 255
MAX_PATH = 4096 - 256


#: Deepest chain of symbolic links followed while a path is resolved (the kernel's own limit).
_MAX_LINKS = 40



def nearest_existing(path: Path) -> Path:
    """``path`` itself if it exists, else its nearest ancestor that does."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _absolute(text: str, name: str, what: str) -> Path:
    """``text`` as an absolute path, refused first if a name in it is too long for the file system or not text.

    Checked on the text, before any file-system call (which would raise ``ENAMETOOLONG``): the
    last name gets a hidden temporary sibling, ``TEMP_OVERHEAD`` characters longer.
    """
    if not text.strip() or "\0" in text:
        raise refusal(name, text, what)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a byte that is not UTF-8 (Python keeps it as a surrogate)
        byte = os.fsencode(text[exc.start])[0]
        raise refusal(name, text, what, f"byte 0x{byte:02x} in it is not UTF-8 text, which Parquet and the "
                      "terminal need") from None
    try:
        out = Path(text).expanduser().absolute()
    except RuntimeError as exc:  # ~ with no home directory
        raise refusal(name, text, what, str(exc)) from None
    except OSError as exc:  # a relative path, and the current directory was removed
        raise refusal(name, text, what, f"the current directory is gone: {exc.strerror}") from None
    longest = max((len(os.fsencode(part)) for part in out.parts[1:-1]), default=0)
    last = len(os.fsencode(out.name))
    if longest > NAME_MAX or last > NAME_MAX - TEMP_OVERHEAD or len(os.fsencode(out)) > MAX_PATH:
        raise refusal(name, text if len(text) <= 80 else text[:60] + "...", what,
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
        raise refusal(name, text, what, f"{nearest_existing(out)} is not a directory") from None
    except OSError as exc:  # ELOOP (a link to itself), EACCES
        raise refusal(name, text, what, exc.strerror or str(exc)) from None
    if links > _MAX_LINKS:
        raise refusal(name, text, what, os.strerror(errno.ELOOP))
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
        raise refusal(name, value, allowed, f"{directory} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=f".{entry}.", suffix=TEMP_SUFFIX)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise refusal(name, value, allowed, f"cannot write in {directory}: {exc.strerror}") from None


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
        raise refusal(name, text, what, "it exists and is not a directory")
    existing = nearest_existing(out)
    if not existing.is_dir():
        raise refusal(name, text, what, f"{existing} is not a directory")
    if (why := live_writer(out)) is not None:
        raise refusal(name, text, what + ", that no other pfxab command is writing in (wait for it, or choose "
                      "another --out)", why)
    if out.is_dir() and (result_files is not None or writes):
        why = not_ours(out, None if result_files is not None else writes)
        if why is None and kind is not None and not replace:
            why = kind_conflict(out, kind, result_files)
            what += " (--replace replaces another kind's result)" if why is not None else ""
        if why:
            raise refusal(name, text, what, why)
    if result_files is None:
        _probe_writable(existing, name, text, what, out.relative_to(existing).parts[0] if existing != out else "pfxab")
    else:
        parent = nearest_existing(out.parent)
        _probe_writable(parent, name, text, what, out.relative_to(parent).parts[0])
    return out


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
        raise refusal(name, text, what)
    out = _resolved(out.parent, name, text, what) / out.name  # the file itself is never followed: see below
    kind = entry_kind(out) if out.parent.is_dir() else None
    if kind == "dir" or kind == "other":
        raise refusal(name, text, what, "it exists and is not a regular file")
    if kind == "file" and (ours is None or not ours(out)):
        raise refusal(name, text, what, "it exists and pfxab did not write it; pfxab never replaces it")
    existing = nearest_existing(out.parent)
    if not existing.is_dir():
        raise refusal(name, text, what, f"{existing} is not a directory")
    _probe_writable(existing, name, text, what, out.relative_to(existing).parts[0])
    return out
