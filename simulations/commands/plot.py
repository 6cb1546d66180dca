"""``pfxab plot DIR --out FILE.png|.pdf``: the figure of a finished sweep (the paper's) or comparison."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sub-command's arguments (``pfxab_flower.simulations.cli`` names it and gives its one-line help)."""
    parser.add_argument("dir", help="directory written by `pfxab sweep --out` or `pfxab compare --out`")
    parser.add_argument("--out", required=True, metavar="FILE", help="figure file (.png or .pdf)")
    parser.add_argument("--log-x", action="store_true",
                        help="log-scale time axis (a sweep's regret figure; a comparison's curves always have one)")


def handle(args: argparse.Namespace) -> int:
    from pfxab_flower.outputs import check_output_file
    from pfxab_flower.simulations.plots import FORMATS, is_our_figure, plot_result

    out = check_output_file(args.out, FORMATS, ours=is_our_figure)  # before reading the results or drawing

    print(f"wrote {plot_result(args.dir, out, log_x=args.log_x)}")
    return 0
