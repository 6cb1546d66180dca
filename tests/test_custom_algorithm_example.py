"""docs/examples/custom_algorithm.py, run as a user runs it: a fresh process, from a directory that is not the clone.

The example defines a fourth algorithm outside the package, registers it, and runs it in-process
and on Flower's Ray simulation (Message API, 3 SuperNodes). It exits 0 only if both agree; this
test reads the numbers it prints as well: both engines' regret and final points equal, and the
new algorithm's regret not PF-XAB's (so it is not PF-XAB under another name).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.patience import patient

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "custom_algorithm.py"
PAGE = ROOT / "docs" / "extending.md"
EXCERPT = re.compile(r"<!-- from docs/examples/custom_algorithm\.py -->\n```python\n(.*?)```", re.DOTALL)
#: The page's copy of what the example prints.
PRINTED = re.compile(r"```bash\npython docs/examples/custom_algorithm\.py\n```\n\n```text\n(.*?)```", re.DOTALL)
LINE = re.compile(r"^(?P<algorithm>[a-z-]+)(?: \(for reference\))?, (?P<engine>in-process|Flower): "
                  r"regret (?P<regret>[-+0-9.e]+)(?:, final points (?P<points>.+))?$", re.MULTILINE)


@pytest.mark.exhaustive  # default tier: the registry carried to other processes (test_spec.py), the excerpts (below)
@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_custom_algorithm_example_runs_from_any_directory(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}  # the installed package only
    done = subprocess.run([sys.executable, str(EXAMPLE)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=patient(280))
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    runs = {(m["algorithm"], m["engine"]): m for m in LINE.finditer(done.stdout)}
    assert set(runs) == {("pf-xab", "in-process"), ("pf-xab-local", "in-process"), ("pf-xab-local", "Flower")}, \
        done.stdout
    mine, flower = runs["pf-xab-local", "in-process"], runs["pf-xab-local", "Flower"]
    assert (flower["regret"], flower["points"]) == (mine["regret"], mine["points"])
    assert float(mine["regret"]) != float(runs["pf-xab", "in-process"]["regret"])
    assert "same final points and regret in-process and on Flower" in done.stdout
    assert "Traceback" not in output and list(tmp_path.iterdir()) == []  # nothing written where it ran
    printed = [m[0] for m in LINE.finditer(done.stdout)] + ["same final points and regret in-process and on Flower"]
    assert PRINTED.search(PAGE.read_text(encoding="utf-8"))[1].splitlines() == printed  # docs/extending.md's copy


def test_the_pages_excerpts_are_the_examples_code() -> None:
    excerpts = EXCERPT.findall(PAGE.read_text(encoding="utf-8"))
    code = EXAMPLE.read_text(encoding="utf-8")
    assert len(excerpts) == 5
    assert [excerpt for excerpt in excerpts if excerpt not in code] == []
