"""The landmine data set: find or fetch ``LandmineData.mat``, verify it, split each field.

The file (29 fields, Xue et al., JMLR 2007) is not shipped: it is looked up at ``--landmine-data``,
``PFXAB_LANDMINE_DATA`` and the cache directory, else downloaded with pooch, bounded in size and
time (:func:`bounded_download`); its sha256 is checked on every load. Where it is looked up and how
a download fails: docs/landmine.md ("Data").
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import re
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pfxab_flower.errors import ConfigError
from pfxab_flower.storage.cache import cache_dir

#: sha256 of the one file the rewards are defined on.
LANDMINE_SHA256 = "2163ab20a80e33a8b65593c48cf283c540599dcb291105e63fa4af2ce24c2bea"
ENV_VAR = "PFXAB_LANDMINE_DATA"
URL_ENV_VAR = "PFXAB_LANDMINE_URL"
FILE_NAME = "LandmineData.mat"
SOURCE_URL = (
    "https://github.com/daizhongxiang/Federated_Bayesian_Optimization/raw/"
    "9f46a1dfbbcfd5823e026ad9418a4cb881676ae9/LandmineData.mat"
)
#: The file's size in bytes: a server that sends more is not sending this file (an endless stream filled 8 MB).
LANDMINE_SIZE = 1_085_456
#: Seconds without a byte before a download is given up (a silent server must not hang the run).
DOWNLOAD_TIMEOUT = 30.0
#: Seconds a whole download may take (1 MB: seconds on any working link); a server that sends a byte every few
#: seconds never trips :data:`DOWNLOAD_TIMEOUT`. The wait can exceed it by at most one read, DOWNLOAD_TIMEOUT.
DOWNLOAD_DEADLINE = 120.0
#: The split of earlier federated tuning work (PyXAB, FTS), applied per field.
SPLIT = {"test_size": 0.5, "stratify": True, "random_state": 0}
SPLIT_ID = "train_test_split(test_size=0.5,stratify=y,random_state=0)"


@dataclass(frozen=True)
class FieldSplit:
    """One field's halves: the SVM is fit on ``train`` and scored on ``test``."""

    field: int
    X_train: np.ndarray
    X_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray


def cached_path() -> Path:
    """Where a fetched copy is kept: ``<cache dir>/landmine/LandmineData.mat``."""
    return cache_dir() / "landmine" / FILE_NAME


def source_url() -> str:
    return os.environ.get(URL_ENV_VAR) or SOURCE_URL


def _by_hand(url: str) -> str:
    return (
        f"download {FILE_NAME} (sha256 {LANDMINE_SHA256[:12]}...) from {url} by hand and put it at "
        f"{cached_path()} (or pass --landmine-data PATH, or set {ENV_VAR})"
    )


def bounded_download(url: str, output_file: str, pooch_: object = None, check_only: bool = False) -> None:
    """Download ``url`` into ``output_file`` (a pooch downloader): at most :data:`LANDMINE_SIZE` bytes, within
    :data:`DOWNLOAD_DEADLINE`; ``ValueError`` otherwise (pooch then removes the temporary file).

    Reads whatever arrives (``read1``), so the deadline is checked after every packet, not
    after a buffer that a dripping server never fills.
    """
    deadline = time.monotonic() + DOWNLOAD_DEADLINE
    request = urllib.request.Request(url, headers={"User-Agent": "pfxab-flower"})
    with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT) as response:
        declared = response.headers.get("Content-Length")
        expected = int(declared) if declared and declared.isdecimal() else None
        if expected is not None and expected > LANDMINE_SIZE:
            raise ValueError(f"the server announces {expected:,} bytes; the file has {LANDMINE_SIZE:,}")
        received = 0
        with open(output_file, "wb") as out:
            while chunk := response.read1(1 << 16):
                received += len(chunk)
                if received > LANDMINE_SIZE:
                    raise ValueError(f"the server sent more than the file's {LANDMINE_SIZE:,} bytes")
                if time.monotonic() > deadline:
                    raise ValueError(f"the download did not finish within {DOWNLOAD_DEADLINE:g} s "
                                     f"({received:,} of {LANDMINE_SIZE:,} bytes)")
                out.write(chunk)
        if expected is not None and received != expected:
            raise ValueError(f"IncompleteRead({received} bytes read, {expected - received} more expected)")


