"""``python -m benchmarks.cli_startup``: how fast the ``pfxab`` command answers, whole process, median of 7.

Each case is the installed ``pfxab`` script in a fresh process, each timed run right after one of
``python -c 'import numpy'`` (paired: ``x numpy`` is the median of the pairs' ratios; ``x np cpu`` the same by
CPU seconds, which load disturbs least); then the slowest imports of each case. Targets are printed, never
asserted (docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

NUMPY = [sys.executable, "-c", "import numpy"]
#: The environment of every timed process: this one, with bytecode caches written. The untimed first run of a case
#: compiles what changed, as a user's first run after an edit does, and the timed ones read the caches, as every
#: later run does (numpy, the reference, is compiled at install); under ``PYTHONDONTWRITEBYTECODE=1`` every timed
#: run would recompile each module edited since its cache was last written.
ENVIRONMENT = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
#: A command to time and its environment.
Timed = tuple[list[str], dict[str, str]]
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


def run_once(command: list[str], environment: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, its threads and children included) of one run of ``command``.

    The CPU seconds are what a loaded machine leaves nearly untouched (waiting for a core is not
    counted), so they are printed beside the wall ratio: the target itself is the wall ratio on a
    quiet machine.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, capture_output=True, check=True, env=environment)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def whole_process_seconds(command: list[str], repeats: int) -> list[tuple[float, float]]:
    """Wall and CPU seconds (:func:`run_once`) of ``repeats`` fresh runs of ``command`` (after one untimed run).

    The untimed run warms the disk cache and, for ``pfxab run``, stores the refined
    optimum in the evaluation cache, as any user's first run does: the timed runs are
    every later run (the first costs about 0.3 s more, for importing scipy).
    """
    run_once(command, ENVIRONMENT)
    return [run_once(command, ENVIRONMENT) for _ in range(repeats)]


def paired_seconds(commands: list[Timed], reference: list[str],
                   repeats: int) -> tuple[list[list[tuple[float, float]]], list[tuple[float, float]]]:
    """Wall and CPU seconds of ``repeats`` fresh runs of each of ``commands``, each round right after one of
    ``reference``; and of those.

    As :func:`whole_process_seconds`, one untimed run of each first. With several commands (the
    same case from two trees, ``--against``), their order turns round by round, so that none gains
    from always following the same one.
    """
    run_once(reference, ENVIRONMENT)
    for command, environment in commands:
        run_once(command, environment)
    times: list[list[tuple[float, float]]] = [[] for _ in commands]
    references: list[tuple[float, float]] = []
    for round_ in range(repeats):
        turned = round_ % len(commands)
        order = [(references, (reference, ENVIRONMENT))]
        order += [(times[i], commands[i]) for i in [*range(turned, len(commands)), *range(turned)]]
        for runs, (timed, environment) in order:
            runs.append(run_once(timed, environment))
    return times, references


def slowest_imports(arguments: list[str], top: int) -> list[tuple[str, float]]:
    """The top-level imports of ``pfxab ARGUMENTS`` that took longest (cumulative ms, ``-X importtime``)."""
    code = f"import sys; from pfxab_flower.simulations.cli.main import main; main({arguments!r})"
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                          env=ENVIRONMENT)
    rows = []
    for line in done.stderr.splitlines():
        match = IMPORT_LINE.match(line)
        if match and len(match.group(3)) <= 2:  # imported by our code or the interpreter, not by a library
            rows.append((match.group(4), int(match.group(2)) / 1000))
    return sorted(rows, key=lambda row: -row[1])[:top]


def _print_row(case: str, samples: list[tuple[float, float]], references: list[tuple[float, float]] | None,
               medians: dict[str, float], target: float | None, target_ratio: float | None) -> None:
    """One case's line: its median and least wall seconds, and its ratios (median of the pairs') to
    ``references`` (numpy), by wall time (the target) and by CPU time (what load leaves nearly untouched)."""
    times = [wall for wall, _ in samples]
    medians[case] = median = statistics.median(times)
    bare = medians.get(CASES[0][0], median)
    pairs = list(zip(samples, references or samples, strict=True))
    ratio = statistics.median(t[0] / r[0] for t, r in pairs)
    cpu_ratio = statistics.median(t[1] / r[1] for t, r in pairs if r[1] > 0) if any(r[1] > 0 for _, r in pairs) \
        else float("nan")
    verdicts = [f"<= {target} s: {'met' if median <= target else 'NOT met'}"] if target is not None else []
    if target_ratio is not None:
        verdicts.append(f"<= {target_ratio}x numpy: {'met' if ratio <= target_ratio else 'NOT met'}")
    verdict = "; ".join(verdicts)
    print(f"{case:<42} {median:>9.3f} {min(times):>7.3f} {median / bare:>7.1f} {ratio:>8.2f} {cpu_ratio:>8.2f}  "
          f"{verdict}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cli_startup", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per case (default: 7; the median is shown)")
    parser.add_argument("--against", default=None, metavar="TREE",
                        help="also time each pfxab case with the package imported from TREE (another clone, or "
                             "`git archive main | tar -x -C TREE`), in the same rounds: a change's before and after "
                             "in one run")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats={args.repeats} is invalid; allowed: an integer >= 1")
    if args.against is not None and not (Path(args.against) / "pfxab_flower" / "__init__.py").is_file():
        parser.error(f"--against={args.against!r} is invalid; allowed: a source tree holding pfxab_flower/")
    beside = Path(sys.executable).parent / "pfxab"  # the interpreter's own environment first
    script = str(beside) if beside.exists() else shutil.which("pfxab")
    if script is None:
        parser.error("the pfxab command is not installed; allowed: run it where `pip install -e .` was run")
    print(f"{'case':<42} {'median s':>9} {'min s':>7} {'x bare':>7} {'x numpy':>8} {'x np cpu':>8}  target", flush=True)
    medians: dict[str, float] = {}
    for case, command, target, target_ratio in CASES:
        command = [script, *command[1:]] if command[0] == "pfxab" else command
        if command == NUMPY:
            _print_row(case, whole_process_seconds(command, args.repeats), None, medians, target, target_ratio)
            continue
        commands = [(command, ENVIRONMENT)]
        if args.against is not None and command[0] == script:
            commands.append((command, {**ENVIRONMENT, "PYTHONPATH": str(Path(args.against).resolve())}))
        runs, references = paired_seconds(commands, NUMPY, args.repeats)
        for i, samples in enumerate(runs):
            _print_row(case if i == 0 else "  the same, from --against", samples, references, medians, target,
                       target_ratio)
    print()
    for arguments in (["--version"], ["--help"], ["run", "--json"]):
        slow = ", ".join(f"{name} {ms:.0f} ms" for name, ms in slowest_imports(arguments, 4))
        print(f"slowest imports of pfxab {' '.join(arguments)}: {slow}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
