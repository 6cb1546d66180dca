"""The wheel ships every package of the source tree: pyproject's explicit ``packages`` list is complete.

A package missing from the list installs from a clone (editable) but not from the wheel, and only
``.ci/wheel-check`` would see it, after the whole suite: this test sees it at once.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def source_packages() -> set[str]:
    """Every package below the import package and its adapter folders, under its installed name."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    folders = {"pfxab_flower": "pfxab_flower", **config["package-dir"]}
    found = set()
    for name, folder in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *parts)))
    return found


def test_every_source_package_is_listed_for_the_wheel() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    assert source_packages() - listed == set()


def test_the_check_sees_the_packages_it_must() -> None:
    assert {"pfxab_flower.algorithms.bounds", "pfxab_flower.strategies", "pfxab_flower.simulations.cli.commands"} <= (
        source_packages())
