"""An output path stays the place that was checked: checked by identity, or its directory held by handle.

A unit (a run's, a comparison's result) is written only if the path still has the identity it had when
checked (:class:`PathIdentity`); a directory written piece by piece (a sweep's) is held open and written
through its handle (:class:`HeldDirectory`): moved, the writes follow it; removed, they fail; never elsewhere.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

#: ``(st_dev, st_ino)``: which file a name pointed at.
Inode = tuple[int, int]


def inode_of(path: Path) -> Inode | None:
    """The ``(st_dev, st_ino)`` of ``path`` itself (a link is not followed), or ``None`` if nothing is there."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return info.st_dev, info.st_ino


@dataclass(frozen=True)
class PathIdentity:
    """What a checked output path was when it was checked: its own inode, or its nearest existing ancestor's."""

    path: Path
    #: the inode at ``path`` when checked (``None``: nothing was there)
    inode: Inode | None
    #: the nearest existing directory at or above ``path`` when checked, and its inode
    anchor: Path
    anchor_inode: Inode

    @classmethod
    def of(cls, path: Path) -> PathIdentity:
        """The identity of ``path`` (resolved, as the check returns it) now."""
        anchor = path
        while (found := inode_of(anchor)) is None and anchor != anchor.parent:
            anchor = anchor.parent
        assert found is not None  # "/" exists
        return cls(path, inode_of(path), anchor, found)

    def changed(self, *, created_by_us: bool = False) -> str | None:
        """Why ``path`` is no longer what was checked (moved, removed, replaced, made by another); ``None`` if it is.

        ``created_by_us``: the caller itself has made ``path`` since (a sweep's directory):
        only its ancestor's identity is then compared.
        """
        now = inode_of(self.path)
        if self.inode is not None:
            if now is None:
                return "it was moved or removed after it was checked, before anything was written"
            if now != self.inode:
                return "another directory took its name after it was checked, before anything was written"
            return None
        if now is not None and not created_by_us:
            return "something was made at that name by another program after it was checked"
        if inode_of(self.anchor) != self.anchor_inode:
            return (f"{self.anchor} was moved, removed or replaced after the path was checked, before anything "
                    "was written")
        return None


#: Where a process sees the directories it holds open (Linux): ``/proc/self/fd/N`` resolves to the open directory.
_FD_ROOT = Path("/proc/self/fd")


class HeldDirectory:
    """A directory opened once and written through the handle (``/proc/self/fd/N``) until :meth:`close`.

    Paths below :attr:`via` reach the directory itself wherever it has been moved to; once it is
    removed, creating anything below it fails (``ENOENT``), so nothing is ever written into what
    took its name. :attr:`path` is how the user named it (for messages); :meth:`where` is where
    it is now. Without ``/proc`` (not Linux) :attr:`via` is the path itself and each write checks
    the identity instead (:meth:`check`).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        info = os.fstat(self.fd)
        self.inode: Inode = (info.st_dev, info.st_ino)
        handle = _FD_ROOT / str(self.fd)
        self.via = handle if _same(handle, self.inode) else path

    def close(self) -> None:
        os.close(self.fd)

    def removed(self) -> bool:
        """Whether the directory has been removed (a removed directory has no links left)."""
        return os.fstat(self.fd).st_nlink == 0 or (self.via == self.path and inode_of(self.path) != self.inode)

    def where(self) -> Path | None:
        """Where the directory is now (``None`` once it is removed)."""
        if self.removed():
            return None
        if self.via == self.path:
            return self.path
        try:
            return Path(os.readlink(self.via))
        except OSError:
            return None

    def moved_to(self) -> Path | None:
        """Where the directory was moved to while it was held, or ``None`` (not moved, or removed)."""
        now = self.where()
        return now if now is not None and now != self.path else None

    def check(self) -> None:
        """Raise ``FileNotFoundError`` if the directory was removed (or, without ``/proc``, is not at its path)."""
        if self.removed():
            raise FileNotFoundError(2, "the directory was removed while it was being written", str(self.path))

    def shown(self, text: str) -> str:
        """``text`` with the handle's path (``/proc/self/fd/N``) written as the user named the directory."""
        return text.replace(str(self.via), str(self.path)) if self.via != self.path else text


def _same(handle: Path, inode: Inode) -> bool:
    """Whether ``handle`` (``/proc/self/fd/N``) leads to the directory of ``inode``."""
    try:
        info = os.stat(handle)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and (info.st_dev, info.st_ino) == inode
