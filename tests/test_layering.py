"""The layers, read from the source: the core never imports Flower, Ray or the adapters above it.

The core is every module in the ``pfxab_flower/`` folder; ``strategies/``, ``client_apps/``
and ``simulations/`` are installed as ``pfxab_flower.strategies`` & co. and sit above it
(the command line is ``pfxab_flower.simulations.cli``). Imports inside functions count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = sorted((ROOT / "pfxab_flower").rglob("*.py"))
ABOVE_CORE = ("flwr", "ray", "pfxab_flower.strategies", "pfxab_flower.client_apps", "pfxab_flower.simulations",
              "strategies", "client_apps", "simulations")


def imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            modules.add(str(node.args[0].value))
    return modules


def test_the_core_has_modules() -> None:
    assert len(CORE) > 20 and all("strategies" not in p.parts for p in CORE)


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_module_imports_nothing_above_the_core(path: Path) -> None:
    bad = sorted(m for m in imported_modules(path) if m.split(".")[0] in ("flwr", "ray", "strategies", "client_apps",
                                                                          "simulations")
                 or any(m == layer or m.startswith(layer + ".") for layer in ABOVE_CORE))
    assert bad == [], f"{path.relative_to(ROOT)} imports {bad}"


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from flwr.app import Context\n    import pfxab_flower.simulations.cli\n")
    assert imported_modules(sample) == {"flwr.app", "pfxab_flower.simulations.cli"}
