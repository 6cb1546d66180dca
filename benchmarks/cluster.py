"""Section 7 of ``python -m benchmarks``: the project on a two-node Ray cluster started on this machine.

Flower simulation through ``--ray-address`` at M = 10, 100 and 1000 (checked equal to the
in-process run), and a sweep's throughput with the local pool and on the cluster (equal tables).
Figures: docs/performance.md ("On a Ray cluster").
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import tomli_w

from benchmarks.flower import COMPARED, FLOWER_TIMEOUT, ITEM1
from benchmarks.local_cluster import two_node_cluster


def sweep_grid(horizon: int, seeds: list[int]) -> dict:
    """The throughput sweep's experiment (``pfxab sweep``'s TOML as a table)."""
    return {"experiment": {"name": "throughput", "kind": "regret", "title": "sweep throughput"},
            "fixed": {"problem": "garland", "num_clients": 10, "horizon": horizon},
            "grid": {"algorithm": ["pf-xab", "fed-pne", "pf-pne"], "alpha": [0.1, 0.5, 0.9], "seed": seeds}}


def flower_on_cluster(spec: dict) -> dict:
    """One Flower simulation on the cluster at ``spec['address']``, timed by the server hook."""
    started = time.perf_counter()
    from benchmarks.timeline import server_timeline
    from pfxab_flower.running.engine import run_config
    from pfxab_flower.schema.run_config import RunConfig
    from pfxab_flower.simulations.flower.in_process_simulation import run_flower_simulation

    imports = time.perf_counter() - started
    config = RunConfig.from_mapping(spec["config"])
    with server_timeline() as timeline:
        result = run_flower_simulation(config, ray_address=spec["address"])
    reference = run_config(config).summary
    return {"imports_s": imports, **timeline.figures(), "phases": result.summary["phases"],
            "same_as_inprocess": all(result.summary[key] == reference[key] for key in COMPARED)}


def sweep_throughput(spec: dict) -> dict:
    """The grid with the local pool and on the cluster: runs per second each, and whether the tables agree."""
    import pandas as pd

    from pfxab_flower.simulations.experiments.experiment import load_experiment
    from pfxab_flower.simulations.experiments.sweep import run_sweep

    figures: dict = {}
    with tempfile.TemporaryDirectory(prefix="pfxab-bench-") as tmp:
        toml = Path(tmp) / "grid.toml"
        toml.write_text(tomli_w.dumps(sweep_grid(spec["horizon"], spec["seeds"])), encoding="utf-8")
        tables = {}
        for name, address in (("local", None), ("cluster", spec["address"])):
            experiment = load_experiment(str(toml))
            out = Path(tmp) / name
            started = time.perf_counter()
            outcome = run_sweep(experiment, out, workers=2, progress=False, ray_address=address)
            seconds = time.perf_counter() - started
            figures[f"{name}_runs"] = outcome.executed
            figures[f"{name}_s"] = seconds
            figures[f"{name}_runs_per_s"] = outcome.executed / seconds
            runs = pd.read_parquet(out / "runs.parquet")
            tables[name] = runs[[c for c in runs.columns if "seconds" not in c]].sort_values("run_id").reset_index(
                drop=True)
        figures["same_results"] = tables["local"].equals(tables["cluster"])
    return figures


CASES = {"flower_cluster": flower_on_cluster, "sweep_throughput": sweep_throughput}


def section(number: str, quick: bool, run_case: Callable, progress: Callable[[str], None]) -> list[dict]:
    """Flower at M = 10, 100, 1000 on the cluster, then sweep throughput local vs cluster."""
    rows = []
    clients = (10, 100) if quick else (10, 100, 1000)
    horizon = 100_000 if quick else 2_000_000
    with two_node_cluster() as cluster:
        progress(f"{number}. two-node Ray cluster up at {cluster.address} (1 CPU per node)")
        for M in clients:
            config = {**ITEM1, "num_clients": M, "horizon": horizon if M < 1000 else 200_000}
            progress(f"{number}. Flower (message API) on the cluster, M={M}, T={config['horizon']:.0e}")
            started = time.perf_counter()
            try:
                figures = run_case({"kind": "flower_cluster", "config": config, "address": cluster.address},
                                   module="benchmarks.cluster", timeout=FLOWER_TIMEOUT * 2)
            except RuntimeError as exc:
                figures = {"error": str(exc).splitlines()[-1]}
            rows.append({"item": number, "case": f"flower on 2-node cluster M={M} T={config['horizon']:.0e}",
                         **figures, "wall_seconds": time.perf_counter() - started,
                         "target": "M = 1000 completes"})
        seeds = [0, 1] if quick else list(range(6))
        progress(f"{number}. sweep throughput: {9 * len(seeds)} runs, local pool (2 workers) vs cluster")
        figures = run_case({"kind": "sweep_throughput", "horizon": 2_000_000, "seeds": seeds,
                            "address": cluster.address}, module="benchmarks.cluster", timeout=FLOWER_TIMEOUT)
        rows.append({"item": number, "case": f"sweep throughput, {9 * len(seeds)} runs (M=10, T=2e6)", **figures,
                     "target": "same results; runs/s local vs cluster"})
    return rows


if __name__ == "__main__":
    case = json.loads(sys.argv[1])
    print(json.dumps(CASES[case["kind"]](case)))