def _remove_stale_downloads(folder: Path) -> None:
    """Temporary files of downloads killed before they could clean up (older than any live download)."""
    if not folder.is_dir():
        return
    stale_before = time.time() - 2 * (DOWNLOAD_DEADLINE + DOWNLOAD_TIMEOUT)
    for entry in folder.glob("tmp*"):  # pooch's temporary names (tempfile.NamedTemporaryFile in this folder)
        with contextlib.suppress(OSError):
            if entry.is_file() and not entry.is_symlink() and entry.stat().st_mtime < stale_before:
                entry.unlink()


def fetch(url: str | None = None) -> Path:
    """Download the file into the cache directory, checked against its sha256; one-line error on any failure."""
    import pooch

    url = url or source_url()
    target = cached_path()
    pooch.get_logger().setLevel("WARNING")  # one line of ours says what happened, success or failure
    _remove_stale_downloads(target.parent)
    try:
        path = Path(
            pooch.retrieve(
                url,
                known_hash=f"sha256:{LANDMINE_SHA256}",
                fname=FILE_NAME,
                path=target.parent,
                downloader=bounded_download,
            )
        )
    except (OSError, ValueError, http.client.HTTPException) as exc:
        reason = _reason(exc)
        with contextlib.suppress(OSError):
            target.parent.rmdir()  # only if the download left it empty: nothing of a failed download stays
        raise ConfigError(f"landmine data download from {url} failed ({type(exc).__name__}: {reason}); "
                          f"{_by_hand(url)}") from exc
    print(f"pfxab: {FILE_NAME} was not found locally; downloaded it from {url} to {path} (sha256 checked)",
          file=sys.stderr)
    return path


def _reason(exc: Exception) -> str:
    """The useful part of a download error (requests nests the socket error several levels deep)."""
    text = " ".join(str(exc).split())
    if "does not match the known hash" in text:  # pooch's checksum error
        return "its sha256 is not the expected one"
    for pattern in (r"\[Errno -?\d+\] [^'\")>]+", r"IncompleteRead\(\d+ bytes read, \d+ more expected\)"):
        found = re.search(pattern, text)
        if found:
            return found.group(0)
    return text.split(". ")[0][:160]


def resolve_path(explicit: str | None = None) -> Path:
    """The data file to use: the explicit path, else ``$PFXAB_LANDMINE_DATA``, else the cached copy, else fetch it."""
    for source, value in (("landmine-data", explicit), (ENV_VAR, os.environ.get(ENV_VAR))):
        if value:
            path = Path(value).expanduser()
            if not path.is_file():
                raise ConfigError(f"{source}={value!r} is invalid; allowed: an existing file ({_by_hand(SOURCE_URL)})")
            return path
    path = cached_path()
    if path.is_file() and file_sha256(path) == LANDMINE_SHA256:
        return path
    return fetch()  # also replaces a cached copy that no longer matches its checksum


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_fields(path: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """All 29 fields' features ``(N_m, 9)`` float64 and labels ``(N_m,)`` int, after the sha256 check."""
    actual = file_sha256(path)
    if actual != LANDMINE_SHA256:
        raise ConfigError(f"landmine data file {str(path)!r} has sha256 {actual[:12]}..., not the expected one; "
                          f"{_by_hand(SOURCE_URL)}")
    import scipy.io

    mat = scipy.io.loadmat(path)
    features = [np.asarray(x, dtype=np.float64) for x in mat["feature"][0]]
    labels = [np.asarray(y).reshape(-1).astype(np.int64) for y in mat["label"][0]]
    return features, labels


def split_field(field: int, X: np.ndarray, y: np.ndarray) -> FieldSplit:
    """The spec's per-field split: stratified halves, ``random_state=0``."""
    from sklearn.model_selection import train_test_split

    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=SPLIT["test_size"], stratify=y, random_state=SPLIT["random_state"]
    )
    return FieldSplit(field, X_train, X_test, y_train, y_test)


def load_splits(fields: tuple[int, ...], explicit: str | None = None) -> tuple[list[FieldSplit], str]:
    """The chosen fields' splits and the data file's sha256 (part of every cache key)."""
    path = resolve_path(explicit)
    features, labels = load_fields(path)
    return [split_field(f, features[f], labels[f]) for f in fields], LANDMINE_SHA256
