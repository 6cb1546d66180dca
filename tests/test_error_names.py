"""An error names a value the way the user gave it, and ``--help`` says each default once.

The checks are declared once (:data:`pfxab_flower.schema.catalogue.PARAMETERS`); only the name in the
one-line error follows the entry point (:func:`pfxab_flower.errors.spelled_as`): the Python
keyword (``noise_sigma``), the command-line flag (``--noise-sigma``), the run-config or TOML
key (``noise-sigma``).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pytest

from pfxab_flower import Federation, RunConfig
from pfxab_flower.errors import ConfigError, spelled, spelled_as
from pfxab_flower.schema.run_config import parse_run_config
from pfxab_flower.simulations.cli.main import build_parser
from pfxab_flower.simulations.experiments.experiment import load_experiment
from tests.conftest import cli_error_line

DEFAULT_FIELDS = "0,3,6,9,12,15,18,21,24,27"


def error(call) -> str:
    with pytest.raises(ConfigError) as info:
        call()
    return str(info.value)


def test_the_python_api_names_its_keywords() -> None:
    objectives = [lambda x: 1 - np.abs(x[:, 0] - 0.5)] * 2
    assert error(lambda: Federation.from_callables(objectives, {"x": (0.0, 1.0)}, noise_sigma=-1)) == (
        "noise_sigma=-1 is invalid; allowed: a number >= 0")
    assert error(lambda: RunConfig(max_depth=0)).startswith("max_depth=0 is invalid; allowed: ")
    assert error(lambda: RunConfig.from_mapping({"pf-pne-eps": "-1"})).startswith("pf_pne_eps=-1.0 is invalid")


def test_the_command_line_names_its_flags() -> None:
    assert cli_error_line("run", "--noise-sigma", "-1") == (
        "pfxab run: error: --noise-sigma=-1.0 is invalid; allowed: a number >= 0")
    assert cli_error_line("compare", "--max-depth", "0").startswith("pfxab compare: error: --max-depth=0 is invalid")


def test_simulate_hands_its_flags_on_as_a_run_config_and_still_names_the_flags(tmp_path: Path) -> None:
    line = cli_error_line("simulate", "--fail-rate", "2", "--out", str(tmp_path / "o"))
    assert line.startswith("pfxab simulate: error: --fail-rate=2.0 is invalid; allowed: ")
    assert not (tmp_path / "o").exists()


def test_a_run_config_and_a_sweep_file_name_their_keys(tmp_path: Path) -> None:
    assert error(lambda: parse_run_config({"noise-sigma": -1})) == "noise-sigma=-1 is invalid; allowed: a number >= 0"
    sweep = tmp_path / "e.toml"
    sweep.write_text("[experiment]\nname = 'e'\n[fixed]\nnoise-sigma = -1\nhorizon = 100\n", encoding="utf-8")
    with spelled_as("flag"):  # as in `pfxab sweep e.toml`: the file's key, not a flag
        assert error(lambda: load_experiment(sweep)) == "e.toml: noise-sigma=-1 is invalid; allowed: a number >= 0"


def test_the_innermost_entry_point_names_unless_it_defers() -> None:
    assert spelled("noise_sigma") == "noise_sigma"
    with spelled_as("flag"):
        assert spelled("noise_sigma") == "--noise-sigma"
        with spelled_as("key"):
            assert spelled("noise_sigma") == "noise-sigma"
        with spelled_as("key", unless_set=True):
            assert spelled("noise_sigma") == "--noise-sigma"
        assert spelled("noise_sigma") == "--noise-sigma"
    with spelled_as("key", unless_set=True):
        assert spelled("noise_sigma") == "noise-sigma"
    assert spelled("noise_sigma") == "noise_sigma"
    with pytest.raises(ValueError, match="spelling='kebab' is invalid"), spelled_as("kebab"):
        pass


def test_too_many_landmine_clients_name_the_fields_that_bound_them() -> None:
    """Without fields the default ten bound the clients: the message says so, not 'chosen by --fields'."""
    assert cli_error_line("run", "--problem", "landmine", "--num-clients", "29") == (
        f"pfxab run: error: --num-clients=29 is invalid; allowed: at most 10 with the default landmine fields "
        f"({DEFAULT_FIELDS}); --fields can name up to 29")
    assert error(lambda: RunConfig(problem="landmine", num_clients=3, fields="5,1")) == (
        "num_clients=3 is invalid; allowed: at most 2, the number of landmine fields in fields='5,1'")
    assert error(lambda: parse_run_config({"problem": "landmine", "num-clients": 11})).endswith(
        "; fields can name up to 29")


def option_helps() -> list[tuple[str, str, str]]:
    """(sub-command, flag, help text) of every option of every ``pfxab`` sub-command."""
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [(name, action.option_strings[0], action.help or "") for name, sub in commands.choices.items()
            for action in sub._actions if action.option_strings]


def test_every_flag_names_its_default_once_and_no_machine_timing() -> None:
    helps = option_helps()
    assert len(helps) > 50
    twice = [(c, f, h) for c, f, h in helps if len(re.findall(r"\bdefault\b", h)) > 1]
    timed = [(c, f, h) for c, f, h in helps if re.search(r"\bruns in\b|\d\s*s here\b", h)]
    assert twice == [] and timed == []
    shown = {f: h for c, f, h in helps if c == "run"}
    assert shown["--max-depth"] == "deepest phase (default: none, the budget alone limits the depth)"
    assert shown["--fields"].endswith(f"(default: {DEFAULT_FIELDS})")
    assert shown["--horizon"] == "pulls per client T, at most 10,000,000,000 (default: 2000000)"
    assert dict((f, h) for c, f, h in helps if c == "simulate")["--fail-clients"].endswith("(default: every client)")
