"""``pfxab calibrate``: sample each site's objective with a small budget and propose ``nu1`` and ``rho``.

Prints the proposal, the evidence (one row per depth) and what the proposal and the defaults
can do within the horizon (:mod:`pfxab_flower.studies.calibration`); ``--plot`` draws the evidence,
``--json`` prints it as one JSON object instead.
"""

from __future__ import annotations

import argparse
import json
import sys

from pfxab_flower.errors import ConfigError
from pfxab_flower.simulations.commands.options import add_run_options, config_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sub-command's arguments (``pfxab_flower.simulations.cli`` names it and gives its one-line help)."""
    from pfxab_flower.studies.calibration import DEFAULT_SAMPLES

    add_run_options(parser, skip=("nu1", "rho"))
    parser.add_argument("--samples", default=str(DEFAULT_SAMPLES), metavar="N",
                        help=f"evaluations per site (default: {DEFAULT_SAMPLES})")
    parser.add_argument("--plot", default=None, metavar="FILE",
                        help="draw the observed variation against cell size here (.png or .pdf)")
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")


def _samples(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"--samples={text!r} is invalid; allowed: an integer") from None


def handle(args: argparse.Namespace) -> int:
    from pfxab_flower.problems import build_federation
    from pfxab_flower.studies.calibration import calibrate

    config = config_from_args(args)
    samples = _samples(args.samples)
    if args.plot is not None:
        from pfxab_flower.simulations.plots import check_figure_path

        check_figure_path(args.plot, "plot")  # before any evaluation
    calibration = calibrate(build_federation(config), horizon=config.horizon, alpha=config.alpha,
                            algorithm=config.algorithm, samples=samples, seed=config.seed)
    if args.json:
        print(json.dumps(calibration.summary()))
    else:
        print(calibration.report())
    if args.plot is not None:
        from pfxab_flower.simulations.plots import plot_calibration

        written = plot_calibration(calibration, args.plot)
        print(f"pfxab calibrate: wrote {written}", file=sys.stderr)
    return 0
