"""The Flower adapters use Flower's public API; its internals only in ``flower_shared/flower_internals.py``.

Public is what Flower's docs reference: ``flwr.app``, ``flwr.serverapp`` (and its ``strategy``),
``flwr.clientapp`` (and the ``typing`` of its mods), ``flwr.simulation``, and for the legacy API
the top-level names of ``flwr.server`` (with ``strategy``, ``workflow`` and ``client_proxy``,
the type in the legacy ``Strategy``'s signature), ``flwr.client`` (with ``mod``) and ``flwr.common``.
Everything else may move in any Flower release: one module holds it and says why.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.patience import patient
from tests.test_layering import imported_modules

ROOT = Path(__file__).resolve().parents[1]
INTERNALS = ROOT / "flower_shared" / "flower_internals.py"
ADAPTERS = sorted(path for folder in ("flower_shared", "strategies", "client_apps", "simulations", "benchmarks")
                  for path in (ROOT / folder).rglob("*.py") if path != INTERNALS)
PUBLIC = ("flwr.app", "flwr.serverapp", "flwr.serverapp.strategy", "flwr.clientapp", "flwr.clientapp.typing",
          "flwr.simulation", "flwr.server", "flwr.server.strategy", "flwr.server.workflow",
          "flwr.server.client_proxy", "flwr.client", "flwr.client.mod", "flwr.common")


def flower_internals_imported(path: Path) -> list[str]:
    return sorted(m for m in imported_modules(path) if m.split(".")[0] == "flwr" and m not in PUBLIC)


def test_every_adapter_folder_is_read() -> None:
    assert {path.relative_to(ROOT).parts[0] for path in ADAPTERS} == {"flower_shared", "strategies", "client_apps",
                                                                     "simulations", "benchmarks"}


@pytest.mark.parametrize("path", ADAPTERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_adapter_module_imports_only_flowers_public_api(path: Path) -> None:
    internal = flower_internals_imported(path)
    assert internal == [], (f"{path.relative_to(ROOT)} imports Flower internals {internal}: use the public API, "
                            "or put the use in flower_shared/flower_internals.py and say there why Flower has no hook "
                            "for it")


def test_the_internals_module_names_each_internal_it_imports() -> None:
    """Each internal module it imports is named in its docstring's reasons, by what it is for."""
    internal = flower_internals_imported(INTERNALS)
    assert internal == ["flwr.cli.constant", "flwr.common.constant", "flwr.server.compat.app_utils",
                        "flwr.server.superlink.fleet.vce", "flwr.server.superlink.fleet.vce.backend.raybackend",
                        "flwr.server.workflow.constant", "flwr.server.workflow.default_workflows",
                        "flwr.server.workflow.secure_aggregation.secaggplus_workflow", "flwr.superlink.grid"]


def test_a_client_app_process_does_not_load_the_superlink() -> None:
    """The internals are imported where used: the simulation grid's module (``flwr.superlink``, ~580 modules)
    is not loaded by a process that only runs our ClientApps."""
    code = ("import sys; import pfxab_flower.client_apps, pfxab_flower.client_apps.foreign; "
            "print(sorted(m for m in sys.modules if m.split('.')[:2] in (['flwr', 'superlink'], ['flwr', 'cli'])))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            timeout=patient(120))
    assert loaded.stdout.strip() == "[]"
