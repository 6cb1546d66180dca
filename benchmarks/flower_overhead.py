"""``python -m benchmarks.flower_overhead``: our Flower runs against Flower alone, M = 10, 100 and 1000.

For each M, PF-XAB through ``run_flower_simulation`` and a ServerApp/ClientApp pair making the same
exchanges with empty replies, each in a fresh process; it prints the times and their ratios. Targets
are printed, never asserted (docs/performance.md, "Flower at Flower's cost").
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from benchmarks.run import run_case

HORIZON = 200_000
TARGET_RATIO = 1.3


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def measure(num_clients: int) -> dict[str, dict]:
    """Ours, then Flower alone with the same exchanges, for ``num_clients`` nodes."""
    from benchmarks.flower import _run_isolated

    config = {"problem": "garland", "algorithm": "pf-xab", "num_clients": num_clients, "alpha": 0.5, "horizon": HORIZON,
              "seed": 0}
    _progress(f"M={num_clients}: ours (run_flower_simulation, Message API, T={HORIZON:.0e})")
    ours = _run_isolated(run_case, {"kind": "flower", "config": config, "api": "message"}, _progress)
    phases = int(ours.get("phases") or 1)
    _progress(f"M={num_clients}: Flower alone ({phases} phases of 2 exchanges, then 1 final exchange)")
    floor = {"kind": "floor", "num_clients": num_clients, "rounds": phases, "final": True}
    alone = _run_isolated(run_case, floor, _progress)
    return {"ours": ours, "alone": alone}


def ratio(ours: float | None, alone: float | None) -> str:
    return f"{ours / alone:.2f}" if ours and alone else "n/a"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.flower_overhead",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--num-clients", default="10,100,1000", help="values of M (default: 10,100,1000)")
    parser.add_argument("--out", default=None, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    try:
        sizes = [int(m) for m in args.num_clients.split(",")]
    except ValueError:
        parser.error(f"--num-clients={args.num_clients!r} is invalid; allowed: integers >= 2, comma-separated")
    if not sizes or min(sizes) < 2:
        parser.error(f"--num-clients={args.num_clients!r} is invalid; allowed: integers >= 2, comma-separated")
    figures = {m: measure(m) for m in sizes}
    print(f"{'M':>5} {'what':<22} {'ours s':>8} {'alone s':>8} {'ratio':>6}  target <= {TARGET_RATIO}")
    for m, pair in figures.items():
        ours, alone = pair["ours"], pair["alone"]
        for what, ours_key, alone_key in (("per later phase", "per_phase_s", "per_phase_s"),
                                          ("final round", "final_round_s", "final_round_s"),
                                          ("whole run (exchanges)", "run_seconds", "run_s")):
            o, a = ours.get(ours_key), alone.get(alone_key)
            print(f"{m:>5} {what:<22} {o or float('nan'):>8.2f} {a or float('nan'):>8.2f} {ratio(o, a):>6}")
        print(f"{m:>5} {'scoring after the run':<22} {ours.get('scoring_seconds') or float('nan'):>8.2f}"
              f"{'':>9} {'':>6}  same as in-process: {ours.get('same_as_inprocess')}")
    if 100 in figures and 1000 in figures:
        grow_ours = ratio(figures[1000]["ours"].get("per_phase_s"), figures[100]["ours"].get("per_phase_s"))
        grow_alone = ratio(figures[1000]["alone"].get("per_phase_s"), figures[100]["alone"].get("per_phase_s"))
        print(f"per later phase, M = 100 -> 1000: ours x{grow_ours}, Flower alone x{grow_alone}")
    if args.out:
        from pfxab_flower.storage.outputs import atomic_file

        with atomic_file(args.out) as tmp:
            tmp.write_text(json.dumps({str(m): pair for m, pair in figures.items()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    from benchmarks.namespace import run_in_loopback

    run_in_loopback(main, "python -m benchmarks.flower_overhead")
