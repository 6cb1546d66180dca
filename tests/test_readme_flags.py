"""The README's list of ``pfxab run``'s flags is generated from the command's parser by one command."""

from __future__ import annotations

from pfxab_flower.simulations.cli import readme_flags
from pfxab_flower.simulations.cli.readme_flags import COMMAND, README, flags, rewritten


def test_the_readmes_flag_list_is_what_the_command_writes() -> None:
    text = README.read_text(encoding="utf-8")
    assert rewritten(text) == text, f"README.md's flag list is stale: run {COMMAND}"
    assert readme_flags.main(["--check"]) == 0


def test_the_command_restores_a_drifted_list_and_leaves_the_rest_of_the_readme() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index(readme_flags.OPENING) + len(readme_flags.OPENING)
    drifted = text[:start] + "`--stale`,\n`--horizon`" + text[text.index(readme_flags.CLOSING):]
    assert drifted != text and rewritten(drifted) == text
    shown = flags()
    assert shown[:2] == [f for f in shown if f.startswith(("`--problem {", "`--algorithm {"))]
    assert "`--out DIR`" in shown and "`--horizon`" in shown
