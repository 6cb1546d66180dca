"""``pfxab plot DIR --out FILE.png|.pdf``: the paper's figure for a finished sweep."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("plot", help="draw the figure of a finished sweep directory")
    parser.add_argument("dir", help="sweep directory written by `pfxab sweep`")
    parser.add_argument("--out", required=True, metavar="FILE", help="figure file (.png or .pdf)")
    parser.add_argument("--log-x", action="store_true", help="log-scale time axis (regret figures)")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from pfxab_flower.outputs import check_output_file
    from pfxab_flower.simulations.plots import FORMATS, plot_sweep

    check_output_file(args.out, FORMATS)  # before reading the sweep or drawing

    print(f"wrote {plot_sweep(args.dir, args.out, log_x=args.log_x)}")
    return 0
