"""Entry point of ``python -m benchmarks``, in the root folder of a clone (the benchmarks are not installed).

Runs inside a loopback-only network namespace (``tests/loopback_namespace.py``) because some
sections start Ray; where none can be made, those sections are refused in one line.
"""

import sys
from pathlib import Path

if __package__ != "benchmarks" or not Path(__file__).resolve().parent.parent.joinpath("pfxab_flower").is_dir():
    print("python -m benchmarks: error: run it in the root folder of a clone of pfxab-flower", file=sys.stderr)
    raise SystemExit(2)

from benchmarks.run import main
from tests.loopback_namespace import enter

sys.exit(main(no_loopback=enter([sys.executable, *sys.orig_argv[1:]], "python -m benchmarks")))
