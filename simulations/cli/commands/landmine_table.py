"""``pfxab landmine-table``: compute the shipped table of landmine rewards (every field, every cell centre to a depth).

Runs read this table instead of fitting SVMs on a cold start (:mod:`pfxab_flower.problems.landmine_table`).
Generation is CPU-heavy (docs/landmine.md gives its cost), resumes from the evaluation cache and
writes the file atomically.
"""

from __future__ import annotations

import argparse
import sys

from pfxab_flower.errors import ConfigError, spelled
from pfxab_flower.printable import shown
from pfxab_flower.simulations.cli.commands.options import add_parameter_flag

#: Deeper than this is more than a million fits per field: certainly a typo.
_MAX_DEPTH = 16


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sub-command's arguments (``pfxab_flower.simulations.cli.main`` names it and gives its one-line help)."""
    from pfxab_flower.problems.landmine_table import PACKAGE_TABLE

    parser.add_argument("--depth", default="12", metavar="D", help="every cell centre of depths 0..D (default: 12)")
    add_parameter_flag(parser, "workers", default=1)
    parser.add_argument("--landmine-data", default=None, metavar="PATH", help="path to LandmineData.mat")
    parser.add_argument("--output", default=str(PACKAGE_TABLE), metavar="FILE",
                        help=f"where to write the table (default: {PACKAGE_TABLE})")


def _int_in(name: str, value: str, low: int, high: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or not low <= number <= high:
        raise ConfigError(f"{spelled(name)}={value!r} is invalid; allowed: an integer in {low}..{high}")
    return number


def handle(args: argparse.Namespace) -> int:
    from pfxab_flower.problems.landmine import generate_table
    from pfxab_flower.problems.landmine_table import is_reward_table
    from pfxab_flower.schema.catalogue import parse_workers
    from pfxab_flower.storage.outputs import check_output_file

    depth = _int_in("depth", args.depth, 0, _MAX_DEPTH)
    workers = parse_workers(args.workers)
    # refuse now, not after an hour of fitting: a device, FIFO, link, /proc, or a file that is not a table of ours
    output = check_output_file(args.output, (".npz",), name="output", ours=is_reward_table)
    table = generate_table(depth, args.landmine_data, workers=workers)
    table.write(output)
    print(f"landmine-table: wrote {shown(args.output)} (depth {depth}, {table.values.size} values, "
          f"{table.generation_seconds:.0f} s)", file=sys.stderr)
    return 0
