"""Which entries of a directory pfxab owns, and whether the files it wrote are still what it wrote.

Every directory pfxab writes into has a ``pfxab-manifest.json`` listing the names it owns (claimed
before they are written), the size and sha256 of a result's files (:func:`verify`) and the result's
kind, so one command never replaces another's result. Everything else there is the user's.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: The manifest's file name (a regular, visible file: the user can see what pfxab claims).
MANIFEST_NAME = "pfxab-manifest.json"
FORMAT = 1
#: The manifest says who wrote it: a file of that name that does not is the user's.
WRITER = "pfxab-flower"
#: Largest manifest read (a sweep's lists a handful of names, a result's a few files).
_MAX_BYTES = 1 << 20


class ManifestError(ValueError):
    """A file named like the manifest that is not one of ours (the message says why)."""


@dataclass(frozen=True)
class Manifest:
    """The names pfxab owns in one directory, and the size and sha256 of the files it wrote as a unit."""

    owned: frozenset[str] = frozenset()
    checksums: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    #: What the directory holds (``run``, ``comparison``, ``sweep``, ``sweep-run``); ``None``: written before kinds.
    kind: str | None = None

    def to_bytes(self) -> bytes:
        record: dict[str, object] = {
            "format": FORMAT,
            "written_by": WRITER,
            "owned": sorted(self.owned),
            "files": {name: {"size": size, "sha256": digest}
                      for name, (size, digest) in sorted(self.checksums.items())},
        }
        if self.kind is not None:
            record["kind"] = self.kind
        return (json.dumps(record, indent=2) + "\n").encode("utf-8")

    def claiming(self, names: Collection[str], kind: str | None = None) -> Manifest:
        """This manifest with ``names`` owned too (and its kind ``kind``, if it had none)."""
        return Manifest(self.owned | frozenset(names), dict(self.checksums), self.kind or kind)

    def recording(self, checksums: Mapping[str, tuple[int, str]]) -> Manifest:
        """This manifest with the size and sha256 of the files ``checksums`` names (owned, from now on) recorded."""
        return Manifest(self.owned | frozenset(checksums), {**self.checksums, **checksums}, self.kind)


def checksum(data: bytes) -> tuple[int, str]:
    """``(size, sha256 hex)`` of ``data``."""
    return len(data), hashlib.sha256(data).hexdigest()


def unit_manifest(files: Mapping[str, bytes], kind: str | None = None) -> Manifest:
    """The manifest of a result of ``kind`` written as a unit: owns its files, with their checksums."""
    return Manifest(frozenset(files), {name: checksum(data) for name, data in files.items()}, kind)


def _parse(data: bytes) -> Manifest:
    record = json.loads(data.decode("utf-8"))
    if not (isinstance(record, dict) and record.get("written_by") == WRITER and record.get("format") == FORMAT
            and isinstance(record.get("owned"), list) and isinstance(record.get("files"), dict)):
        raise ValueError("not a pfxab manifest")
    owned = record["owned"]
    if not all(isinstance(name, str) and _plain_name(name) for name in owned):
        raise ValueError("a listed name is not a plain file name")
    checksums = {}
    for name, entry in record["files"].items():
        if not (name in owned and isinstance(entry, dict) and isinstance(entry.get("size"), int)
                and isinstance(entry.get("sha256"), str)):
            raise ValueError(f"the entry of {name!r} is malformed")
        checksums[name] = (entry["size"], entry["sha256"])
    kind = record.get("kind")
    if kind is not None and not isinstance(kind, str):
        raise ValueError("its kind is not a name")
    return Manifest(frozenset(owned), checksums, kind)


def _plain_name(name: str) -> bool:
    return bool(name) and name not in (".", "..", MANIFEST_NAME) and "/" not in name and "\0" not in name


def read_manifest(directory: Path) -> Manifest | None:
    """The manifest of ``directory``; ``None`` if it has none; :class:`ManifestError` if the name is taken.

    Only a regular file (never followed through a symbolic link) holding a manifest this
    module wrote counts: anything else of that name is the user's.
    """
    path = directory / MANIFEST_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ManifestError(f"{path} is not a pfxab manifest ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ManifestError(f"{path} is not a pfxab manifest (not a regular file)")
        data = os.read(fd, _MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        if len(data) > _MAX_BYTES:
            raise ValueError("too large")
        return _parse(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path} is not a pfxab manifest ({exc})") from None


def entry_kind(path: Path) -> str | None:
    """``"file"``, ``"dir"``, ``"other"`` (a link, FIFO, socket, device) or ``None`` if absent; never follows links."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    return "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "other"


