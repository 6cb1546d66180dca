"""``python -m benchmarks.cli_startup``: how fast the ``pfxab`` command answers, whole process, median of 7.

Each case is the installed ``pfxab`` script in a fresh process, each timed run right after one of
``python -c 'import numpy'`` (paired: ``x numpy`` is the median of the pairs' ratios, which a busy
machine leaves readable); then the slowest imports of each case. Targets are printed, never
asserted (docs/performance.md).
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

NUMPY = [sys.executable, "-c", "import numpy"]
#: (case, command after the interpreter or script, target seconds or None, target ratio to NUMPY or None)
CASES = (
    ("python -c pass (reference)", [sys.executable, "-c", "pass"], None, None),
    ("python -c 'import numpy' (reference)", NUMPY, None, None),
    ("pfxab --version", ["pfxab", "--version"], 0.15, 1.5),
    ("pfxab --help", ["pfxab", "--help"], 0.15, None),
    ("pfxab run --help", ["pfxab", "run", "--help"], None, None),
    ("pfxab run (default: M=10, T=2e6)", ["pfxab", "run"], 0.4, None),
    ("pfxab run --json (the same run)", ["pfxab", "run", "--json"], None, 3.5),
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


def paired_seconds(command: list[str], reference: list[str], repeats: int) -> tuple[list[float], list[float]]:
    """Wall seconds of ``repeats`` fresh runs of ``command``, each right after one of ``reference``; and of those.

    As :func:`whole_process_seconds`, one untimed run of each first.
    """
    for warm in (reference, command):
        subprocess.run(warm, capture_output=True, check=True)
    times, references = [], []
    for _ in range(repeats):
        for runs, timed in ((references, reference), (times, command)):
            start = time.perf_counter()
            subprocess.run(timed, capture_output=True, check=True)
            runs.append(time.perf_counter() - start)
    return times, references


def slowest_imports(arguments: list[str], top: int) -> list[tuple[str, float]]:
    """The top-level imports of ``pfxab ARGUMENTS`` that took longest (cumulative ms, ``-X importtime``)."""
    code = f"import sys; from pfxab_flower.simulations.cli.main import main; main({arguments!r})"
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True)
    rows = []
    for line in done.stderr.splitlines():
        match = IMPORT_LINE.match(line)
        if match and len(match.group(3)) <= 2:  # imported by our code or the interpreter, not by a library
            rows.append((match.group(4), int(match.group(2)) / 1000))
    return sorted(rows, key=lambda row: -row[1])[:top]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cli_startup", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per case (default: 7; the median is shown)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats={args.repeats} is invalid; allowed: an integer >= 1")
    beside = Path(sys.executable).parent / "pfxab"  # the interpreter's own environment first
    script = str(beside) if beside.exists() else shutil.which("pfxab")
    if script is None:
        parser.error("the pfxab command is not installed; allowed: run it where `pip install -e .` was run")
    print(f"{'case':<42} {'median s':>9} {'min s':>7} {'x bare':>7} {'x numpy':>8}  target", flush=True)
    medians: dict[str, float] = {}
    for case, command, target, target_ratio in CASES:
        command = [script, *command[1:]] if command[0] == "pfxab" else command
        if command == NUMPY:
            times = whole_process_seconds(command, args.repeats)
            ratio = 1.0
        else:
            times, references = paired_seconds(command, NUMPY, args.repeats)
            ratio = statistics.median(t / r for t, r in zip(times, references, strict=True))
        medians[case] = median = statistics.median(times)
        bare = medians.get(CASES[0][0], median)
        verdicts = [f"<= {target} s: {'met' if median <= target else 'NOT met'}"] if target is not None else []
        if target_ratio is not None:
            verdicts.append(f"<= {target_ratio}x numpy: {'met' if ratio <= target_ratio else 'NOT met'}")
        verdict = "; ".join(verdicts)
        print(f"{case:<42} {median:>9.3f} {min(times):>7.3f} {median / bare:>7.1f} {ratio:>8.2f}  {verdict}",
              flush=True)
    print()
    for arguments in (["--version"], ["--help"], ["run", "--json"]):
        slow = ", ".join(f"{name} {ms:.0f} ms" for name, ms in slowest_imports(arguments, 4))
        print(f"slowest imports of pfxab {' '.join(arguments)}: {slow}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
