"""``pfxab run``: one run, printed as JSON or a short report, optionally written to ``--out``."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from pfxab_flower.printable import shown
from pfxab_flower.schema.catalogue import parse
from pfxab_flower.simulations.cli.commands.options import (
    add_parameter_flag,
    add_replace_flag,
    add_run_options,
    config_from_args,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sub-command's arguments (``pfxab_flower.simulations.cli.main`` names it and gives its one-line help)."""
    add_run_options(parser)
    add_parameter_flag(parser, "engine", default="inprocess")
    parser.add_argument("--api", default=None, metavar="API",
                        help="Flower API with --engine flower: message (default) or legacy (Strategy/NumPyClient)")
    add_parameter_flag(parser, "ray_address")
    parser.add_argument("--out", default=None, metavar="DIR", help="write summary.json, clients.csv, curve.csv here")
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    add_replace_flag(parser)


def handle(args: argparse.Namespace) -> int:
    from pfxab_flower.running.results import RESULT_FILES  # here, not at the top: `pfxab --help` need not import pandas

    config = config_from_args(args)
    args.engine = parse("engine", args.engine)
    out = replaced = checked = None
    if args.out is not None:  # before the run, not after it; written where it was checked, if it is still that
        # here: a printed run writes nothing
        from pfxab_flower.storage.outputs import PathIdentity, check_output_dir, replaced_kind

        out = check_output_dir(args.out, result_files=RESULT_FILES, kind="run", replace=args.replace)
        checked = PathIdentity.of(out)
        replaced = replaced_kind(out, "run") if args.replace else None
    if args.api is not None:
        parse("api", args.api)  # one-line error before anything runs
    if args.ray_address is not None:
        from pfxab_flower.simulations.flower.ray_cluster import check_ray_address

        args.ray_address = check_ray_address(args.ray_address)  # before any work
    if args.engine == "flower":
        from pfxab_flower.schema.run_config import AppOptions
        from pfxab_flower.simulations.flower.in_process_simulation import run_flower_simulation

        options = AppOptions() if args.api is None else AppOptions(api=args.api)
        result = run_flower_simulation(config, options=options, ray_address=args.ray_address)
    else:  # the in-process engine runs here; with an address, landmine's SVM fits go to the cluster
        from pfxab_flower.running.engine import run_config

        fits: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
        if args.ray_address is not None:  # only then: the cluster's module is not needed by a run on this machine
            from pfxab_flower.simulations.flower.ray_cluster import fits_on

            fits = fits_on(args.ray_address)
        with fits:
            if sys.stderr.isatty():  # a bar on a terminal only (tqdm is not even imported: it imports multiprocessing)
                from tqdm import tqdm

                # and only for a run longer than a second (tqdm's delay)
                with tqdm(total=config.horizon, desc="pfxab run", unit="pull", unit_scale=True, file=sys.stderr,
                          delay=1.0, leave=False) as bar:
                    result = run_config(config, progress=lambda done: bar.update(done - bar.n))
            else:
                result = run_config(config)
    written = unsaved = None
    if out is not None:
        from pfxab_flower.storage.outputs import save_or_keep

        written, unsaved = save_or_keep(lambda path: result.write(path, replace=args.replace, checked=checked), out,
                                        RESULT_FILES)
    if written is not None and replaced is not None:
        print(f"pfxab run: replaced {replaced} that was in {shown(written)} (--replace)", file=sys.stderr)
    if args.json:
        print(result.to_json())
        if written is not None:
            print(f"pfxab run: wrote {shown(written)}", file=sys.stderr)  # stdout stays one JSON object
    else:
        from pfxab_flower.running.site_table import site_table

        print(format_report(result.summary))
        print(site_table(result.client_columns))
        if written is not None:
            print(f"  wrote {', '.join(RESULT_FILES)} to {shown(written)}")
    if unsaved is not None:
        raise unsaved  # after the result is printed: one line, exit 2
    return 0


def format_report(summary: dict[str, Any]) -> str:
    """A few readable lines about one run."""
    lines = [
        f"{summary['algorithm']} on {summary['problem']}: M={summary['num_clients']} alpha={summary['alpha']} "
        f"T={summary['horizon']} seed={summary['seed']} ({summary['engine']})",
        f"  regret {summary['regret']:.6g} after {_phases(summary)}, "
        f"{summary['communication_rounds']} communication rounds, "
        f"{summary['bytes_up'] + summary['bytes_down']} bytes sent",
        f"  mean reward: personalised {summary['mean_reward_personalised']:.4f}, "
        f"global {summary['mean_reward_global']:.4f}, local {summary['mean_reward_local']:.4f}",
        f"  wall time {summary['wall_seconds']:.3f} s",
    ]
    if summary.get("lost_clients"):  # honest about what the regret covers: a lost client's reported pulls only
        lost = len(summary["lost_clients"])
        total = summary["num_clients"] * summary["horizon"]
        lines.insert(2, f"  {lost} client{'' if lost == 1 else 's'} lost: the regret covers "
                        f"{total - summary['pulls_unscored']:,} of the {total:,} pulls (a lost client's are scored up "
                        "to its last reply)")
    return "\n".join(lines)


def _phases(summary: dict[str, Any]) -> str:
    """The run's phases; a solo baseline's are its clients' own (``client_phases``), none at the server."""
    own = [p for p in summary.get("client_phases") or [] if p is not None]
    if not own:
        return f"{summary['phases']} phases"
    spread = f"{min(own)}" if min(own) == max(own) else f"{min(own)} to {max(own)}"
    return f"{spread} phases per client, each alone"
