"""``pfxab sweep CONFIG --out DIR``: run an experiment grid, resumably, into tidy tables."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from pfxab_flower.errors import ConfigError
from pfxab_flower.printable import shown
from pfxab_flower.schema.catalogue import parse, parse_workers
from pfxab_flower.simulations.cli.commands.options import add_parameter_flag, add_replace_flag
from pfxab_flower.simulations.flower.ray_cluster import executor_address
from pfxab_flower.storage.outputs import PathIdentity, check_output_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sub-command's arguments (``pfxab_flower.simulations.cli.main`` names it and gives its one-line help)."""
    parser.add_argument("config", help="experiment TOML, or a bundled one by name: figure1, figure2, figure3, figure4")
    parser.add_argument("--out", required=True, metavar="DIR", help="results directory (created; reruns resume)")
    add_parameter_flag(parser, "workers", default=min(2, os.cpu_count() or 1))
    add_parameter_flag(parser, "engine", default="inprocess")
    add_parameter_flag(parser, "executor")
    add_parameter_flag(parser, "ray_address")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_replace_flag(parser)


def handle(args: argparse.Namespace) -> int:
    from pfxab_flower.simulations.experiments.experiment import load_experiment
    from pfxab_flower.simulations.experiments.sweep import SWEEP_NAMES, run_sweep

    experiment = load_experiment(args.config)  # validates every row before any work
    workers = parse_workers(args.workers)
    args.engine = parse("engine", args.engine)
    ray_address = executor_address(args.executor, args.ray_address)  # reachable, before any work
    out = check_output_dir(args.out, writes=SWEEP_NAMES, kind="sweep", replace=args.replace)  # its own names only
    checked = PathIdentity.of(out)  # the sweep writes there, or nowhere (run_sweep holds it from then on)
    if args.engine == "flower":
        if importlib.util.find_spec("pfxab_flower.simulations.flower.in_process_simulation") is None:
            raise ConfigError("engine='flower' is unavailable (simulations/flower/in_process_simulation.py not found); "
                              "allowed: inprocess")
        if workers > 1:
            print(f"note: the flower engine runs one Ray simulation at a time; using 1 worker, not {workers}",
                  file=sys.stderr)
        workers = 1
    name, where_ = shown(experiment.name), shown(out)

    def on_damaged(runs: list[tuple[str, str]]) -> None:
        rid, why = runs[0]
        print(f"pfxab sweep: warning: {len(runs)} run(s) in {shown(out / 'runs')} are incomplete or damaged and "
              f"will be redone (e.g. {rid}: {shown(why)})", file=sys.stderr)

    def on_start(pending: int, total: int) -> None:
        if pending == 0:
            print(f"{name}: all {total} runs already complete in {where_}; nothing to run")
        else:
            where = f"tasks on the Ray cluster at {ray_address}" if ray_address else f"{workers} worker(s)"
            print(f"{name}: {pending} of {total} runs to do ({total - pending} already complete), "
                  f"{where}, engine {args.engine}")

    def on_replaced(what: str) -> None:
        print(f"pfxab sweep: replaced {what} that was in {where_} (--replace)", file=sys.stderr)

    outcome = run_sweep(experiment, out, workers=workers, engine=args.engine, progress=not args.no_progress,
                        on_start=on_start, on_damaged=on_damaged, ray_address=ray_address, replace=args.replace,
                        on_replaced=on_replaced, checked=checked)
    if outcome.moved_to is not None:  # its files followed it; nothing was written at the old name
        out, where_ = outcome.moved_to, shown(outcome.moved_to)
        print(f"pfxab sweep: note: the directory was moved to {where_} while the sweep ran; everything it wrote "
              "is there (nothing was written at the old name)", file=sys.stderr)
    done = outcome.skipped + outcome.executed
    if outcome.interrupted:
        print(f"pfxab sweep: interrupted; {done} of {outcome.total} runs complete in {where_}; "
              "run the same command again to resume", file=sys.stderr)
        return outcome.interrupt_status
    if outcome.failures:
        for rid, message in outcome.failures:
            print(f"pfxab sweep: run {rid} failed: {shown(message)}", file=sys.stderr)
        print(f"pfxab sweep: {len(outcome.failures)} of {outcome.total} runs failed; tables not written",
              file=sys.stderr)
        return 1
    if outcome.executed:
        runs = "run" if outcome.executed == 1 else "runs"
        print(f"ran {outcome.executed} {runs} in {outcome.seconds:.1f} s; "
              f"wrote {shown(out / 'runs.parquet')} and {shown(out / 'curves.parquet')}")
    return 0
