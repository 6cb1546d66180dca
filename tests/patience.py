"""How long a test waits for something real: a deadline measured on a quiet machine, stretched on a busy one.

A test that waits a fixed number of seconds for a reply within a round timeout, a process to
exit or a server to come up passes on the quiet 2-core machine it was measured on and fails
where other work shares the CPUs: a surviving client missed a fixed 20 s round timeout at load
average 8, and the run lost its quorum. So every such deadline is :func:`patient` of its quiet
value: multiplied by how many times more work than CPUs the machine has (its load average over
the last minute per CPU, at least 1), read when the test asks. Deadlines that are what a test
checks (a straggler later than the round timeout, a download's own deadline) stay as they are.
The hang guards (pytest-timeout's limits) are stretched the same way, by :func:`slowdown`
at each test's start (``tests/conftest.py``).
"""

from __future__ import annotations

import os


def slowdown() -> float:
    """How many times slower than on an idle machine a process here runs: load average (1 min) per CPU, >= 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


def patient(seconds: float) -> float:
    """``seconds`` (enough on an idle machine, with a margin) stretched by the current :func:`slowdown`."""
    return seconds * slowdown()