def foreign_entries(directory: Path, names: Collection[str] | None = None) -> list[str]:
    """Entries of ``directory`` pfxab must not touch, sorted: not listed in its manifest, or not a plain file
    or directory any more (a link, a FIFO). ``names`` given: only those names are looked at (the ones about
    to be written); otherwise every entry. A name-squatting manifest counts as foreign."""
    try:
        manifest = read_manifest(directory) or Manifest()
    except ManifestError:
        return [MANIFEST_NAME]
    present = [n for n in names if entry_kind(directory / n) is not None] if names is not None else [
        entry.name for entry in os.scandir(directory) if entry.name != MANIFEST_NAME]
    return sorted(n for n in present if n not in manifest.owned or entry_kind(directory / n) == "other")


def verify(directory: Path, expected: Collection[str]) -> str | None:
    """Why the unit in ``directory`` is not exactly the files ``expected`` as pfxab wrote them; ``None`` if it is.

    Each expected file must be a regular file with the size and sha256 its manifest
    (written last) recorded, and the manifest must list exactly ``expected``.
    """
    try:
        manifest = read_manifest(directory)
    except ManifestError as exc:
        return str(exc).replace(str(directory / MANIFEST_NAME), MANIFEST_NAME)
    if manifest is None:
        return f"{MANIFEST_NAME} is missing (the run never finished, or an older pfxab wrote it)"
    if set(manifest.checksums) != set(expected):
        return f"{MANIFEST_NAME} does not list this run's files"
    for name in sorted(expected):
        size, digest = manifest.checksums[name]
        why = _differs(directory / name, size, digest)
        if why is not None:
            return f"{name} {why}"
    return None


#: How much of a file is read at a time while its checksum is computed.
_CHUNK = 1 << 20


def verify_recorded(directory: Path, names: Collection[str]) -> str | None:
    """Why a file of ``names`` in ``directory`` is not as pfxab wrote it; ``None`` if each is.

    For files written into a directory one by one (a sweep's tables): each must be recorded in
    the manifest (written after it) and match its size and sha256 there.
    """
    try:
        manifest = read_manifest(directory)
    except ManifestError as exc:
        return str(exc).replace(str(directory / MANIFEST_NAME), MANIFEST_NAME)
    for name in names:
        if manifest is None or name not in manifest.checksums:
            return f"{name} has no checksum in {MANIFEST_NAME} (written by an earlier pfxab, or not finished)"
        why = _differs(directory / name, *manifest.checksums[name])
        if why is not None:
            return f"{name} {why}"
    return None


def file_checksum(path: Path) -> tuple[int, str]:
    """``(size, sha256 hex)`` of the regular file ``path``, read a chunk at a time (never through a link)."""
    hasher, size = hashlib.sha256(), 0
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        while chunk := os.read(fd, _CHUNK):
            hasher.update(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return size, hasher.hexdigest()


def _differs(path: Path, size: int, digest: str) -> str | None:
    """Why ``path`` is not the regular file of ``size`` bytes and sha256 ``digest`` pfxab wrote; ``None`` if it is.

    The size is checked on the open file before a byte is read; then the file is hashed a
    chunk at a time (memory bounded whatever its size), never followed through a link.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return "is missing"
    except OSError:
        return "is not a regular file"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "is not a regular file"
        if info.st_size != size:
            return f"has {info.st_size} bytes, not the {size} written"
        hasher, left = hashlib.sha256(), size + 1  # one byte more: a file that grew meanwhile is caught
        while left > 0 and (chunk := os.read(fd, min(_CHUNK, left))):
            hasher.update(chunk)
            left -= len(chunk)
        if left != 1 or hasher.hexdigest() != digest:
            return "was changed after it was written (sha256 differs)"
        return None
    finally:
        os.close(fd)


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (never through a link); ``ValueError`` if it holds more than ``limit``.

    For files pfxab wrote and reads back whole (``comparison.json``, ``sweep.json``): a damaged
    or replaced one of gigabytes is refused on its size, not read into memory.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path.name} is not a regular file")
        data = b""
        while len(data) <= limit and (chunk := os.read(fd, min(_CHUNK, limit + 1 - len(data)))):
            data += chunk
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ValueError(f"{path.name} holds more than {limit:,} bytes")
    return data
