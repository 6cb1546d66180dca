"""``pfxab report DIR``: Markdown tables of a finished sweep (final regret, or rewards per alpha) or comparison."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sub-command's arguments (``pfxab_flower.simulations.cli.main`` names it and gives its one-line help)."""
    parser.add_argument("dir", help="directory written by `pfxab sweep --out` or `pfxab compare --out`")


def handle(args: argparse.Namespace) -> int:
    from pfxab_flower.simulations.reports.markdown_tables import report

    print(report(args.dir), end="")
    return 0
