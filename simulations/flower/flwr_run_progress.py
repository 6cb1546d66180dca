"""A progress bar under ``pfxab simulate``'s streamed log: the run's phases, read from the log's own lines.

The ServerApp runs in another process; its log says how many phases the run can take (``at most N phases``),
then one line per phase and one for the final exchange. On a terminal the bar counts them below the log;
elsewhere (a file, a pipe, a test) the lines pass unchanged and no bar is drawn.
"""

from __future__ import annotations

import re
from typing import IO, Any

#: The strategy's summary line with the run's bound, one line per completed phase, and the last exchange.
BOUND = re.compile(r"at most (\d+) phases")
PHASE = re.compile(r"pfxab: phase \d+[ :(]")
FINAL = "pfxab: final exchange:"


class PhaseBar:
    """Writes the streamed log to ``log`` and, on a terminal, keeps a bar of the phases done below it."""

    def __init__(self, log: IO[str]) -> None:
        self.log = log
        self.bar: Any = None
        self.shown = log.isatty()

    def write(self, line: str) -> None:
        """Pass one log line on (above the bar, if one is shown) and count it if it ends a phase."""
        if self.bar is None:
            self.log.write(line)
            self.log.flush()
        else:
            self.bar.write(line.rstrip("\n"), file=self.log)
        if not self.shown:
            return
        if self.bar is None and (bound := BOUND.search(line)):
            from tqdm import tqdm

            self.bar = tqdm(total=int(bound[1]) + 1, desc="pfxab simulate", unit="round", file=self.log,
                            leave=False, bar_format="{desc}: {n}/{total} Flower rounds at most [{elapsed}]")
        elif self.bar is not None and PHASE.search(line):
            self.bar.update(1)
        elif self.bar is not None and FINAL in line:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
