"""``pfxab compare``: every algorithm on the same federation and seeds, summarised in one table.

``--out DIR`` writes a comparison directory that ``pfxab plot`` and ``pfxab report`` read.
"""

from __future__ import annotations

import argparse
import sys

from pfxab_flower.algorithms.registry import available_names
from pfxab_flower.printable import shown
from pfxab_flower.schema.catalogue import parse_algorithms, parse_seeds, parse_workers
from pfxab_flower.simulations.cli.commands.options import (
    add_parameter_flag,
    add_replace_flag,
    add_run_options,
    config_from_args,
)
from pfxab_flower.simulations.flower.ray_cluster import executor_address, fits_on, ray_runner
from pfxab_flower.storage.outputs import PathIdentity, check_output_dir, replaced_kind, save_or_keep


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sub-command's arguments (``pfxab_flower.simulations.cli.main`` names it and gives its one-line help)."""
    add_run_options(parser, skip=("algorithm", "seed"))
    parser.add_argument("--seeds", default=None, metavar="SEEDS",
                        help="seeds: an integer, a range like 0-9, or a list like 0,3,5 (default: 0-9)")
    add_parameter_flag(parser, "algorithms", default=",".join(available_names()))  # of an extra: if installed
    add_parameter_flag(parser, "workers", default=1)
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="write the comparison here (comparison.json; runs, summary and curves as CSV and "
                             "Parquet), for `pfxab plot` and `pfxab report`")
    add_parameter_flag(parser, "executor")
    add_parameter_flag(parser, "ray_address")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_replace_flag(parser)


def handle(args: argparse.Namespace) -> int:
    from pfxab_flower.studies.comparison import COMPARE_FILES, DEFAULT_SEEDS, compare

    seeds = parse_seeds(args.seeds) if args.seeds is not None else list(DEFAULT_SEEDS)
    algorithms = parse_algorithms(args.algorithms)
    workers = parse_workers(args.workers)
    base = config_from_args(args, algorithm=algorithms[0], seed=seeds[0])
    ray_address = executor_address(args.executor, args.ray_address)  # reachable, before any work
    out = replaced = checked = None
    if args.out is not None:  # before the runs, not after them; written where it was checked, if it is still that
        out = check_output_dir(args.out, result_files=COMPARE_FILES, kind="comparison", replace=args.replace)
        checked = PathIdentity.of(out)
        replaced = replaced_kind(out, "comparison") if args.replace else None

    runner = ray_runner(ray_address) if ray_address is not None else None
    with fits_on(ray_address):  # landmine's optimum grid
        comparison = compare(base, algorithms, seeds, workers=workers, progress=not args.no_progress,
                             runner=runner)
    written, unsaved = save_or_keep(lambda path: comparison.write(path, replace=args.replace, checked=checked), out,
                                    COMPARE_FILES)
    print(comparison.table())
    if written is not None:  # stdout: the table
        print(f"pfxab compare: wrote {', '.join(COMPARE_FILES)} to {shown(written)}", file=sys.stderr)
        if replaced is not None:
            print(f"pfxab compare: replaced {replaced} that was in {shown(written)} (--replace)", file=sys.stderr)
    if unsaved is not None:
        raise unsaved  # after the table is printed: one line, exit 2
    return 0
