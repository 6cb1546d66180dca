"""``pfxab plot DIR [--out FILE.png|.pdf]``: the figure of a finished sweep (the paper's) or comparison."""

from __future__ import annotations

import argparse
from pathlib import Path

from pfxab_flower.errors import ConfigError
from pfxab_flower.printable import shown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sub-command's arguments (``pfxab_flower.simulations.cli.main`` names it and gives its one-line help)."""
    parser.add_argument("dir", help="directory written by `pfxab sweep --out` or `pfxab compare --out`")
    parser.add_argument("--out", default=None, metavar="FILE",
                        help="figure file, .png or .pdf (default: DIR.png, beside the directory)")
    parser.add_argument("--log-x", action="store_true",
                        help="log-scale time axis (a sweep's regret figure; a comparison's curves always have one)")


def default_figure(result_dir: str) -> Path:
    """``DIR.png`` beside the result directory (``results/cmp`` -> ``results/cmp.png``)."""
    directory = Path(result_dir).expanduser().resolve()
    if not directory.name:
        raise ConfigError(f"dir={result_dir!r} has no name to make a figure's from; allowed: --out FILE")
    return directory.with_name(directory.name + ".png")


def handle(args: argparse.Namespace) -> int:
    from pfxab_flower.simulations.reports.plots import FORMATS, is_our_figure, plot_result
    from pfxab_flower.storage.outputs import check_output_file

    out = args.out if args.out is not None else str(default_figure(args.dir))
    out = check_output_file(out, FORMATS, ours=is_our_figure)  # before reading the results or drawing
    print(f"wrote {shown(plot_result(args.dir, out, log_x=args.log_x))}")
    return 0
