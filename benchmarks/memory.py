"""Peak memory of a whole run, every process included (Ray's GCS, raylet, workers, a SuperLink...).

A background thread sums the memory of every live process carrying the case's marker in its
environment: ``rss`` (overstates shared pages) and ``pss`` (shared pages split; Linux only), via psutil.
"""

from __future__ import annotations

import os
import threading

import psutil

from pfxab_flower.simulations.flower.leftover_processes import processes_with_marker

MARKER_ENV = "PFXAB_BENCH_MARKER"


def _memory(pid: int) -> tuple[int, int]:
    """``(rss, pss)`` of ``pid`` in bytes; 0 for what cannot be read (the process ended, is not ours, no PSS here)."""
    try:
        process = psutil.Process(pid)
        rss = process.memory_info().rss
    except psutil.Error:
        return 0, 0
    try:
        pss = getattr(process.memory_full_info(), "pss", 0)
    except psutil.Error:
        pss = 0
    return rss, pss


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
        memory = [_memory(pid) for pid in pids]
        self.peak_rss_mib = max(self.peak_rss_mib, sum(rss for rss, _ in memory) / 2**20)
        self.peak_pss_mib = max(self.peak_pss_mib, sum(pss for _, pss in memory) / 2**20)
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

