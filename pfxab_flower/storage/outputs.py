"""A result directory written as a unit of its kind, and the one place every output helper is imported from.

:func:`write_files_atomically` writes into a hidden sibling, fsyncs and swaps it into place, so an older
result is kept whole or replaced whole (docs/reliability.md). Paths: :mod:`~pfxab_flower.storage.output_paths`;
ownership: :mod:`~pfxab_flower.storage.result_ownership`; single files: :mod:`~pfxab_flower.storage.atomic_files`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Collection, Mapping
from functools import partial
from pathlib import Path

from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.storage.atomic_files import (
    SWAPPED_OUT_SUFFIX,
    TEMP_SUFFIX,
    OutputError,
    atomic_file,
    current_umask,
    fsync_dir,
    held,
    leftover_owner,
    remove_stale_temporaries,
    write_bytes_synced,
    write_file_atomically,
)
from pfxab_flower.storage.identity import HeldDirectory, PathIdentity, inode_of
from pfxab_flower.storage.manifest import MANIFEST_NAME, entry_kind, unit_manifest
from pfxab_flower.storage.output_paths import MAX_PATH, NAME_MAX, TEMP_OVERHEAD, check_output_dir, check_output_file
from pfxab_flower.storage.result_ownership import (
    KINDS,
    LOCK_FILE,
    claim,
    clear_result,
    describe,
    kind_conflict,
    kind_of,
    live_writer,
    lock_holder,
    not_ours,
    refusal,
    replaced_kind,
    written_pid,
)

__all__ = [
    "KINDS", "LOCK_FILE", "MAX_PATH", "NAME_MAX", "TEMP_OVERHEAD", "TEMP_SUFFIX", "HeldDirectory", "OutputError",
    "PathIdentity", "atomic_file", "check_output_dir", "check_output_file", "claim", "clear_result", "describe",
    "kind_of", "leftover_owner", "live_writer", "lock_holder", "refusal", "remove_stale_temporaries", "replaced_kind",
    "save_or_keep", "write_bytes_synced", "write_file_atomically", "write_files_atomically", "written_pid",
]

_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2
_AT_FDCWD = -100


def _renameat2(a: Path, b: Path, flags: int) -> bool:
    """Linux ``renameat2(a, b, flags)``; False where the kernel or file system does not support it."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), os.fspath(b))


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths (Linux ``renameat2``); False where unsupported."""
    return _renameat2(a, b, _RENAME_EXCHANGE)


def _swap_if_unchanged(tmp: Path, target: Path, checked: PathIdentity, name: str | os.PathLike[str]) -> Path | None:
    """:func:`_swap_into_place`, but only if ``target`` is still what was ``checked``, decided atomically.

    Nothing was there: renamed into place with ``RENAME_NOREPLACE`` (two runs into one new ``--out``
    finishing together: the second is refused, not written over the first). The directory that was
    checked: exchanged, and swapped back if what came out is not it. One line (:class:`ConfigError`) if not.
    """
    allowed = "a directory that stays what was checked while the command runs"
    if checked.inode is None:
        try:
            if _renameat2(tmp, target, _RENAME_NOREPLACE):
                return None
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            raise refusal("out", name, allowed, "something was made at that name by another program after it was "
                          "checked") from None
    elif _exchange(tmp, target):
        if inode_of(tmp) == checked.inode:
            return tmp  # the checked result now lives at the temporary name
        _exchange(tmp, target)  # what came out is another's: back where it was
        raise refusal("out", name, allowed, "another directory took its name after it was checked")
    return _swap_into_place(tmp, target)  # no renameat2 here: the check just before is all there is


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
        aside = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=SWAPPED_OUT_SUFFIX))
        with held(aside):  # the old result is in it: not stale while we move it
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
    replace: bool = False, replace_all: bool = False, checked: PathIdentity | None = None,
) -> Path:
    """Write ``files`` (name -> text or bytes) as the whole content of ``out_dir``, a result of ``kind``, as a unit.

    The files go into a hidden temporary sibling directory, then their manifest
    (:data:`~pfxab_flower.storage.manifest.MANIFEST_NAME`: each file's size and sha256 and the kind,
    written last), are fsynced with it, and the directory is swapped into place (see the
    module docstring). Unless ``replace_all`` (a directory pfxab owns whole under the caller's
    lock, a sweep's run), an existing ``out_dir`` holding anything pfxab did not write there,
    another kind's result (unless ``replace``) or lying where a live sweep writes is refused
    (:class:`ConfigError`) and left alone; so is one that is no longer what was ``checked``
    (:class:`~pfxab_flower.storage.identity.PathIdentity`: moved, replaced or made by another since
    its path was checked; decided atomically at the swap). With ``replace_all`` only the unit's own
    files may be there. Any failure removes the temporary directory, leaves ``out_dir`` as it was and
    raises :class:`OutputError`. Returns the directory written (symbolic links resolved; not for
    ``replace_all``, whose path may lead through a held directory's handle, ``/proc/self/fd/N``: resolved,
    it would name where the directory is now, or ``... (deleted)``, a path to make anew).
    """
    target = Path(out_dir) if replace_all else Path(os.path.realpath(Path(out_dir).expanduser()))
    if not replace_all and target.parent.is_dir():  # first: an old result a crash moved aside is put back, and
        remove_stale_temporaries(target)            # checked like any (a sweep's runs/ is cleaned by the sweep)
    entry = entry_kind(target)
    if entry not in (None, "dir"):
        raise refusal("out", out_dir, "a directory", "it exists and is not a directory")
    if not replace_all:
        allowed = "a new or empty directory, or one holding only a result pfxab wrote"
        why = (checked.changed() if checked is not None else None) or live_writer(target) or \
            (not_ours(target) if entry == "dir" else None)
        if why is None and entry == "dir" and kind is not None and not replace:
            why = kind_conflict(target, kind, files)
        if why:
            raise refusal("out", out_dir, allowed, why)
    data = {name: value if isinstance(value, bytes) else value.encode("utf-8") for name, value in files.items()}
    data[MANIFEST_NAME] = unit_manifest(data, kind).to_bytes()  # last: present only once every file is
    if replace_all and entry == "dir":  # ours whole, but only its own files: a user's file put inside is kept
        foreign = [name for name in sorted(os.listdir(target)) if entry_kind(target / name) == "other"
                   or (name not in data and leftover_owner(name) is None) or entry_kind(target / name) == "dir"]
        if foreign:
            raise refusal("out", out_dir, "a directory holding only the files pfxab writes there",
                          f"{foreign[0]!r} there is not one of them; pfxab never replaces or removes it")
    tmp: Path | None = None
    swapped = False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=TEMP_SUFFIX))
        with held(tmp):  # while it is written: a later writer sees it is not stale
            for name, content in data.items():
                write_bytes_synced(tmp / name, content)
            os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes 0700: give the directory the usual mode
            fsync_dir(tmp)
            swap = _swap_into_place if checked is None else partial(_swap_if_unchanged, checked=checked, name=out_dir)
            tmp, swapped = swap(tmp, target), True  # tmp: the previous result, to delete
            fsync_dir(target.parent)
    except OSError as exc:
        state = "were replaced but not confirmed on disk" if swapped else "are unchanged"
        raise OutputError(f"{spelled('out')}={str(out_dir)!r} could not be written ({exc.strerror or exc}); "
                          f"allowed: a location with room for the result; the previous contents {state}") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def save_or_keep(
    write: Callable[[Path], Path], out: Path | None, names: Collection[str]
) -> tuple[Path | None, OutputError | None]:
    """``write(out)`` (if ``out``): where it wrote, or the error to raise *after* the result is printed.

    A computed result is never thrown away because its files could not be written (a
    full disk after an hour's run, or ``--out`` changed under the run: moved, replaced, a
    user's file put in it): the command prints it first, then fails with one line naming
    what was not written (exit status 2).
    """
    if out is None:
        return None, None
    try:
        return write(out), None
    except ConfigError as exc:  # an OutputError, or a refusal of what the directory has become
        return None, OutputError(f"{exc}; not written: {', '.join(names)} (the result is printed on stdout)")
