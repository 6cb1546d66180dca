"""Entry point of ``python -m benchmarks``."""

import sys

from benchmarks.run import main

sys.exit(main())
