"""``python -m benchmarks.cli_startup``: how fast the ``pfxab`` command answers, whole process, median of 5.

Each case is the installed ``pfxab`` script in a fresh process, beside a bare interpreter and one
that imports numpy (so busy-machine figures read as ratios), then the slowest imports of each case.
Targets are printed, never asserted (docs/performance.md).
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: (case, command after the interpreter or script, target seconds or None)
CASES = (
    ("python -c pass (reference)", [sys.executable, "-c", "pass"], None),
    ("python -c 'import numpy' (reference)", [sys.executable, "-c", "import numpy"], None),
    ("pfxab --version", ["pfxab", "--version"], 0.15),
    ("pfxab --help", ["pfxab", "--help"], 0.15),
    ("pfxab run --help", ["pfxab", "run", "--help"], None),
    ("pfxab run (default: M=10, T=2e6)", ["pfxab", "run"], 0.4),
)
IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)")


def whole_process_seconds(command: list[str], repeats: int) -> list[float]:
    """Wall seconds of ``repeats`` fresh runs of ``command`` (after one untimed run).

    The untimed run warms the disk cache and, for ``pfxab run``, stores the refined
    optimum in the evaluation cache, as any user's first run does: the timed runs are
    every later run (the first costs about 0.3 s more, for importing scipy).
    """
    subprocess.run(command, capture_output=True, check=True)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return times


def slowest_imports(arguments: list[str], top: int) -> list[tuple[str, float]]:
    """The top-level imports of ``pfxab ARGUMENTS`` that took longest (cumulative ms, ``-X importtime``)."""
    code = f"import sys; from pfxab_flower.simulations.cli import main; main({arguments!r})"
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        match = IMPORT_LINE.match(line)
        if match and len(match.group(3)) <= 2:  # imported by our code or the interpreter, not by a library
            rows.append((match.group(4), int(match.group(2)) / 1000))
    return sorted(rows, key=lambda row: -row[1])[:top]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cli_startup", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per case (default: 5; the median is shown)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats={args.repeats} is invalid; allowed: an integer >= 1")
    beside = Path(sys.executable).parent / "pfxab"  # the interpreter's own environment first
    script = str(beside) if beside.exists() else shutil.which("pfxab")
    if script is None:
        parser.error("the pfxab command is not installed; allowed: run it where `pip install -e .` was run")
    print(f"{'case':<42} {'median s':>9} {'min s':>7} {'x bare':>7} {'x numpy':>8}  target", flush=True)
    medians: dict[str, float] = {}
    for case, command, target in CASES:
        command = [script, *command[1:]] if command[0] == "pfxab" else command
        times = whole_process_seconds(command, args.repeats)
        medians[case] = median = statistics.median(times)
        bare, numpy = medians.get(CASES[0][0], median), medians.get(CASES[1][0], median)
        verdict = "" if target is None else f"<= {target} s: {'met' if median <= target else 'NOT met'}"
        print(f"{case:<42} {median:>9.3f} {min(times):>7.3f} {median / bare:>7.1f} {median / numpy:>8.2f}  {verdict}",
              flush=True)
    print()
    for arguments in (["--version"], ["--help"], ["run"]):
        slow = ", ".join(f"{name} {ms:.0f} ms" for name, ms in slowest_imports(arguments, 4))
        print(f"slowest imports of pfxab {' '.join(arguments)}: {slow}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
