"""The one loop of the project's file generators: ``--check`` says whether a generated file is stale, else rewrite it.

Three files are generated from the declarations (pyproject.toml's run-config table, the README's flag list,
``strategies/named.py``); each generator gives only how its text is made, so ``--check`` and the atomic write
are the same for all of them (docs/extending.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pfxab_flower.storage.atomic_files import write_file_atomically


def regenerate(argv: Sequence[str] | None, *, command: str, description: str, target: Path,
               render: Callable[[str], str], what: str, stale: str,
               written: Callable[[bool], object] | None = None) -> int:
    """Run one generator; its exit status.

    ``render(current)`` is the file's fresh text from its current one (``""`` when missing). With ``--check``
    nothing is written: a stale file (``what``, in the help) prints ``stale`` and gives status 1. Otherwise a
    changed text replaces the file whole (an import or a reader never sees half of it), and ``written(changed)``
    may report it.
    """
    parser = argparse.ArgumentParser(prog=command, description=description)
    parser.add_argument("--check", action="store_true", help=f"exit 1 if {what} is stale; write nothing")
    args = parser.parse_args(argv)
    current = target.read_text(encoding="utf-8") if target.exists() else ""
    fresh = render(current)
    if args.check:
        if fresh != current:
            print(stale, file=sys.stderr)
            return 1
        return 0
    if fresh != current:
        write_file_atomically(target, fresh)
    if written is not None:
        written(fresh != current)
    return 0
