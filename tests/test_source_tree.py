"""A clone used as is: what the docs promise from a clone works there, and clone-only scripts say so elsewhere.

``flwr run .`` in a clone (and ``python -m benchmarks`` in its root) puts the clone first on
``sys.path``, so the clone's ``pfxab_flower/`` is imported even when the package is installed
from a wheel; nothing but ``pfxab_flower/__init__.py`` then maps the top-level ``simulations/``,
``strategies/`` and ``client_apps/`` in. The tests run Python with ``-S`` (no ``.pth`` file
runs, so no editable-install finder) and the clone first on ``PYTHONPATH``, the dependencies
after it: what Flower's processes see in a clone where the wheel is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.patience import patient

ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = ("simulations", "strategies", "client_apps")


def bare_python(args: list[str], *first: Path, cwd: Path) -> subprocess.CompletedProcess:
    """``python -S ARGS`` with ``first``, then this environment's site-packages, on ``sys.path``; no install hooks."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, first), *site.getsitepackages()])}
    return subprocess.run([sys.executable, "-S", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=patient(120))


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


REPORT = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
refused = []
for name in ("tests", "benchmarks", "docs", "build"):
    try:
        importlib.import_module("pfxab_flower." + name)
    except ModuleNotFoundError:
        refused.append(name)
print(json.dumps({
    "files": {n: m.__file__ for n, m in sys.modules.items() if n.split(".")[0] == "pfxab_flower"
              and getattr(m, "__file__", None)},
    "apps": [next(c.__name__ for c in type(sys.modules[n].app).__mro__ if c.__module__.startswith("flwr."))
             for n in sys.argv[1:] if hasattr(sys.modules[n], "app")],  # the Flower class each app is
    "refused": refused,
    "editable_finder": any("__editable__" in getattr(f, "__module__", "") for f in sys.meta_path),
}))
"""


def test_a_clone_first_on_sys_path_serves_the_bundled_app_from_the_clone(tmp_path) -> None:
    """The components of the repository's ``pyproject.toml``, as ``flwr run .`` imports them, all from the clone."""
    modules = ["pfxab_flower.simulations.server_app", "pfxab_flower.simulations.client_app",
               "pfxab_flower.strategies", "pfxab_flower.client_apps", "pfxab_flower.simulations.cli.main"]
    proc = bare_python(["-c", REPORT, *modules], ROOT, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert not report["editable_finder"]  # the test is faithful: only the clone's own code maps the adapters
    assert report["apps"] == ["ServerApp", "ClientApp"]
    assert set(modules) <= set(report["files"])
    outside = {n: f for n, f in report["files"].items() if not Path(f).is_relative_to(ROOT)}
    assert outside == {}  # one tree: nothing from an installed copy
    assert Path(report["files"]["pfxab_flower.simulations.server_app"]).parent == ROOT / "simulations"
    assert report["refused"] == ["tests", "benchmarks", "docs", "build"]  # only the mapped folders


def fake_tree(root: Path, name: str, *, installed: bool = False) -> Path:
    """A tree with the real ``pfxab_flower/__init__.py`` and adapter packages that say which tree they are.

    ``installed``: the adapters inside ``pfxab_flower/`` (a wheel's layout), else beside it (a clone's).
    """
    package = root / "pfxab_flower"
    package.mkdir(parents=True)
    shutil.copy(ROOT / "pfxab_flower" / "__init__.py", package / "__init__.py")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")  # its package-dir is the mapping
    for adapter in (*ADAPTERS, "tests"):
        folder = (package if installed else root) / adapter
        folder.mkdir()
        (folder / "__init__.py").write_text(f"TREE = {name!r}\n")
    cli = (root / "simulations" if not installed else package / "simulations") / "cli"  # a sub-package, as the real one
    cli.mkdir()
    (cli / "__init__.py").write_text("")
    (cli / "main.py").write_text("X = 1\n")
    return root


SWITCH = """
import importlib, json, sys
seen = []
for tree in sys.argv[1:]:
    for name in [n for n in sys.modules if n.split(".")[0] == "pfxab_flower"]:
        del sys.modules[name]
    sys.path.insert(0, tree)
    seen.append([importlib.import_module("pfxab_flower." + a).TREE for a in ("simulations", "strategies",
                                                                           "client_apps")]
                + [importlib.import_module("pfxab_flower.simulations.cli.main").__file__])
    sys.path.remove(tree)
finders = [type(f).__name__ for f in sys.meta_path if type(f).__name__ == "_SourceTreeAdapters"]
print(json.dumps({"seen": seen, "finders": finders, "tests": importlib.util.find_spec("pfxab_flower.tests")
                  is not None}))
"""


def test_each_tree_serves_its_own_adapters_and_an_installed_package_registers_nothing(tmp_path) -> None:
    first, second = fake_tree(tmp_path / "a", "a"), fake_tree(tmp_path / "b", "b")
    installed = fake_tree(tmp_path / "site", "site", installed=True)
    proc = bare_python(["-c", SWITCH, str(first), str(second)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert [row[:3] for row in report["seen"]] == [["a"] * 3, ["b"] * 3]  # a dropped tree's finder stays out
    assert [Path(row[3]) for row in report["seen"]] == [first / "simulations" / "cli" / "main.py",
                                                        second / "simulations" / "cli" / "main.py"]
    assert report["finders"] == ["_SourceTreeAdapters"] * 2 and not report["tests"]

    proc = bare_python(["-c", SWITCH, str(installed)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["seen"][0][:3] == ["site"] * 3 and report["finders"] == []  # the wheel's layout, untouched


@pytest.mark.parametrize("script", ["comparison_breakdown.py", "confidence_comparison.py", "confidence_horizons.py"])
def test_a_docs_script_outside_its_clone_says_so_in_one_line(tmp_path, script) -> None:
    copy = tmp_path / "scripts" / script
    copy.parent.mkdir()
    shutil.copy(ROOT / "docs" / script, copy)
    line = one_error_line(subprocess.run([sys.executable, str(copy)], cwd=tmp_path, capture_output=True, text=True,
                                         timeout=patient(60)))
    assert line == (f"{script}: error: {tmp_path} is not a clone of pfxab-flower; allowed: run this script from the "
                    "docs/ folder of a clone (it is not installed with the package)")


@pytest.mark.parametrize("script", ["confidence_comparison.py", "confidence_horizons.py"])
def test_a_docs_script_in_the_clone_runs_the_clones_code_from_anywhere(tmp_path, script) -> None:
    """No install hooks, run from another directory: the script finds its clone's code itself."""
    proc = bare_python([str(ROOT / "docs" / script), "--help"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith(f"usage: {script} ")


def test_benchmarks_say_in_one_line_where_they_run(tmp_path) -> None:
    for target in (ROOT / "benchmarks", ROOT / "benchmarks" / "__main__.py"):  # run by path, not as a module
        line = one_error_line(subprocess.run([sys.executable, str(target)], cwd=tmp_path, capture_output=True,
                                             text=True, timeout=patient(60)))
        assert line == "python -m benchmarks: error: run it in the root folder of a clone of pfxab-flower"
    # in the clone's root with no install hooks, the entry point gets as far as its own flag check
    line = one_error_line(bare_python(["-m", "benchmarks", "--only", "0"], cwd=ROOT))
    assert line.startswith("python -m benchmarks: error: --only='0' is invalid")
