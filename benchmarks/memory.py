"""Peak memory of a whole run, every process included (Ray's GCS, raylet, workers, a SuperLink...).

A run on Flower is a dozen processes, most of them not our children (``flwr run``
detaches its SuperLink). Each benchmark case is started with a unique marker in
its environment, which every process it starts inherits; a background thread
sums, a few times a second, the resident memory of every live process carrying it.

Two sums are kept: ``rss`` (what ``ps`` shows; shared pages such as Ray's object
store and common libraries count once per process, so it overstates) and ``pss``
(proportional set size: shared pages split between the processes sharing them;
the honest total). Both are read from ``/proc`` (Linux only; elsewhere 0).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pfxab_flower.simulations.processes import processes_with_marker

MARKER_ENV = "PFXAB_BENCH_MARKER"


def _kib(path: Path, field: str) -> int:
    try:
        for line in path.read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):  # the process ended meanwhile
        pass
    return 0


class PeakMemory:
    """Samples the memory of this process and every process carrying ``marker``; keeps the peaks (MiB)."""

    def __init__(self, marker: str | None = None, interval: float = 0.2) -> None:
        self.marker = marker if marker is not None else os.environ.get(MARKER_ENV, "")
        self.interval = interval
        self.peak_rss_mib = 0.0
        self.peak_pss_mib = 0.0
        self.peak_processes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="peak-memory", daemon=True)

    def sample(self) -> None:
        pids = {os.getpid(), *(processes_with_marker(self.marker) if self.marker else [])}
        rss = sum(_kib(Path(f"/proc/{pid}/status"), "VmRSS:") for pid in pids)
        pss = sum(_kib(Path(f"/proc/{pid}/smaps_rollup"), "Pss:") for pid in pids)
        self.peak_rss_mib = max(self.peak_rss_mib, rss / 1024.0)
        self.peak_pss_mib = max(self.peak_pss_mib, pss / 1024.0)
        self.peak_processes = max(self.peak_processes, len(pids))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

