"""When each phase of a run ended, seen from the server: a hook on the core's ``ServerMachine``.

Every adapter delegates its decisions to ``ServerMachine``, so wrapping three of its methods (for
the length of a ``with`` block) times a Flower run on either API without touching the product code.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pfxab_flower.algorithms.phased import ServerMachine


@dataclass
class Timeline:
    """``perf_counter`` stamps of one run; :meth:`figures` turns them into the benchmark's columns."""

    started: float = field(default_factory=time.perf_counter)
    first_instruction: float | None = None
    phase_ends: list[float] = field(default_factory=list)
    finished: float | None = None
    returned: float | None = None

    def figures(self) -> dict[str, float | int | None]:
        """Start-up, first phase, later phases (mean and max), final round, shutdown, total (seconds).

        ``startup`` runs from the call to the first instruction (Python imports excluded,
        Ray and the server app included); ``first_phase`` is reported apart because the
        simulated clients' first message also pays for their one-time set-up; ``per_phase``
        is the mean of the phases after it (the target's "per phase beyond start-up").
        """
        if self.first_instruction is None or self.finished is None or self.returned is None:
            return {"completed": False}
        ends = [self.first_instruction, *self.phase_ends]
        phases = [b - a for a, b in itertools.pairwise(ends)]
        later = phases[1:]
        return {
            "startup_s": self.first_instruction - self.started,
            "first_phase_s": phases[0] if phases else None,
            "per_phase_s": statistics.fmean(later) if later else None,
            "max_phase_s": max(later) if later else None,
            "final_round_s": self.finished - ends[-1],
            "shutdown_s": self.returned - self.finished,
            "total_s": self.returned - self.started,
        }


def _wrap(method: Callable, before: Callable[[], None] | None, after: Callable[[], None] | None) -> Callable:
    def wrapped(self, *args, **kwargs):
        if before is not None:
            before()
        out = method(self, *args, **kwargs)
        if after is not None:
            after()
        return out

    return wrapped


@contextmanager
def server_timeline() -> Iterator[Timeline]:
    """Stamp every ``ServerMachine`` of this process while the block runs."""
    timeline = Timeline()
    originals = {name: getattr(ServerMachine, name) for name in ("next_instruction", "collect", "finish")}

    def first() -> None:
        if timeline.first_instruction is None:
            timeline.first_instruction = time.perf_counter()

    def closed() -> None:
        timeline.phase_ends.append(time.perf_counter())

    def done() -> None:
        timeline.finished = time.perf_counter()

    ServerMachine.next_instruction = _wrap(originals["next_instruction"], first, None)
    ServerMachine.collect = _wrap(originals["collect"], None, closed)
    ServerMachine.finish = _wrap(originals["finish"], None, done)
    try:
        yield timeline
    finally:
        for name, method in originals.items():
            setattr(ServerMachine, name, method)
        timeline.returned = time.perf_counter()
