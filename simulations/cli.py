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
from collections.abc import Collection, Sequence
from typing import Any

import pfxab_flower
from pfxab_flower.errors import ConfigError, ObjectiveError, RunStoppedError, spelled_as

#: Each sub-command: the module that adds its arguments (``add_arguments(parser)``) and runs it
#: (``handle(args)``), and its one-line help. Order is ``pfxab --help``'s.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "run one algorithm on one federation"),
    "compare": ("compare", "run every algorithm on the same federation and seeds; print mean and sd per algorithm"),
    "calibrate": ("calibrate",
                  "sample each site's objective and propose nu1 and rho that eliminate within the horizon"),
    "sweep": ("sweep", "run every configuration of an experiment TOML (resumable)"),
    "plot": ("plot", "draw the figure of a finished sweep or comparison directory"),
    "report": ("report", "print Markdown tables of a finished sweep or comparison directory"),
    "simulate": ("simulate", "run on Flower's Ray simulation engine through `flwr run .`"),
    "landmine-table": ("landmine_table", "compute the landmine reward table shipped in the package"),
}
COMMANDS_PACKAGE = "pfxab_flower.simulations.commands"


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (no usage block) and exit 2.

    Abbreviated flags are refused (``allow_abbrev=False``): ``--alph 0.3`` silently
    meaning ``--alpha`` today would silently mean something else once a flag
    sharing the prefix is added.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # also for every sub-parser (they are built with this class)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The ``pfxab`` parser; only the sub-commands in ``commands`` (default: all) get their arguments.

    A sub-command's module (and what it imports: numpy, the algorithms, ...) is imported
    only to add its arguments, so ``pfxab --version`` and ``pfxab --help`` import none of
    them and answer at once (``benchmarks/cli_startup.py``).
    """
    parser = OneLineParser(prog="pfxab", description="Personalised federated X-armed bandits on Flower.")
    parser.add_argument("--version", action="version", version=f"pfxab {pfxab_flower.__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for name, (module_name, help_text) in COMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text)
        if commands is None or name in commands:
            module = importlib.import_module(f"{COMMANDS_PACKAGE}.{module_name}")
            module.add_arguments(sub)
            sub.set_defaults(handler=module.handle)
    return parser


def chosen_command(argv: Sequence[str]) -> str | None:
    """The sub-command ``argv`` names: its first word that is not an option (``pfxab`` has no option with a value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(commands=[command] if (command := chosen_command(words)) in COMMANDS else [])
    args = parser.parse_args(words)
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
