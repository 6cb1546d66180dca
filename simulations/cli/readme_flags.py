"""Writes the README's list of ``pfxab run``'s flags from the command's parser (itself derived from the declarations).

The README's "``pfxab run --help`` lists every flag (...)", choice flags with their choices, so a new algorithm,
problem or flag reaches it without a hand edit: ``python -m pfxab_flower.simulations.cli.readme_flags`` rewrites
that parenthesis only (``--check``: exit 1 if stale, writing nothing); tests fail until it is run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from pfxab_flower.storage.generated_files import regenerate

COMMAND = "python -m pfxab_flower.simulations.cli.readme_flags"
README = Path(__file__).resolve().parents[2] / "README.md"
OPENING = "`pfxab run --help` lists every flag\n("
CLOSING = "; `tests/test_cli.py` checks this"
WIDTH = 110


def flags() -> list[str]:
    """``pfxab run``'s flags in its parser's order, each as the README shows it: with its choices (``--noise
    {uniform,...}``) or a metavar of its own (``--out DIR``), else the flag alone."""
    from pfxab_flower.simulations.cli.main import build_parser

    parser = build_parser(["run"])
    commands = next(a for a in parser._actions if a.dest == "command").choices
    run = cast("dict[str, argparse.ArgumentParser]", commands)["run"]
    shown = []
    for action in run._actions:
        if action.help == argparse.SUPPRESS:  # not listed by --help either (a former flag, refused)
            continue
        for flag in action.option_strings:
            if flag.startswith("--") and flag != "--help":
                named = isinstance(action.metavar, str) and action.metavar != action.dest.upper()  # {a,b}, DIR
                shown.append(f"`{flag} {action.metavar}`" if named else f"`{flag}`")
    return shown


def paragraph(items: list[str]) -> str:
    """The flags joined with commas, in lines of at most :data:`WIDTH` characters (a longer flag alone on one)."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + len(item) + 2 <= WIDTH:
            lines[-1] += f" {item},"
        else:
            lines.append(f"{item},")
    return "\n".join(lines)[:-1]  # the last comma: the README's sentence goes on


def rewritten(text: str) -> str:
    """``text`` (the README) with the list between :data:`OPENING` and :data:`CLOSING` written from the parser."""
    start = text.index(OPENING) + len(OPENING)
    end = text.index(CLOSING, start)
    return text[:start] + paragraph(flags()) + text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    return regenerate(argv, command=COMMAND, description=__doc__.splitlines()[0], target=README,
                      render=rewritten, what="the README's list",
                      stale=f"README.md's flag list is stale: run {COMMAND}")

if __name__ == "__main__":
    sys.exit(main())
