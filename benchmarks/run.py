"""``python -m benchmarks``: measure the engines and print one table (``benchmarks/results.json``).

Every case runs in a fresh process so its peak memory is its own; targets are printed, never
asserted. The sections are listed in docs/performance.md; ``--quick`` and ``--only`` pick fewer.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
DEFAULT = {"problem": "garland", "algorithm": "pf-xab", "num_clients": 10, "alpha": 0.5, "horizon": 2_000_000,
           "seed": 0}


def run_case(spec: dict, module: str = "benchmarks.case", env: dict | None = None, timeout: float = 1800) -> dict:
    """Run one case in a fresh interpreter and return its JSON figures."""
    proc = subprocess.run(
        [sys.executable, "-m", module, json.dumps(spec)],
        capture_output=True, text=True, cwd=HERE.parent, timeout=timeout, env={**os.environ, **(env or {})},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark case {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def processor() -> str:
    """The processor's model, e.g. ``AMD EPYC`` (py-cpuinfo, in the test extra: the numbers depend on it), else
    the platform's name for it (on Linux only the architecture)."""
    try:
        import cpuinfo
    except ImportError:
        return platform.processor() or platform.machine()
    return str(cpuinfo.get_cpu_info().get("brand_raw") or platform.processor() or platform.machine())


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def section_inprocess(quick: bool) -> list[dict]:
    _progress("1. in-process PF-XAB, garland, M=10, T=2e6 (median of 5)")
    figures = run_case({"kind": "inprocess", "config": DEFAULT, "repeats": 5})
    row = {"item": "1", "case": "in-process M=10 T=2e6", **figures, "target": "<= 0.2 s"}
    return [row]


def section_reference(quick: bool, engine_ns_per_pull: float) -> list[dict]:
    horizon = 2_000 if quick else 20_000
    _progress(f"2. per-pull reference, M=10, T={horizon}")
    figures = run_case({"kind": "plain", "config": {**DEFAULT, "horizon": horizon}})
    ratio = figures["ns_per_pull"] / engine_ns_per_pull
    return [{"item": "2", "case": f"per-pull reference M=10 T={horizon}", **figures,
             "ratio_vs_engine": ratio, "target": "ratio >= 1000x"}]


def section_scaling(quick: bool) -> list[dict]:
    rows = []
    clients = (10, 100) if quick else (10, 100, 1000)
    horizons = (10_000, 100_000, 1_000_000) if quick else (10_000, 100_000, 1_000_000, 10_000_000, 100_000_000)
    for M in clients:
        _progress(f"3. scaling: M={M}, T=2e6")
        figures = run_case({"kind": "inprocess", "config": {**DEFAULT, "num_clients": M}})
        rows.append({"item": "3", "case": f"scaling M={M} T=2e6", **figures,
                     "target": "<= 30 s" if M == 1000 else "linear in M"})
    for T in horizons:
        _progress(f"3. scaling: M=10, T={T:.0e}")
        figures = run_case({"kind": "inprocess", "config": {**DEFAULT, "horizon": T}})
        rows.append({"item": "3", "case": f"scaling M=10 T={T:.0e}", **figures, "target": "grows with phases"})
    return rows


SECTIONS = ("1", "2", "3", "4", "5", "6", "7", "8")
#: Sections that start Ray: they run only in a loopback-only network namespace (see ``__main__``).
RAY_SECTIONS = ("4", "6", "7")


def main(argv: list[str] | None = None, no_loopback: str | None = None) -> int:
    """Run the chosen sections; ``no_loopback``: why this process is not in a loopback-only namespace (if not)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a reduced set, for a smoke test")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections (default: all)")
    parser.add_argument("--out", default=None, help="where to write the figures (default: benchmarks/results.json "
                        "for the full set; results-quick.json with --quick, results-sections-N-M.json with --only)")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",")]
    bad = [s for s in chosen if s not in SECTIONS]
    if bad:
        parser.exit(2, f"python -m benchmarks: error: --only={args.only!r} is invalid; allowed: sections from "
                       f"{','.join(SECTIONS)}\n")
    with_ray = [s for s in chosen if s in RAY_SECTIONS]
    if with_ray and no_loopback is not None:
        others = ",".join(s for s in SECTIONS if s not in RAY_SECTIONS)
        which = f"sections {','.join(with_ray)} start" if len(with_ray) > 1 else f"section {with_ray[0]} starts"
        parser.exit(2, f"python -m benchmarks: error: --only={args.only!r} is invalid here: {which} Ray, which "
                       f"needs a loopback-only network namespace ({no_loopback}); allowed: --only {others}\n")
    rows: list[dict] = []
    load_at_start = os.getloadavg()  # the machine may be shared: the figures depend on it
    if "1" in chosen or "2" in chosen:
        first = section_inprocess(args.quick)
        rows += first if "1" in chosen else []
        if "2" in chosen:
            rows += section_reference(args.quick, first[0]["ns_per_pull"])
    if "3" in chosen:
        rows += section_scaling(args.quick)
    for number, module in (("4", "benchmarks.flower"), ("5", "benchmarks.landmine"), ("6", "benchmarks.flower"),
                           ("7", "benchmarks.cluster"), ("8", "benchmarks.small_budget")):
        if number in chosen:
            try:
                section = __import__(module, fromlist=["section"]).section
            except ImportError:
                _progress(f"{number}. skipped: {module} is not available")
                continue
            rows += section(number, args.quick, run_case, _progress)
    table = pd.DataFrame(rows)
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine(),
               "processor": processor(), "quick": args.quick, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
               "load_average_start": load_at_start, "load_average_end": os.getloadavg()}
    out = Path(args.out) if args.out is not None else default_out(args.quick, chosen)
    out.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2) + "\n")
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.float_format", "{:.4g}".format):
        print(table.to_string(index=False))
    print(f"\nmachine: {machine}\nwritten: {out}")
    return 0


def default_out(quick: bool, chosen: list[str]) -> Path:
    """Where the figures go without ``--out``: the tracked ``results.json`` only for the full set of a full run.

    A smoke test (``--quick``) or a few sections (``--only``) must not replace the figures
    docs/performance.md quotes; they get files of their own (not tracked).
    """
    if quick:
        return HERE / "results-quick.json"
    if sorted(set(chosen)) != sorted(SECTIONS):
        return HERE / f"results-sections-{'-'.join(sorted(set(chosen)))}.json"
    return HERE / "results.json"
