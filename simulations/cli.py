"""The ``pfxab`` command line: one sub-command per module in :mod:`pfxab_flower.simulations.commands`.

Every error a user can cause (a bad flag, a bad value, a missing data file, an
objective that returns NaN) is printed as one line on stderr, with exit status
2, before any work starts; nothing is written. A bad value is named by its flag
(``--noise-sigma=-1.0 is invalid``; :func:`pfxab_flower.errors.spelled_as`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

import pfxab_flower
from pfxab_flower.errors import ConfigError, ObjectiveError, RunStoppedError, spelled_as

#: Modules that each add one sub-command with ``register(subparsers)``.
COMMANDS = (
    "pfxab_flower.simulations.commands.run",
    "pfxab_flower.simulations.commands.compare",
    "pfxab_flower.simulations.commands.calibrate",
    "pfxab_flower.simulations.commands.sweep",
    "pfxab_flower.simulations.commands.plot",
    "pfxab_flower.simulations.commands.report",
    "pfxab_flower.simulations.commands.simulate",
    "pfxab_flower.simulations.commands.landmine_table",
)


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (no usage block) and exit 2.

    Abbreviated flags are refused (``allow_abbrev=False``): ``--alph 0.3`` silently
    meaning ``--alpha`` today would silently mean something else once a flag
    sharing the prefix is added.
    """

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)  # also for every sub-parser (they are built with this class)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="pfxab", description="Personalised federated X-armed bandits on Flower.")
    parser.add_argument("--version", action="version", version=f"pfxab {pfxab_flower.__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for name in COMMANDS:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with spelled_as("flag"):
            return int(args.handler(args) or 0)
    except (ConfigError, ObjectiveError, RunStoppedError) as exc:
        print(f"pfxab {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"pfxab {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
