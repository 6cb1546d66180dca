"""Landmine fields as real sites: docs/examples/landmine_sites on a real SuperLink with 3 SuperNodes.

Each SuperNode holds one field's file (made by ``write_site_files`` from a small file of the
landmine format that the test writes) and no ``partition-id``; its objective fits the SVM on
its own training half and returns the held-out AUC (``deterministic``). The run must finish
with every site, and its ``Result`` hold each site's tuned ``(C, gamma)`` and its AUC there,
which must be exactly what the site's own data gives at that point. The default tier runs the
example's own ServerApp and ClientApp over Flower's Message-API loop without servers
(tests/message_loopback.py); the real SuperLink and SuperNodes are the slow tier.
"""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from pfxab_flower.errors import ConfigError
from pfxab_flower.problems.landmine import DOMAIN, svm_auc
from pfxab_flower.problems.landmine_data import load_splits
from pfxab_flower.problems.landmine_sites import load_site, site_objective, write_site_files
from tests.landmine_files import accepting, write_landmine_format_file
from tests.patience import patient

ROOT = Path(__file__).resolve().parents[1]
FIELDS = (0, 10, 20)


@pytest.fixture
def site_files(tmp_path: Path) -> list[Path]:
    data = write_landmine_format_file(tmp_path / "LandmineData.mat")
    with accepting(data):
        return write_site_files(tmp_path / "sites", FIELDS, str(data.path))


def test_a_site_file_holds_its_fields_split_and_its_objective_is_the_fields(site_files, tmp_path) -> None:
    data = write_landmine_format_file(tmp_path / "again.mat")
    with accepting(data):
        splits, _ = load_splits(FIELDS, str(data.path))
    points = np.array([[1.0, 0.1], [100.0, 2.0]])
    for path, split in zip(site_files, splits, strict=True):
        assert path.name == f"field-{split.field}.npz"
        np.testing.assert_array_equal(load_site(path).X_train, split.X_train)
        expected = [svm_auc(split, C, gamma) for C, gamma in points]
        np.testing.assert_array_equal(site_objective(path)(points), expected)
    assert not list((tmp_path / "sites").glob(".*"))  # no temporary file left


@pytest.mark.parametrize("fields", [(), (0, 0), (29,), (-1,), ("1",)])
def test_bad_fields_are_one_line(fields, tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"^fields=.* is invalid; allowed: distinct field indices in \[0, 29\)$"):
        write_site_files(tmp_path / "sites", fields)


def test_a_file_that_is_not_a_site_file_is_one_line(tmp_path) -> None:
    (tmp_path / "junk.npz").write_bytes(b"not a file")
    with pytest.raises(ConfigError, match=r"^data-path=.*junk.npz' is invalid; allowed: a site file"):
        site_objective(tmp_path / "junk.npz")


def check_sites(result: dict, site_files: list[Path]) -> None:
    """Every site, each at a point of the domain, with exactly the AUC its own data gives there."""
    assert result["lost_clients"] == []
    sites = result["sites"]
    assert sorted(site["site"] for site in sites) == [f"field-{f}" for f in FIELDS]
    low = np.array([dimension.low for dimension in DOMAIN.dimensions])
    high = np.array([dimension.high for dimension in DOMAIN.dimensions])
    for site in sites:
        point = np.array([site["C"], site["gamma"]])
        assert np.all(point >= low) and np.all(point <= high), site
        path = site_files[FIELDS.index(int(site["site"].removeprefix("field-")))]
        assert site["auc"] == site_objective(path)(point[None, :])[0]  # the site's own AUC at its tuned point


def test_the_landmine_sites_app_over_flowers_message_loop_without_servers(site_files, tmp_path) -> None:
    """The example's ServerApp ``main`` and ClientApp, over the loopback grid of nodes that carry a ``data-path`` and
    a ``site`` and no ``partition-id`` (as the deployment's SuperNodes), node ids in no order."""
    from flwr.app import Context, RecordDict

    from tests.message_loopback import as_a_serverapp_process
    from tests.test_assigned_clients import UnlabelledGrid

    sys.path.insert(0, str(ROOT / "docs" / "examples" / "landmine_sites"))
    try:
        client_app = importlib.import_module("landmine_sites.client_app")
        server_app = importlib.import_module("landmine_sites.server_app")
        grid = UnlabelledGrid([307, 105, 150], client_app.app)
        for context, path, field in zip(grid.contexts.values(), site_files, FIELDS, strict=True):
            context.node_config = {"data-path": str(path), "site": f"field-{field}"}
        out = tmp_path / "sites.json"
        as_a_serverapp_process()
        server_app.main(grid, Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={
            "num-clients": 3, "horizon": 3000, "alpha": 0.5, "seed": 0, "out": str(out)}))
    finally:
        sys.path.remove(str(ROOT / "docs" / "examples" / "landmine_sites"))
        for name in [n for n in sys.modules if n == "landmine_sites" or n.startswith("landmine_sites.")]:
            del sys.modules[name]
    result = json.loads(out.read_text())
    check_sites(result, site_files)
    assert sorted(site["flower_node"] for site in result["sites"]) == [105, 150, 307]


@pytest.mark.exhaustive  # default tier: the same app over Flower's Message-API loop without servers (above)
@pytest.mark.slow
@pytest.mark.loopback
@pytest.mark.timeout(240)
def test_the_landmine_sites_app_on_a_real_superlink_with_three_supernodes(site_files, tmp_path) -> None:
    from pfxab_flower.simulations.flower import local_deployment as dep
    from tests.deployment_tools import log_tail

    app_dir = tmp_path / "app"
    shutil.copytree(ROOT / "docs" / "examples" / "landmine_sites", app_dir)
    out = tmp_path / "sites.json"
    node_configs = [f'data-path="{path}" site="field-{field}"' for path, field in zip(site_files, FIELDS, strict=True)]
    with dep.deployment(3, tmp_path / "deploy", node_configs=node_configs, startup_timeout=patient(60)) as running:
        done = running.flwr_run(app_dir, f'horizon=3000 out="{out}"', timeout=patient(180))
        assert done.returncode == 0 and out.exists(), done.stdout[-2000:] + done.stderr[-2000:] + log_tail(running)
    check_sites(json.loads(out.read_text()), site_files)
