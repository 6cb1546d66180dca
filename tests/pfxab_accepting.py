"""``pfxab`` in a fresh process that accepts one more landmine data file: ``python pfxab_accepting.py SHA256 ARGS...``.

The product accepts only the real ``LandmineData.mat`` (its sha256 is a constant in
:mod:`pfxab_flower.problems.landmine_data`). Tests that run the command line in a fresh
process on the generated landmine-format file (``tests/landmine_files.py``) start it
through this script, which replaces that constant with ``SHA256`` in this process only,
then runs ``pfxab ARGS...`` unchanged.
"""

import sys

from pfxab_flower.problems import landmine_data

if __name__ == "__main__":
    landmine_data.LANDMINE_SHA256 = sys.argv[1]
    from pfxab_flower.simulations.cli.main import main

    sys.exit(main(sys.argv[2:]))
