"""No algorithm imports another algorithm's module: what several share lives in modules no algorithm owns.

The algorithms' modules are read from the registry (each registered policy's ``__module__`` in the package);
their imports from the source, those inside functions and for type checkers too. A subclass of another
algorithm counts: a variant extends a base that no algorithm owns (PF-XAB-Adaptive and PF-XAB extend
``elimination/personalised.py``), and local-only finds PF-XAB in the registry.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pfxab_flower.algorithms as algorithms
from pfxab_flower.algorithms.registry import algorithm_names, policy_class

PACKAGE = "pfxab_flower.algorithms"


def algorithm_modules() -> dict[str, str]:
    """The module of each registered algorithm of the package, by module name: ``{module: class name}``."""
    policies = (policy_class(name) for name in algorithm_names())
    return {p.__module__: p.__name__ for p in policies if p.__module__.startswith(PACKAGE + ".")}


def imported(source: str) -> set[str]:
    """Every module ``source`` imports, and ``module.name`` for each name it takes from a module."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def borrowed(module: str, source: str, modules: dict[str, str]) -> list[str]:
    """The other algorithms ``source`` (the module ``module``) imports: their modules, or their classes from the
    package itself."""
    names = imported(source)
    classes = {f"{PACKAGE}.{cls}" for other, cls in modules.items() if other != module}
    return sorted(m for m in names if (m in modules and m != module) or m in classes)


def test_every_registered_algorithm_of_the_package_is_read() -> None:
    modules = algorithm_modules()
    assert len(modules) == len([n for n in algorithm_names() if policy_class(n).__module__.startswith(PACKAGE)])
    assert len(modules) >= 10


def test_no_algorithm_imports_another_algorithms_module() -> None:
    modules = algorithm_modules()
    bad = {}
    for module in modules:
        path = Path(sys.modules[module].__file__ or "")
        if found := borrowed(module, path.read_text(encoding="utf-8"), modules):
            bad[module] = found
    assert bad == {}


def test_the_check_sees_a_violation() -> None:
    modules = algorithm_modules()
    pfxab, local_only = algorithms.PFXAB.__module__, algorithms.LocalOnly.__module__
    assert borrowed(local_only, f"def f():\n    from {pfxab} import PFXAB\n", modules) == [pfxab]
    package, _, leaf = pfxab.rpartition(".")
    assert borrowed(local_only, f"from {package} import {leaf}\n", modules) == [pfxab]
    assert borrowed(local_only, f"from {PACKAGE} import PFXAB, make_policy\n", modules) == [f"{PACKAGE}.PFXAB"]
    assert borrowed(pfxab, f"from {pfxab} import PFXAB\n", modules) == []  # itself
