"""Which results are pfxab's, of which kind, and which directory a live sweep holds.

pfxab touches only the names its manifest (:mod:`pfxab_flower.storage.manifest`) lists; a run, a comparison
and a sweep each own their kind of directory, replaced by another kind only on ``--replace``; a
sweep holds an ``flock`` on its directory while it writes. Every refusal is one ``ConfigError`` line.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Collection
from pathlib import Path

from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.storage.atomic_files import fsync_dir, write_file_atomically
from pfxab_flower.storage.manifest import (
    MANIFEST_NAME,
    Manifest,
    ManifestError,
    entry_kind,
    foreign_entries,
    read_manifest,
)

#: The kinds of result, as a command's error names what a directory holds.
KINDS = {
    "run": "a run's result (pfxab run --out)",
    "comparison": "a comparison (pfxab compare --out)",
    "sweep": "a sweep (pfxab sweep --out)",
    "sweep-run": "one run of a sweep (its runs/)",
}
#: The file in a directory a writer holds (a sweep's) naming its pid; the lock itself is ``flock`` on the directory.
LOCK_FILE = ".pfxab-sweep.lock"



def refusal(name: str, value: str | os.PathLike[str], allowed: str, why: str = "") -> ConfigError:
    """The one line refusing output ``name``'s ``value``: what is wrong with it (``why``) and what is ``allowed``."""
    detail = f" ({why})" if why else ""
    return ConfigError(f"{spelled(name)}={str(value)!r} is invalid{detail}; allowed: {allowed}")


def kind_of(manifest: Manifest | None) -> str | None:
    """Which kind of result a manifest describes (``None``: none, an empty directory); a sweep's, written before
    kinds existed, is the one that claims names without checksums; a unit of another age is ``"result"``."""
    if manifest is None or not manifest.owned:
        return None
    return manifest.kind or ("result" if manifest.checksums else "sweep")


def kind_conflict(directory: Path, kind: str, files: Collection[str] | None) -> str | None:
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


def not_ours(directory: Path, names: Collection[str] | None = None) -> str | None:
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


def replaced_kind(path: Path, kind: str) -> str | None:
    """What ``--replace`` is about to replace at ``path``: another kind's result (described), or ``None``."""
    try:
        manifest = read_manifest(path) if path.is_dir() else None
    except (ManifestError, OSError):
        return None
    theirs = kind_of(manifest)
    return describe(manifest) if manifest is not None and theirs not in (None, kind) else None


def claim(directory: Path, names: Collection[str], kind: str = "sweep") -> None:
    """List ``names`` as pfxab's in ``directory``'s manifest before writing them; one line if one is not ours.

    For a directory written into piece by piece (a sweep's), by its one writer (who holds
    its lock). Claiming first means a crash never leaves an unlisted file of ours. A directory
    holding another kind's result (a run's) is refused: clear it first (:func:`clear_result`).
    """
    allowed = f"a directory whose entries of these names pfxab wrote ({', '.join(sorted(names))})"
    why = not_ours(directory, names) or kind_conflict(directory, kind, None)
    if why:
        raise refusal("out", directory, allowed, why)
    manifest = read_manifest(directory) or Manifest()
    if not manifest.owned >= set(names) or manifest.kind != kind:
        write_file_atomically(directory / MANIFEST_NAME, manifest.claiming(names, kind).to_bytes())


def clear_result(directory: Path) -> None:
    """Remove the result pfxab wrote in ``directory`` (what ``--replace`` replaces when it writes into it).

    Only when every entry is pfxab's (listed in its manifest, a plain file or directory); the
    manifest goes last, so an interrupted clearing leaves listed names, never foreign-looking ones.
    """
    why = not_ours(directory)
    if why:
        raise refusal("out", directory, "a directory holding only a result pfxab wrote", why)
    for entry in sorted(os.listdir(directory)):
        if entry == MANIFEST_NAME:
            continue
        path = directory / entry
        if entry_kind(path) == "dir":
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    (directory / MANIFEST_NAME).unlink(missing_ok=True)
    fsync_dir(directory)
