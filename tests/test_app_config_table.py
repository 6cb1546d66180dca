"""``pyproject.toml``'s ``[tool.flwr.app.config]`` is generated from the declarations by one command."""

from __future__ import annotations

import tomllib

from pfxab_flower.schema import app_config_table
from pfxab_flower.schema.app_config_table import COMMAND, PYPROJECT, declared_table, rewritten


def test_the_table_is_what_the_command_writes() -> None:
    text = PYPROJECT.read_text(encoding="utf-8")
    assert rewritten(text) == text, f"pyproject.toml's [tool.flwr.app.config] is stale: run {COMMAND}"
    assert app_config_table.main(["--check"]) == 0


def test_the_command_restores_a_drifted_table_and_keeps_its_comments_and_the_rest_of_the_file() -> None:
    text = PYPROJECT.read_text(encoding="utf-8")
    drifted = (text.replace('\nalpha = 0.5\n', '\n')  # a key left out
               .replace('\nhorizon = 2000000\n', '\nhorizon = 7\nnot-declared = 1\n')  # a stale value, an extra key
               .replace('candidates = 0 ', 'candidates = 3 '))
    assert drifted != text
    assert rewritten(drifted) == text
    table = tomllib.loads(rewritten(drifted))["tool"]["flwr"]["app"]["config"]
    assert table == declared_table() and list(table) == list(declared_table())
    assert "# pf-sh's candidate count K" in rewritten(drifted)


def test_check_refuses_a_stale_table_and_writes_nothing(tmp_path, monkeypatch) -> None:
    stale = tmp_path / "pyproject.toml"
    stale.write_text(PYPROJECT.read_text(encoding="utf-8").replace("\nalpha = 0.5\n", "\n"), encoding="utf-8")
    monkeypatch.setattr(app_config_table, "PYPROJECT", stale)
    written = stale.read_text(encoding="utf-8")
    assert app_config_table.main(["--check"]) == 1 and stale.read_text(encoding="utf-8") == written
    assert app_config_table.main([]) == 0 and rewritten(stale.read_text(encoding="utf-8")) == stale.read_text()
    assert "alpha = 0.5" in stale.read_text(encoding="utf-8")
