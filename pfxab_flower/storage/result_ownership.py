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
from pfxab_flower.storage.atomic_files import fsync_dir, leftover_owner, write_file_atomically
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
#: How a line names a live sweep holding a directory (anything else holding it is named as another program).
SWEEP_HOLDER = "another pfxab sweep"



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
    """Who holds ``directory``'s lock, as a line names it (:func:`holder_named`); ``None`` if nobody does.

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
        return holder_named(directory, os.fstat(fd))
    except OSError:
        return None
    finally:
        os.close(fd)  # also releases the shared lock
    return None


def holder_named(directory: Path, info: os.stat_result) -> str:
    """The holder of the ``flock`` on the directory of ``info``, named honestly for a line.

    The kernel says which process took the lock (``/proc/locks``); it is "another pfxab sweep"
    when that is the pid the sweep wrote in :data:`LOCK_FILE`, or a process running pfxab: a stale
    or forged pid file (or none) beside another program's lock names that program by its pid and name.
    """
    written = written_pid(directory)
    holders = flock_holders(info)
    if not holders:  # no /proc/locks (not Linux): the pid file is all there is
        return f"{SWEEP_HOLDER}, pid {written}" if written != "unknown" else "another program (pid unknown)"
    if written in {str(pid) for pid in holders}:
        return f"{SWEEP_HOLDER}, pid {written}"
    pid = holders[0]
    if is_pfxab(pid):  # a sweep that has not written its pid file yet (or a stale one lies beside it)
        return f"{SWEEP_HOLDER}, pid {pid}"
    return f"another program, pid {pid} ({command_of(pid)})"


def is_pfxab(pid: int) -> bool:
    """Whether process ``pid`` runs pfxab: the ``pfxab`` program, or Python running its command-line module."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            words = cmdline.read(1 << 16).split(b"\0")
    except OSError:
        return False
    return (any(os.path.basename(word) == b"pfxab" for word in words[:2])
            or b"pfxab_flower.simulations.cli.main" in words)


def holding(holder: str) -> str:
    """What the lock's ``holder`` (:func:`holder_named`) is doing: a sweep writes, another program holds a lock."""
    return f"{holder}, is writing there" if holder.startswith(SWEEP_HOLDER) else f"{holder}, holds a lock on it"


def flock_holders(info: os.stat_result) -> list[int]:
    """The pids holding an ``flock`` on the file of ``info``, as ``/proc/locks`` lists them (``[]`` if unknown)."""
    device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            rows = [line.split() for line in locks]
    except OSError:
        return []
    return [int(row[4]) for row in rows if len(row) > 5 and row[1] == "FLOCK" and row[5] == device
            and row[4].isdecimal()]


def command_of(pid: int) -> str:
    """The name of process ``pid`` (``/proc/PID/comm``), made printable; ``"unknown"`` if it cannot be read."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as comm:
            return repr(comm.read(64).strip())
    except OSError:
        return "unknown"


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
        if kind == "sweep" and (holder := lock_holder(directory)) is not None:
            return holding(holder) if directory == path else f"it lies in {directory}: {holding(holder)}"
    return None


def not_ours(directory: Path, names: Collection[str] | None = None) -> str | None:
    """Why pfxab may not write ``names`` in ``directory``: the first one it does not own.

    ``names`` ``None``: every entry, at every depth (:func:`foreign_tree`): what replacing the
    whole directory would remove (a user's file inside a sweep's ``runs/`` too).
    """
    try:
        foreign = foreign_entries(directory, names) if names is not None else foreign_tree(directory)
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


def foreign_tree(directory: Path) -> list[str]:
    """Every entry below ``directory`` pfxab does not own, as paths relative to it (sorted per level).

    An entry is pfxab's when the manifest of its directory lists it; a directory pfxab owns
    without a manifest of its own (a sweep's ``runs/``) holds only directories that carry one
    (each checked the same way) and the temporaries a killed writer left.
    """
    foreign = foreign_entries(directory)
    if foreign == [MANIFEST_NAME]:
        return foreign
    manifest = read_manifest(directory) or Manifest()
    for name in sorted(manifest.owned - set(foreign)):
        inner = directory / name
        if entry_kind(inner) != "dir":
            continue
        try:
            listed = read_manifest(inner) is not None
        except ManifestError:
            listed = False
        if listed:
            foreign += [f"{name}/{entry}" for entry in foreign_tree(inner)]
            continue
        for entry in sorted(os.listdir(inner)):
            unit = inner / entry
            if leftover_owner(entry) is not None and entry_kind(unit) in ("file", "dir"):
                continue  # a killed writer's temporary: the next write beside it removes it
            try:
                unit_listed = entry_kind(unit) == "dir" and read_manifest(unit) is not None
            except ManifestError:
                unit_listed = False
            foreign += [f"{name}/{entry}/{deeper}" for deeper in foreign_tree(unit)] if unit_listed \
                else [f"{name}/{entry}"]
    return foreign


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
