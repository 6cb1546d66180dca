"""What ``pfxab simulate`` shows of ``flwr run``'s streamed log: the run's own lines, readable anywhere.

ANSI colour codes are removed unless the output is a terminal; Flower's untrue notice about the
default number of SuperNodes and Ray's long traceback for each failed client message are dropped
(the server logs each failure in one line).
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
