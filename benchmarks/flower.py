"""Sections 4 and 6 of ``python -m benchmarks``: the algorithms on Flower's Ray simulation engine.

Item 1 on both Flower APIs and ``pfxab simulate`` end to end (section 4), then M = 100 (section 6).
Each case runs in a fresh process with a marker in its environment (:mod:`benchmarks.memory`);
phase times come from :mod:`benchmarks.timeline`.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from benchmarks.memory import MARKER_ENV, PeakMemory
from pfxab_flower.schema.catalogue import DEFAULT_ROUND_TIMEOUT

ITEM1 = {"problem": "garland", "algorithm": "pf-xab", "num_clients": 10, "alpha": 0.5, "horizon": 2_000_000, "seed": 0}
FLOWER_TIMEOUT = 900.0  # seconds a whole Flower case may take before it is called failed
COMPARED = ("regret", "final_nodes", "phases", "communication_rounds", "values_up", "values_down")


# -- one case, in a fresh process -------------------------------------------------------------------


def flower_case(spec: dict) -> dict:
    """One ``run_flower_simulation`` with the phase hook and the memory sampler; checked against in-process."""
    started = time.perf_counter()
    from benchmarks.timeline import server_timeline
    from pfxab_flower.running.engine import run_config
    from pfxab_flower.schema.run_config import AppOptions, RunConfig
    from pfxab_flower.simulations.flower.in_process_simulation import run_flower_simulation

    imports = time.perf_counter() - started
    config = RunConfig.from_mapping(spec["config"])
    options = AppOptions(round_timeout=spec.get("round_timeout", DEFAULT_ROUND_TIMEOUT),
                         api=spec.get("api", AppOptions.api))
    with PeakMemory() as memory, server_timeline() as timeline:
        result = run_flower_simulation(config, options=options, num_cpus=spec.get("num_cpus", 1.0))
    reference = run_config(config).summary
    same = all(result.summary[key] == reference[key] for key in COMPARED)
    return {
        "imports_s": imports,
        **timeline.figures(),
        "phases": result.summary["phases"],
        "rounds": result.summary["communication_rounds"],
        "run_seconds": result.summary["run_seconds"],
        "scoring_seconds": result.summary.get("scoring_seconds"),  # absent before it was measured apart
        "peak_rss_mib": memory.peak_rss_mib,
        "peak_pss_mib": memory.peak_pss_mib,
        "processes": memory.peak_processes,
        "same_as_inprocess": same,
    }


def simulate_case(spec: dict) -> dict:
    """``pfxab simulate`` end to end, as a user types it (a new interpreter, ``flwr run .``, clean-up)."""
    pfxab = str(Path(sys.executable).with_name("pfxab"))
    config = spec["config"]
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in config.items()]
    with tempfile.TemporaryDirectory(prefix="pfxab-bench-") as out, PeakMemory() as memory:
        started = time.perf_counter()
        proc = subprocess.run([pfxab, "simulate", *flags, *spec.get("extra", []), "--out", out, "--json"],
                              capture_output=True, text=True, timeout=FLOWER_TIMEOUT)
        wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"pfxab simulate failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        "total_s": wall,
        "phases": summary["phases"],
        "rounds": summary["communication_rounds"],
        "peak_rss_mib": memory.peak_rss_mib,
        "peak_pss_mib": memory.peak_pss_mib,
        "processes": memory.peak_processes,
    }


def floor_case(spec: dict) -> dict:
    """Flower's own cost of one phase: two exchanges with every node, whose ClientApp does nothing.

    A Message-API ServerApp sends ``rounds`` times a train then an evaluate message to
    each of ``num_clients`` nodes of the same Ray engine and waits for the (empty) replies;
    the mean time of a train + evaluate pair after the first is the least a phase can
    cost on this machine, whatever the algorithm does. With ``"final": true`` one more
    train exchange follows, as our final round: ``final_round_s`` is its time and
    ``run_s`` the whole, first message to last reply (what our ``run_seconds`` measures).
    """
    from flwr.app import Context, Message, MessageType, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    from pfxab_flower.simulations.flower.simulation_environment import backend_config, ray_environment

    client_app = ClientApp()

    @client_app.train()
    def train(message: Message, context: Context) -> Message:
        return Message(RecordDict(), reply_to=message)

    @client_app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        return Message(RecordDict(), reply_to=message)

    stamps: list[float] = []
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        while len(nodes := sorted(grid.get_node_ids())) < spec["num_clients"]:
            time.sleep(0.1)

        def exchange(kind: str) -> None:
            replies = grid.send_and_receive(
                [Message(RecordDict(), dst_node_id=node, message_type=kind) for node in nodes],
                timeout=DEFAULT_ROUND_TIMEOUT)
            assert len(list(replies)) == len(nodes)

        stamps.append(time.perf_counter())
        for _ in range(spec["rounds"]):
            for kind in (MessageType.TRAIN, MessageType.EVALUATE):
                exchange(kind)
            stamps.append(time.perf_counter())
        if spec.get("final"):
            exchange(MessageType.TRAIN)
            stamps.append(time.perf_counter())

    with PeakMemory() as memory, ray_environment() as ray_dir:
        run_simulation(server_app, client_app, num_supernodes=spec["num_clients"],
                       backend_config=backend_config(1.0, ray_dir))
    phases = [b - a for a, b in itertools.pairwise(stamps[:spec["rounds"] + 1])]
    later = phases[1:]
    final = {"final_round_s": stamps[-1] - stamps[-2], "run_s": stamps[-1] - stamps[0]} if spec.get("final") else {}
    return {"per_phase_s": sum(later) / len(later), "max_phase_s": max(later), "phases": len(phases), **final,
            "peak_rss_mib": memory.peak_rss_mib, "peak_pss_mib": memory.peak_pss_mib}


CASES = {"flower": flower_case, "simulate": simulate_case, "floor": floor_case}


# -- the sections -------------------------------------------------------------------------------------


def available_apis() -> tuple[str, ...]:
    """The Flower APIs this checkout can run (the Message API adapters may be absent)."""
    try:
        from pfxab_flower.schema.catalogue import APIS
    except ImportError:
        return ("legacy",)
    return tuple(APIS)


def _run_isolated(run_case: Callable, spec: dict, progress: Callable[[str], None]) -> dict:
    """Run one case with a fresh marker; stop (and report) whatever it left running."""
    from pfxab_flower.simulations.flower.leftover_processes import stop_processes

    marker = f"pfxab-bench-{uuid.uuid4().hex}"
    try:
        figures = run_case({**spec}, module="benchmarks.flower", env={MARKER_ENV: marker}, timeout=FLOWER_TIMEOUT)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        reason = [line for line in str(exc).splitlines() if line.strip()][-1]
        progress(f"   failed: {reason}")
        figures = {"error": reason}
    left = stop_processes(marker)
    figures["left_running"] = len(left)
    return figures


def section(number: str, quick: bool, run_case: Callable, progress: Callable[[str], None]) -> list[dict]:
    """Section 4 (M = 10) or 6 (M = 100): one row per API, plus ``pfxab simulate`` for section 4."""
    clients = 10 if number == "4" else 100
    config = {**ITEM1, "num_clients": clients}
    if quick:
        config["horizon"] = 100_000
    target = "<= 15 s total, <= 0.45 s/phase" if number == "4" else "<= 0.5 s/phase"
    rows = []
    for api in available_apis():
        progress(f"{number}. Flower ({api} API), M={clients}, T={config['horizon']:.0e}")
        figures = _run_isolated(run_case, {"kind": "flower", "config": config, "api": api}, progress)
        rows.append({"item": number, "case": f"flower {api} M={clients} T={config['horizon']:.0e}", **figures,
                     "wall_seconds": figures.get("total_s"), "target": target})
    progress(f"{number}. Flower's own floor: M={clients}, a ClientApp that does nothing, 2 exchanges per phase")
    figures = _run_isolated(run_case, {"kind": "floor", "num_clients": clients, "rounds": 6}, progress)
    rows.append({"item": number, "case": f"flower floor (empty messages) M={clients}", **figures,
                 "target": "least a phase costs"})
    if number == "4":
        progress(f"4. pfxab simulate (flwr run .), M={clients}, T={config['horizon']:.0e}")
        figures = _run_isolated(run_case, {"kind": "simulate", "config": config}, progress)
        rows.append({"item": number, "case": f"pfxab simulate M={clients} T={config['horizon']:.0e}", **figures,
                     "wall_seconds": figures.get("total_s"), "target": "end to end"})
    return rows


if __name__ == "__main__":
    case = json.loads(sys.argv[1])
    print(json.dumps(CASES[case["kind"]](case)))
