"""Entry point of ``python -m benchmarks``.

The benchmarks run inside a network namespace that has only loopback
(``tests/loopback_namespace.py``, shared with the test suite): sections 4, 6 and 7 start
Ray, which would otherwise talk over the machine's outward interface. Where no such
namespace can be made, those sections are refused in one line and the others run.
"""

import sys

from benchmarks.run import main
from tests.loopback_namespace import enter

sys.exit(main(no_loopback=enter([sys.executable, *sys.orig_argv[1:]], "python -m benchmarks")))
