"""pfxab-flower: personalised federated X-armed bandits (PF-XAB, arXiv:2409.07251) on Flower.

The flat API (``run``, ``compare``, ``calibrate``, ``RunConfig``, ``Federation``, ``register_algorithm``,
...) is imported on first use, so ``import pfxab_flower`` stays cheap for a Flower app. The adapters
(:mod:`pfxab_flower.strategies`, :mod:`pfxab_flower.client_apps`, :mod:`pfxab_flower.simulations`) are the
clone's top-level folders, served from there in a clone (:func:`_serve_adapters_from_the_source_tree`).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

#: Public name -> the module that defines it.
_EXPORTS = {
    "Domain": "pfxab_flower.arms.domain",
    "Federation": "pfxab_flower.problems.federation",
    "RunConfig": "pfxab_flower.schema.run_config",
    "ConfigError": "pfxab_flower.errors",
    "RunResult": "pfxab_flower.running.results",
    "run": "pfxab_flower.running.engine",
    "run_config": "pfxab_flower.running.engine",
    "compare": "pfxab_flower.studies.comparison",
    "register_problem": "pfxab_flower.problems.registry",
    "register_algorithm": "pfxab_flower.algorithms.registry",
    "calibrate": "pfxab_flower.studies.calibration",
    "Calibration": "pfxab_flower.studies.calibration",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def _installed_version() -> str:
    """This distribution's version; read on first use of ``__version__`` (``importlib.metadata`` costs every
    ``pfxab run`` about a fifth of an ``import numpy``, and only ``--version`` and a few messages need it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pfxab-flower")
    except PackageNotFoundError:  # a source tree that is not installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = value = _installed_version()
        return value
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pfxab_flower' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | {"__version__"})


class _SourceTreeAdapters:
    """Finds ``pfxab_flower.<adapter>`` in a clone's top-level folder, as ``package-dir`` maps it.

    A meta path finder by its ``find_spec`` alone: deriving from ``importlib.abc.MetaPathFinder``
    would import ``importlib.resources`` and ``tempfile`` into every start of ``pfxab``.

    It answers for exactly the packages ``pyproject.toml``'s ``[tool.setuptools.package-dir]``
    maps (read on first use), and only under this tree's ``pfxab_flower`` package; their
    submodules are then found the ordinary way, below each folder.
    """

    def __init__(self, root: Path) -> None:
        self.root = root  # the clone: pyproject.toml, pfxab_flower/, simulations/, ...
        self._package = root / __name__
        self._mapping: dict[str, Path] | None = None

    def mapping(self) -> dict[str, Path]:
        if self._mapping is None:
            import tomllib  # here: an installed package never needs it

            with open(self.root / "pyproject.toml", "rb") as file:
                declared = tomllib.load(file).get("tool", {}).get("setuptools", {}).get("package-dir", {})
            self._mapping = {name: self.root / folder for name, folder in declared.items()
                             if name.startswith(__name__ + ".") and name.count(".") == 1}
        return self._mapping

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        folder = self.mapping().get(fullname) if fullname.startswith(__name__ + ".") else None
        if folder is None or path is None or not (folder / "__init__.py").is_file():
            return None
        if not any(Path(entry).resolve() == self._package for entry in path):
            return None  # the pfxab_flower of another tree (imported after this one was dropped)
        return importlib.util.spec_from_file_location(fullname, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])


def _serve_adapters_from_the_source_tree() -> None:
    """In a clone imported as is, find ``pfxab_flower.simulations`` & co. in the clone's own folders.

    ``flwr run .`` puts the app directory (the clone) first on ``sys.path``, and so does
    ``python -m benchmarks`` from the clone's root: its ``pfxab_flower/`` then shadows any
    installed copy, but has no ``simulations/`` inside. Without an editable install nothing
    would map the adapters in (``No module named 'pfxab_flower.simulations'``), and with one
    of *another* tree they would come from there. This finder serves them from this clone,
    so every module comes from the same tree. An installed package (a wheel: the folders
    sit inside it) is left alone, and nothing but the mapped packages becomes importable.
    """
    here = Path(__file__).resolve().parent
    root = here.parent
    if (here / "simulations").is_dir() or not (root / "pyproject.toml").is_file():
        return  # installed (wheel or site-packages), or a folder copied out of its clone
    if any(getattr(finder, "root", None) == root and type(finder).__name__ == _SourceTreeAdapters.__name__
           for finder in sys.meta_path):
        return  # this tree's finder is there already (the package was imported again)
    sys.meta_path.insert(0, _SourceTreeAdapters(root))


_serve_adapters_from_the_source_tree()
