"""``pfxab report DIR``: Markdown tables of a finished sweep (final regret, or rewards per alpha) or comparison."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="print Markdown tables of a finished sweep or comparison directory")
    parser.add_argument("dir", help="directory written by `pfxab sweep --out` or `pfxab compare --out`")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from pfxab_flower.simulations.report import report

    print(report(args.dir), end="")
    return 0
