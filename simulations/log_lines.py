"""What ``pfxab simulate`` shows of ``flwr run``'s streamed log: the run's own lines, readable anywhere.

Flower's log, as streamed, carries three things a reader should not have to decode:

* ANSI colour codes, also when the output goes to a file or a pipe: removed unless the
  destination is a terminal;
* the notice "default simulated SuperNodes changed from 10 to 2", printed even though
  ``pfxab simulate`` sets ``num-supernodes`` to the run's clients: dropped (it is not true
  of this run);
* a Ray traceback of 50-odd lines for every message a client failed (an injected dropout, an
  objective error): dropped, since the server logs each failure in one line with its phase
  and the client's own message (``pfxab: phase 2: client 1 (Flower node N) sent no usable
  local-means reply: ...``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

ANSI = re.compile(r"\x1b\[[0-9;]*m")
MISLEADING = ("default simulated SuperNodes changed from",)
#: A line that opens one of Flower's client-failure blocks (the record's text, colour codes removed).
BLOCK_START = re.compile(
    r"^ERROR\s*:\s+(An exception was raised when processing a message|Traceback \(most recent|ray::)"
)
#: A line that opens a new log record (so ends a failure block).
RECORD_START = re.compile(r"^(pfxab:|(INFO|WARNING|DEBUG|ERROR)\s*:\s)")


def readable_lines(lines: Iterable[str], keep_colour: bool = False) -> Iterator[str]:
    """``lines`` without colour codes (unless ``keep_colour``), the misleading notice and failure tracebacks."""
    skipping = False
    for line in lines:
        plain = ANSI.sub("", line)
        if BLOCK_START.match(plain):
            skipping = True
            continue
        if skipping and not RECORD_START.match(plain):
            continue
        skipping = False
        if any(notice in plain for notice in MISLEADING):
            continue
        yield line if keep_colour else plain
