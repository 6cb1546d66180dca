"""Landmine data for the tests: a small generated file, the real one only when named, and a local HTTP server.

Why a generated file: the real ``LandmineData.mat`` is not part of the repository, and
a fresh clone must pass its tests with nothing beside it. The loader, the checksum
check, the download, the reward table and the command line are tested on a small
file in the same format (:func:`write_landmine_format_file`: the same variables, cell
layout and dtypes, a few samples per field). The product accepts only the real file
(its sha256 is a constant), so a test that loads the generated file replaces that
constant for its own duration (:func:`accepting`), and a test that starts ``pfxab``
in a fresh process starts it through ``tests/pfxab_accepting.py``, which does the same
in the child; the product's own check is exercised unchanged by the tests that expect
a refusal. Only the tests that reproduce numbers of the real data use the real file,
and only when ``PFXAB_LANDMINE_DATA`` names it (:func:`real_landmine_file`; otherwise
they skip): no test reads a path outside its checkout unless told to.

Downloads are pointed (``PFXAB_LANDMINE_URL``) at a server on 127.0.0.1 started in a
thread (:func:`serve`); nothing reaches outside the machine.
"""

from __future__ import annotations

import functools
import http.server
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pfxab_flower.problems import landmine_data

#: The real data file, if the person running the tests named it (read once, before any test changes the variable).
GIVEN_REAL_FILE = os.environ.get(landmine_data.ENV_VAR, "")
#: A URL nothing listens on (port 9, discard): a download attempt fails at once, locally.
NOWHERE = "http://127.0.0.1:9/LandmineData.mat"
#: ``pfxab`` in a fresh process that accepts the checksum given as its first argument (see the module doc).
ACCEPTING_CLI = Path(__file__).resolve().with_name("pfxab_accepting.py")
#: Fields of the real file, and the two terrains they come from (fields 0-14 and 15-28).
NUM_FIELDS, FIRST_OF_SECOND_TERRAIN, NUM_FEATURES = 29, 15, 9


@dataclass(frozen=True)
class LandmineFile:
    """A landmine-format file and its sha256 (what the product's checksum check is told to accept)."""

    path: Path
    sha256: str
    sizes: tuple[int, ...]
    positives: tuple[int, ...]


def write_landmine_format_file(path: Path, seed: int = 0) -> LandmineFile:
    """Write a small file laid out like ``LandmineData.mat``; return it with its checksum and field sizes.

    Like the real file (``scipy.io.loadmat``): keys ``feature`` and ``label``, each a 1 x 29
    cell array; ``feature[0][m]`` float64 ``(N_m, 9)``, ``label[0][m]`` uint8 ``(N_m, 1)`` in
    {0, 1}. Here ``N_m`` is 24 to 30 with 4 to 6 mines (enough for the stratified half split
    and a ROC-AUC on either half), mines shifted away from the rest in a few features that
    differ between the two terrains, so the SVM's reward depends on ``(C, gamma)``.
    """
    import scipy.io

    rng = np.random.default_rng(seed)
    features = np.empty((1, NUM_FIELDS), dtype=object)
    labels = np.empty((1, NUM_FIELDS), dtype=object)
    sizes, positives = [], []
    for m in range(NUM_FIELDS):
        n, mines = 24 + 2 * (m % 4), 4 + m % 3
        y = np.zeros(n, dtype=np.uint8)
        y[rng.choice(n, mines, replace=False)] = 1
        X = rng.normal(size=(n, NUM_FEATURES)) * rng.uniform(0.5, 3.0, NUM_FEATURES)
        shifted = slice(0, 3) if m < FIRST_OF_SECOND_TERRAIN else slice(5, 8)
        X[y == 1, shifted] += rng.uniform(0.5, 2.0)
        features[0, m], labels[0, m] = X, y.reshape(-1, 1)
        sizes.append(n)
        positives.append(mines)
    path.parent.mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(path, {"feature": features, "label": labels}, format="5")
    return LandmineFile(path, landmine_data.file_sha256(path), tuple(sizes), tuple(positives))


@contextmanager
def accepting(data: LandmineFile) -> Iterator[None]:
    """Within the block, the product's checksum check accepts ``data`` (and nothing else) in this process."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(landmine_data, "LANDMINE_SHA256", data.sha256)
        yield


def accepting_cli(data: LandmineFile) -> list[str]:
    """The command line that starts ``pfxab`` in a fresh process accepting ``data`` (append the arguments)."""
    return [sys.executable, str(ACCEPTING_CLI), data.sha256]


def real_landmine_file() -> Path:
    """The real ``LandmineData.mat`` named by ``PFXAB_LANDMINE_DATA``, or skip the test (one reason line).

    A name that is not a file fails the test: the person asked for the real data.
    """
    if not GIVEN_REAL_FILE:
        pytest.skip(f"needs the real LandmineData.mat: set {landmine_data.ENV_VAR}=PATH to run it")
    path = Path(GIVEN_REAL_FILE).expanduser()
    if not path.is_file():
        pytest.fail(f"{landmine_data.ENV_VAR}={GIVEN_REAL_FILE!r} is not a file", pytrace=False)
    return path


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves a directory; ``/truncated/NAME`` announces NAME's full length but sends half of it,
    ``/silent/...`` sends nothing for 3 s, ``/drip/NAME`` sends NAME a byte every 0.1 s (never silent long
    enough for a read timeout), ``/endless/...`` sends zeros without end and without a length."""

    def log_message(self, *args) -> None:  # keep the test output clean
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/silent/"):  # accepts the request, then says nothing for a while
            time.sleep(3.0)
            return
        if self.path.startswith(("/drip/", "/endless/")):
            self._stream(drip=self.path.startswith("/drip/"))
            return
        if not self.path.startswith("/truncated/"):
            super().do_GET()
            return
        data = (Path(self.directory) / self.path.removeprefix("/truncated/")).read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self.close_connection = True


    def _stream(self, drip: bool) -> None:
        self.send_response(200)
        if drip:
            self.send_header("Content-Length", str((Path(self.directory) / self.path.removeprefix("/drip/")).stat()
                                                   .st_size))
        self.end_headers()
        try:
            for _ in range(600 if drip else 10**6):  # a minute of dripping, or 64 GB of zeros: the client stops first
                self.wfile.write(b"\0" if drip else bytes(1 << 16))
                self.wfile.flush()
                if drip:
                    time.sleep(0.1)
        except OSError:  # the client hung up: what a bounded download does
            pass
        self.close_connection = True


@contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1 (a free port) in a thread; yield the base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
