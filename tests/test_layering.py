"""The layers, read from the source: the core never imports Flower, Ray or the adapters above it.

The core is every module in the ``pfxab_flower/`` folder; ``flower_shared/``, ``strategies/``, ``client_apps/``
and ``simulations/`` are installed as ``pfxab_flower.strategies`` & co. and sit above it
(the command line is ``pfxab_flower.simulations.cli.main``). Imports inside functions count too.
Within the core, no module imports one that imports it back, directly or through others, counting imports
for type checkers only (``if TYPE_CHECKING:``) too: the modules form layers (an import cycle is found as a
strongly connected component of the import graph). No whitelist.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = sorted((ROOT / "pfxab_flower").rglob("*.py"))
ADAPTER_FOLDERS = ("flower_shared", "strategies", "client_apps", "simulations")
ABOVE_CORE = ("flwr", "ray", *(f"pfxab_flower.{folder}" for folder in ADAPTER_FOLDERS), *ADAPTER_FOLDERS)


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
    bad = sorted(m for m in imported_modules(path) if m.split(".")[0] in ("flwr", "ray", *ADAPTER_FOLDERS)
                 or any(m == layer or m.startswith(layer + ".") for layer in ABOVE_CORE))
    assert bad == [], f"{path.relative_to(ROOT)} imports {bad}"


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from flwr.app import Context\n    import pfxab_flower.simulations.cli.main\n")
    assert imported_modules(sample) == {"flwr.app", "pfxab_flower.simulations.cli.main"}


def test_the_flower_adapters_share_flower_shared_and_import_nothing_of_each_other() -> None:
    """``client_apps/`` and ``strategies/`` read the record codec from ``flower_shared/``, which imports neither."""
    def imports(folder: str, of: str) -> list[str]:
        package = f"pfxab_flower.{of}"
        return sorted(f"{path.relative_to(ROOT)}: {m}" for path in (ROOT / folder).rglob("*.py")
                      for m in imported_modules(path) if m == package or m.startswith(package + "."))
    assert imports("client_apps", "strategies") == [] and imports("strategies", "client_apps") == []
    assert imports("flower_shared", "strategies") == [] and imports("flower_shared", "client_apps") == []
    assert imports("client_apps", "flower_shared") and imports("strategies", "flower_shared")  # the check reads


# -- no import cycle in the core ------------------------------------------------------------------------------------

def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def core_imports(path: Path, own: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``own`` (at ``path``) imports: at the top, in a function, or for
    type checkers only (a type named from above is a dependency on what is above all the same).

    ``from package import name`` imports ``package.name`` if that is a module; importing a
    module also runs every package above it (``problems/__init__.py`` for ``problems.federation``).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            targets.update(name for name in names if name in known)
            if not all(name in known for name in names):
                targets.add(node.module)
    with_packages = set()
    for target in targets:
        parts = target.split(".")
        with_packages.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))
    return {m for m in with_packages if m in known and m != own and not own.startswith(m + ".")}


def import_graph(paths: list[Path]) -> dict[str, set[str]]:
    """Each core module's imports of other core modules (:func:`core_imports`), by module name."""
    known = {module_name(path) for path in paths}
    return {module_name(path): core_imports(path, module_name(path), known) for path in paths}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm): each an import cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_the_core_has_no_import_cycle() -> None:
    """No core modules import each other, directly or through others (function-level and type-only imports count)."""
    graph = import_graph(CORE)
    arrows = [[f"{source} -> {target}" for source in cycle for target in sorted(graph[source] & set(cycle))]
              for cycle in import_cycles(graph)]
    assert arrows == [], "import cycles (each as its arrows):\n" + "\n".join("; ".join(cycle) for cycle in arrows)


def test_the_cycle_check_finds_a_cycle_and_only_its_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"d"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_the_cycle_check_sees_function_level_and_type_only_imports(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from pfxab_flower import b\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pfxab_flower.c\n"
                                   "def f():\n    from pfxab_flower.a import x\n")
    known = {"pfxab_flower.a", "pfxab_flower.b", "pfxab_flower.c"}
    assert core_imports(tmp_path / "a.py", "pfxab_flower.a", known) == {"pfxab_flower.b"}
    assert core_imports(tmp_path / "b.py", "pfxab_flower.b", known) == {"pfxab_flower.a", "pfxab_flower.c"}


def test_no_flat_api_name_is_a_submodule_of_the_package() -> None:
    """``pfxab_flower.compare`` must stay the function once the module defining it is imported.

    Importing ``pfxab_flower.X`` sets the package's attribute ``X`` to that module, so a
    public name that is also a submodule's name would turn into the module (``compare``
    did, after the command line imported ``pfxab_flower.compare``).
    """
    import pfxab_flower

    submodules = {path.stem for path in (ROOT / "pfxab_flower").glob("*.py")}
    submodules |= {path.parent.name for path in (ROOT / "pfxab_flower").glob("*/__init__.py")}
    assert not set(pfxab_flower._EXPORTS) & submodules
    for name, module in pfxab_flower._EXPORTS.items():
        __import__(module)
        assert not isinstance(getattr(pfxab_flower, name), type(pytest)), name


# -- the core's folders, in layers ----------------------------------------------------------------------------------

#: The core's sub-packages from the bottom up: a module imports only from its own folder and the folders below it
#: (the top-level modules, ``errors``, ``limits``, ``parameter``..., are the ground). Type-only imports count too.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("arms", "processes"), ("storage",), ("problems",), ("algorithms",), ("schema",), ("running",), ("studies",))
LAYER_OF = {folder: level for level, folders in enumerate(LAYERS, start=1) for folder in folders}


def folder_of(module: str) -> str | None:
    """The core folder of a dotted module under ``pfxab_flower`` (``None`` for a top-level module)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYER_OF) else None


def imports_running_back_up(path: Path, module: str | None = None) -> list[str]:
    """The imports of ``path`` (module ``module``, by default its name in the package; any import: top level, in a
    function, for type checkers) that name a folder above or beside its own."""
    own = folder_of(module or module_name(path))
    level = LAYER_OF.get(own, 0) if own is not None else 0
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
        for name in names:
            target = folder_of(name) if name.startswith("pfxab_flower.") else None
            if target is not None and target != own and LAYER_OF.get(target, 0) >= level and target in LAYER_OF:
                bad.append(name)
    return sorted(set(bad))


def test_every_core_folder_is_in_a_layer() -> None:
    folders = {path.parent.name for path in (ROOT / "pfxab_flower").glob("*/__init__.py")}
    assert folders == set(LAYER_OF)


@pytest.mark.parametrize("path", [p for p in CORE if p.name != "__init__.py" or p.parent.name != "pfxab_flower"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_import_runs_back_up_a_layer(path: Path) -> None:
    assert imports_running_back_up(path) == [], f"{path.relative_to(ROOT)} imports from a folder above (or beside) it"


def test_the_layer_check_sees_an_import_running_back_up(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from pfxab_flower.running.driver import D\n"
                      "from pfxab_flower.errors import ConfigError\nfrom pfxab_flower.arms.domain import Domain\n")
    assert imports_running_back_up(sample, "pfxab_flower.arms.x") == ["pfxab_flower.running.driver"]
    assert imports_running_back_up(sample, "pfxab_flower.studies.x") == []
