"""The docs name what exists: files of the repository, and the choices ``pfxab run --help`` shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pfxab_flower.algorithms import algorithm_names
from pfxab_flower.problems.registry import problem_names
from pfxab_flower.simulations.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: A repository path as the docs cite one: ``strategies/message.py``, ``docs/landmine.md``, ...
CITED_PATH = re.compile(r"(?<![\w/.-])((?:pfxab_flower|flower_shared|strategies|client_apps|simulations|tests"
                        r"|benchmarks|docs)/[\w/.-]*\.(?:py|md|toml|png|npz))")


def run_help() -> str:
    parser = build_parser()
    subcommands = next(a for a in parser._actions if a.dest == "command")
    return " ".join(subcommands.choices["run"].format_help().split())


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_a_page_cites_exists(page: Path) -> None:
    cited = {m.group(1) for m in CITED_PATH.finditer(page.read_text(encoding="utf-8"))}
    missing = sorted(p for p in cited if not (ROOT / p).exists() and not (page.parent / p).exists())
    assert missing == [], f"{page.relative_to(ROOT)} cites {missing}"


def test_the_readmes_flag_choices_are_what_help_shows() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"`(--[a-z-]+ \{[^}`]+\})`", readme)
    assert "--problem {" + ",".join(problem_names()) + "}" in listed
    help_text = run_help()
    assert [flag for flag in listed if flag not in help_text] == []


def test_the_flower_pages_problem_row_is_the_registry() -> None:
    page = (ROOT / "docs" / "flower.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| `problem` |"))
    assert re.findall(r"`([a-z][a-z0-9_-]*)`", row.split("|")[3]) == list(problem_names())


def test_the_docs_list_every_algorithm() -> None:
    """The README's flag, the Flower page's run-config row and the algorithms' index: the registry, each with a page."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`--algorithm {" + ",".join(algorithm_names()) + "}`" in readme
    page = (ROOT / "docs" / "flower.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| `algorithm` |"))
    assert re.findall(r"`([a-z-]+)`", row.split("|")[3]) == list(algorithm_names())
    index = (ROOT / "docs" / "algorithms" / "index.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `([a-z-]+)` \| \[([a-z-]+\.md)\]", index, flags=re.MULTILINE)
    assert [name for name, _ in listed] == list(algorithm_names())
    assert all((ROOT / "docs" / "algorithms" / file).is_file() for _, file in listed)
