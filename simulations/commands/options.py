"""Command-line flags shared by the commands that describe a run (``run``, ``compare``, ...).

Flags are read as strings and converted by :class:`~pfxab_flower.config.RunConfig`,
so a bad value gets the same one-line message from every entry point.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from pfxab_flower.config import ALGORITHMS, PROBLEMS, RunConfig

_HELP = {
    "problem": f"federation to optimise ({', '.join(PROBLEMS)})",
    "algorithm": f"algorithm ({', '.join(ALGORITHMS)})",
    "clients": "number of clients M",
    "alpha": "personalisation weight in [0, 1]",
    "horizon": "pulls per client T",
    "seed": "random seed (noise)",
    "nu1": "smoothness constant nu1 > 0",
    "rho": "smoothness rate rho in (0, 1)",
    "noise": "noise model (uniform, gaussian, bernoulli)",
    "noise_sigma": "noise scale sigma >= 0",
    "spread": "spread of the synthetic clients' shifts, in [0, 1)",
    "max_depth": "deepest phase (default: budget only)",
    "pf_pne_eps": "PF-PNE heterogeneity slack eps >= 0",
    "landmine_data": "path to LandmineData.mat (landmine problem)",
    "fields": "comma-separated landmine field indices (landmine problem)",
}


def add_run_options(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """One ``--flag`` per :class:`RunConfig` field (defaults shown from the dataclass)."""
    for f in fields(RunConfig):
        if f.name in skip:
            continue
        flag = "--" + f.name.replace("_", "-")
        parser.add_argument(flag, dest=f.name, default=None, metavar=f.name.upper(),
                            help=f"{_HELP.get(f.name, f.name)} (default: {f.default})")


def config_from_args(args: argparse.Namespace, **overrides: object) -> RunConfig:
    """The validated :class:`RunConfig` of the flags the user gave."""
    given = {f.name: getattr(args, f.name) for f in fields(RunConfig) if getattr(args, f.name, None) is not None}
    given.update(overrides)
    return RunConfig.from_mapping(given)
