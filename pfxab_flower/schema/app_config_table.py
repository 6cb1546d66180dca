"""Writes ``pyproject.toml``'s ``[tool.flwr.app.config]`` from the declarations: every run-config key, its default.

``flwr run`` drops a run-config key the app's ``pyproject.toml`` does not list, so the table names every key
the catalogue and the registries declare. ``python -m pfxab_flower.schema.app_config_table`` rewrites that table
only, keeping each key's comments (``--check``: exit 1 if stale, writing nothing); a test fails until it is run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pfxab_flower.schema.catalogue import run_config_value, scoped
from pfxab_flower.storage.generated_files import regenerate

COMMAND = "python -m pfxab_flower.schema.app_config_table"
HEADER = "[tool.flwr.app.config]"
#: The project's ``pyproject.toml`` (a source checkout: the package's parent folder).
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def declared_table() -> dict[str, Any]:
    """The table's keys and values: every run-config key the declarations list, at its default, in listing order."""
    return {p.key: run_config_value(p.name, p.default) for p in scoped("run") + scoped("app")}


def toml_value(value: Any) -> str:
    """``value`` as TOML writes it (a string, an integer, a float, a boolean)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))


def _section(lines: list[str]) -> tuple[int, int]:
    """Where the table's lines are: from its header (excluded) to the next table or the end."""
    start = lines.index(HEADER) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("[")), len(lines))
    while end > start and not lines[end - 1].strip():  # the blank lines before the next table stay outside
        end -= 1
    return start, end


def _comments(body: list[str]) -> dict[str, tuple[list[str], str]]:
    """Each key's comment lines just above it and the comment on its line (``"   # ..."``), from the current table."""
    kept: dict[str, tuple[list[str], str]] = {}
    above: list[str] = []
    for line in body:
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(line)
            continue
        if "=" in line:
            key = line.split("=", 1)[0].strip()
            value_part = line.split("=", 1)[1]
            hash_at = _comment_start(value_part)
            trailing = value_part[hash_at:] if hash_at >= 0 else ""
            kept[key] = (above, trailing)
        above = []
    return kept


def _comment_start(text: str) -> int:
    """Where a ``#`` comment starts in a TOML value's text (outside a quoted string), or -1."""
    quoted = False
    for i, char in enumerate(text):
        if char == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif char == "#" and not quoted:
            return i
    return -1


def rewritten(text: str) -> str:
    """``text`` (a ``pyproject.toml``) with its app-config table rewritten from the declarations."""
    lines = text.splitlines()
    start, end = _section(lines)
    comments = _comments(lines[start:end])
    body: list[str] = []
    for key, value in declared_table().items():
        above, trailing = comments.get(key, ([], ""))
        line = f"{key} = {toml_value(value)}"
        body += [*above, f"{line:<28} {trailing}" if trailing else line]
    return "\n".join([*lines[:start], *body, *lines[end:]]) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    if not PYPROJECT.is_file():
        print(f"{COMMAND}: error: {PYPROJECT} not found; allowed: a source checkout of the project", file=sys.stderr)
        return 2
    return regenerate(argv, command=COMMAND, description=__doc__.splitlines()[0], target=PYPROJECT,
                      render=rewritten, what="the table",
                      stale=f"{PYPROJECT.name}'s {HEADER} is stale: run {COMMAND}")

if __name__ == "__main__":
    sys.exit(main())
