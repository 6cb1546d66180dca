"""A benchmark script's start: re-executed in a loopback-only network namespace (it starts Ray), else one line."""

from __future__ import annotations

import sys
from collections.abc import Callable


def run_in_loopback(main: Callable[[], int], program: str) -> None:
    """Run ``main`` inside a loopback-only namespace (``tests/loopback_namespace.py``); exit with its status."""
    from tests.loopback_namespace import enter

    reason = enter([sys.executable, *sys.orig_argv[1:]], program)
    if reason is not None:
        print(f"{program}: error: needs a loopback-only network namespace ({reason})", file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(main())
