"""``pfxab calibrate``: sample each site's objective with a small budget and propose ``nu1`` and ``rho``.

Prints the proposal, the evidence (one row per depth) and what the proposal and the defaults
can do within the horizon (:mod:`pfxab_flower.studies.calibration`); ``--plot`` draws the evidence,
``--json`` prints it as one JSON object instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from pfxab_flower.errors import ConfigError
from pfxab_flower.simulations.cli.commands.options import add_run_options, config_from_args

if TYPE_CHECKING:
    from pfxab_flower.schema.run_config import RunConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sub-command's arguments (``pfxab_flower.simulations.cli.main`` names it and gives its one-line help)."""
    from pfxab_flower.studies.calibration import BUDGET_SHARE, DEFAULT_SAMPLES, MAX_SAMPLES

    add_run_options(parser, skip=("nu1", "rho"))
    parser.add_argument("--samples", default=None, metavar="N",
                        help=f"evaluations per site, at most {MAX_SAMPLES:,} and {BUDGET_SHARE:.0%} of --horizon "
                             f"(default: {DEFAULT_SAMPLES}, cut to that share)")
    parser.add_argument("--plot", default=None, metavar="FILE",
                        help="draw the observed variation against cell size here (.png or .pdf)")
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")


def _samples(text: str | None) -> int | None:
    """``--samples`` as an integer (``None``: the default); its range is :func:`calibrate`'s to check."""
    if text is None:
        return None
    if text.strip().isascii() and text.strip().isdecimal() and len(text.strip()) <= 18:
        return int(text)
    raise ConfigError(f"--samples={text!r} is invalid; allowed: an integer")


def algorithm_keywords(args: argparse.Namespace, config: RunConfig) -> dict[str, Any]:
    """What the run would pass its algorithm beyond num_clients, horizon, alpha and seed: every keyword it takes
    (``--candidates`` for pf-sh, ``--max-depth``, ...); a flag given for another algorithm is one line."""
    from pfxab_flower.algorithms.registry import declared_options, options_of
    from pfxab_flower.schema.catalogue import COMMON

    own = options_of(config.algorithm)
    for name in declared_options():
        if name not in own and getattr(args, name, None) is not None:
            raise ConfigError(f"--{name.replace('_', '-')}={getattr(args, name)!r} is invalid with --algorithm "
                              f"{config.algorithm}; allowed: only with an algorithm that takes it")
    common = {name: getattr(config, name) for name in COMMON
              if name not in ("num_clients", "horizon", "alpha", "seed", "nu1", "rho")}
    return {**common, **{name: config.options[name] for name in own}}


def handle(args: argparse.Namespace) -> int:
    from pfxab_flower.problems import build_federation
    from pfxab_flower.studies.calibration import calibrate

    config = config_from_args(args)
    samples = _samples(args.samples)
    if args.plot is not None:
        from pfxab_flower.simulations.reports.plots import check_figure_path

        check_figure_path(args.plot, "plot")  # before any evaluation
    calibration = calibrate(build_federation(config), horizon=config.horizon, alpha=config.alpha,
                            algorithm=config.algorithm, samples=samples, seed=config.seed,
                            **algorithm_keywords(args, config))
    if args.json:
        print(json.dumps(calibration.summary()))
    else:
        print(calibration.report())
    if args.plot is not None:
        from pfxab_flower.simulations.reports.plots import plot_calibration

        written = plot_calibration(calibration, args.plot)
        print(f"pfxab calibrate: wrote {written}", file=sys.stderr)
    return 0
