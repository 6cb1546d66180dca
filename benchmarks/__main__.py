"""Entry point of ``python -m benchmarks``, in the root folder of a clone (the benchmarks are not installed)."""

import sys
from pathlib import Path

if __package__ != "benchmarks" or not Path(__file__).resolve().parent.parent.joinpath("pfxab_flower").is_dir():
    print("python -m benchmarks: error: run it in the root folder of a clone of pfxab-flower", file=sys.stderr)
    raise SystemExit(2)

from benchmarks.run import main

sys.exit(main())
