"""Module docstrings say what a module is for, in a few lines, and name only what exists.

Measurements and long design notes belong in docs/ (a docstring points there); a name a docstring
cites (``pfxab_flower.running.engine.run``, :func:`check`) and a docs page it cites (with the heading it
quotes) must exist, so that a rename cannot leave a docstring pointing at nothing.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Each source folder and the package it is installed as (pyproject's package-dir).
PACKAGES = {"pfxab_flower": "pfxab_flower", "flower_shared": "pfxab_flower.flower_shared",
            "strategies": "pfxab_flower.strategies",
            "client_apps": "pfxab_flower.client_apps", "simulations": "pfxab_flower.simulations"}
#: Checked for length only: the benchmarks run when imported as ``__main__`` and are not installed.
LENGTH_ONLY = ("benchmarks",)
MAX_MODULE_DOCSTRING_LINES = 6

#: A cited name: a Sphinx role's target (``:func:`~a.b <a.b.c>``` names ``a.b.c``) or a ``dotted.name``.
ROLE = re.compile(r":\w+:`~?([^`<]+?)(?:\s*<([^>]+)>)?`")
DOTTED = re.compile(r"``(pfxab_flower(?:\.\w+)+)``")
#: A docs page cited by path, optionally with (part of) a heading it quotes: docs/flower.md ("Flower versions").
CITED_PAGE = re.compile(r"(docs/[\w/.-]+\.md)(?:#[\w-]+)?(?:\s*\(\"([^\"]+)\")?")


def source_files(folders: tuple[str, ...]) -> list[Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def module_docstring(path: Path) -> str | None:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))


def module_of(path: Path) -> ModuleType:
    folder, *parts = path.relative_to(ROOT).with_suffix("").parts
    return importlib.import_module(".".join([PACKAGES[folder], *(p for p in parts if p != "__init__")]))


def attribute_chain(obj: object, names: list[str]) -> bool:
    for name in names:
        if not hasattr(obj, name):
            return False
        obj = getattr(obj, name)
    return True


def resolves(name: str, module: ModuleType) -> bool:
    """``pfxab_flower.a.b`` as an import and attributes; a bare or relative name from ``module``."""
    name = name.strip().removesuffix("()")
    if name.startswith("."):
        package = module.__name__ if hasattr(module, "__path__") else module.__name__.rpartition(".")[0]
        name = importlib.util.resolve_name(name, package)
    parts = name.split(".")
    if parts[0] == "pfxab_flower":
        for i in range(len(parts), 0, -1):
            try:
                found = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            return attribute_chain(found, parts[i:])
        return False
    # a bare name: the module's own, or a member of one of its classes (:meth:`to_wire`)
    classes = [value for value in vars(module).values() if inspect.isclass(value)]
    return attribute_chain(module, parts) or any(attribute_chain(cls, parts) for cls in classes)


def cited_names(docstring: str) -> set[str]:
    names = {match.group(2) or match.group(1) for match in ROLE.finditer(docstring)}
    names.discard("")
    return names | {match.group(1) for match in DOTTED.finditer(docstring)}


def headings(page: Path) -> set[str]:
    return {line.lstrip("#").strip() for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("#")}


ALL = source_files((*PACKAGES, *LENGTH_ONLY))
PACKAGE_FILES = source_files(tuple(PACKAGES))


def test_the_folders_have_modules() -> None:
    assert len(PACKAGE_FILES) > 100 and any(rel(p).startswith("benchmarks/") for p in ALL)


@pytest.mark.parametrize("path", ALL, ids=rel)
def test_every_module_says_in_a_few_lines_what_it_is_for(path: Path) -> None:
    docstring = module_docstring(path)
    assert docstring, f"{rel(path)} has no module docstring"
    lines = len(docstring.splitlines())
    assert lines <= MAX_MODULE_DOCSTRING_LINES, (
        f"{rel(path)}: module docstring of {lines} lines (at most {MAX_MODULE_DOCSTRING_LINES}: "
        "say what the module is for; measurements and long design notes go to docs/)")


@pytest.mark.parametrize("path", PACKAGE_FILES, ids=rel)
def test_the_names_a_module_docstring_cites_exist(path: Path) -> None:
    docstring = module_docstring(path) or ""
    names = cited_names(docstring)
    if not names:
        return
    module = module_of(path)
    assert sorted(name for name in names if not resolves(name, module)) == []


@pytest.mark.parametrize("path", ALL, ids=rel)
def test_the_docs_a_module_docstring_cites_exist(path: Path) -> None:
    missing = []
    for match in CITED_PAGE.finditer(module_docstring(path) or ""):
        page, heading = ROOT / match.group(1), match.group(2)
        if not page.is_file():
            missing.append(match.group(1))
        elif heading and not any(" ".join(heading.split()) in title for title in headings(page)):
            missing.append(f'{match.group(1)} ("{heading}")')
    assert missing == []


def test_a_missing_name_is_found() -> None:
    """The check itself: the name ``driver.py`` cited before this test existed does not resolve."""
    driver = importlib.import_module("pfxab_flower.running.driver")
    assert not resolves("pfxab_flower.running.engine.scored_result", driver)
    assert resolves("pfxab_flower.running.driver_outcome.RunOutcome.result", driver)
    assert resolves("ServerDriver.deliver", driver)
