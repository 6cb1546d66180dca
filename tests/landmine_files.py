"""Where the tests find the landmine data, and a local HTTP server that serves it.

The suite never reaches outside the machine: the data is the copy next to the
repository (``<repo>/../shared/data/landmine``), and downloads are pointed
(``PFXAB_LANDMINE_URL``) at a server on 127.0.0.1 started in a thread.
"""

from __future__ import annotations

import functools
import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_COPY = REPO.parent / "shared" / "data" / "landmine" / "LandmineData.mat"
#: A URL nothing listens on (port 9, discard): a download attempt fails at once, locally.
NOWHERE = "http://127.0.0.1:9/LandmineData.mat"


def shared_copy() -> Path:
    """The data file next to the repository, or skip the test with the reason."""
    if not SHARED_COPY.is_file():
        pytest.skip(f"landmine data absent: no {SHARED_COPY} (tests do not download it)")
    return SHARED_COPY


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
