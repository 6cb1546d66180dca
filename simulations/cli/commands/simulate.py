"""``pfxab simulate``: the default federation (or any ``pfxab run`` flags) through ``flwr run .``.

The flags are ``pfxab run``'s, checked before anything starts and passed as ``--run-config``; the
Flower side lives in :mod:`pfxab_flower.simulations.flower.flwr_run_launcher`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pfxab_flower.errors import RunStoppedError
from pfxab_flower.printable import shown
from pfxab_flower.simulations.cli.commands.options import add_parameter_flag, add_run_options, config_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sub-command's arguments (``pfxab_flower.simulations.cli.main`` names it and gives its one-line help)."""
    add_run_options(parser)
    add_parameter_flag(parser, "out_dir", flag="--out", dest="out", typed=True)
    parser.add_argument("--json", action="store_true", help="print the run's summary.json on stdout (log on stderr)")
    for name in ("round_timeout", "num_cpus"):
        add_parameter_flag(parser, name, typed=True)
    add_parameter_flag(parser, "ray_address")
    for name in ("fail_rate", "fail_clients", "straggle_seconds", "min_fraction", "api", "secure_aggregation"):
        add_parameter_flag(parser, name)
    parser.add_argument("--app-dir", default=None, metavar="DIR",
                        help="your own Flower app (default: one generated around the installed pfxab_flower)")


def print_site_table(clients_csv: Path) -> None:
    """Each site's outcome, from the run's ``clients.csv`` (regret included); nothing if the app wrote none."""
    import pandas as pd

    from pfxab_flower.running.site_table import site_table

    try:
        clients = pd.read_csv(clients_csv)
    except (OSError, ValueError):  # a user's own app writes its results where it likes
        return
    print(site_table(clients))


def given_keys(args: argparse.Namespace) -> frozenset[str]:
    """The run-config keys of the flags the user gave (``--noise-sigma`` -> ``noise-sigma``): what a user's own app
    must declare to be passed them (``--out``, ``--round-timeout`` and the federation's flags are not keys)."""
    from pfxab_flower.schema.run_config import RunConfig

    names = [*RunConfig.names(), "fail_rate", "fail_clients", "straggle_seconds", "min_fraction", "api",
             "secure_aggregation"]
    return frozenset(name.replace("_", "-") for name in names if getattr(args, name, None) is not None)


def handle(args: argparse.Namespace) -> int:
    config = config_from_args(args)  # one-line error before anything starts
    from pfxab_flower.running.results import RESULT_FILES
    from pfxab_flower.storage.outputs import OutputError, check_output_dir

    # the ServerApp writes there, after the whole run: to the path checked here
    args.out = str(check_output_dir(args.out, result_files=RESULT_FILES, kind="run"))
    if args.ray_address is not None:
        from pfxab_flower.simulations.flower.ray_cluster import check_ray_address

        args.ray_address = check_ray_address(args.ray_address)  # before the SuperLink starts
    from pfxab_flower.schema.run_config import parse_run_config, to_run_config
    from pfxab_flower.simulations.flower.flwr_run_launcher import simulate

    given = {"api": args.api, "fail-rate": args.fail_rate, "fail-clients": args.fail_clients,
             "straggle-seconds": args.straggle_seconds,
             "min-fraction": args.min_fraction, "secure-aggregation": args.secure_aggregation}
    _, options = parse_run_config({**to_run_config(config), "out-dir": args.out, "round-timeout": args.round_timeout,
                                   **{k: v for k, v in given.items() if v is not None}})
    outcome = simulate(config, options, app_dir=Path(args.app_dir) if args.app_dir is not None else None,
                       num_cpus=args.num_cpus, ray_address=args.ray_address,
                       log=sys.stderr if args.json else sys.stdout, given=given_keys(args))
    note = sys.stderr
    if outcome.pyproject_restored:
        print("pfxab simulate: warning: flwr run rewrote pyproject.toml; restored it", file=note)
    if outcome.left_running:
        print(f"pfxab simulate: warning: processes still running: {outcome.left_running}", file=note)
    if outcome.stop_reason is not None:
        raise RunStoppedError(outcome.stop_reason)  # one line, exit 2, as `pfxab run` says it
    if outcome.unsaved is not None:  # finished, but the files could not be written: print it, then one line
        summary = outcome.unsaved["summary"]
        print(json.dumps(summary) if args.json else f"pfxab simulate: regret {summary.get('regret')!r} after "
              f"{summary.get('phases')!r} phases (not saved)")
        raise OutputError(f"{outcome.unsaved['error']}; not written: {', '.join(RESULT_FILES)} "
                          "(the result is printed on stdout)")
    completed = (outcome.flower_status or "").startswith("finished:completed")
    if outcome.summary_path is None and args.app_dir is not None and completed:
        print(f"pfxab simulate: your app's run finished ({outcome.flower_status}, {outcome.wall_seconds:.1f} s); it "
              f"wrote no summary.json in {args.out}: its results are where it writes them; SuperLink and Ray stopped",
              file=note)
        return 0
    if outcome.summary_path is None:
        ended = (f"the Flower run ended {outcome.flower_status}" if outcome.flower_status is not None
                 else f"flwr run exited with status {outcome.returncode}")
        print(f"pfxab simulate: error: {ended} and wrote no summary.json (see the log above)", file=note)
        return outcome.returncode or 1
    if args.json:
        print(json.dumps(json.loads(outcome.summary_path.read_text(encoding="utf-8"))))
    else:
        print_site_table(outcome.summary_path.parent / "clients.csv")
        print(f"pfxab simulate: results in {shown(outcome.summary_path.parent)} ({outcome.wall_seconds:.1f} s); "
              f"SuperLink and Ray stopped")
    return 0
