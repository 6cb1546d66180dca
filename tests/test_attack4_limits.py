"""Issue 47 (the fourth attack), classes 12 and 15: a limit is enforced where the value enters.

Before: a sweep grid whose pf-sh candidates x clients exceeded 2^20 started work and failed after two runs
(``compare`` refused it at once) naming ``--candidates`` for a sweep file; ``pfxab run --algorithm pf-xab
--candidates 10`` ran PF-XAB and dropped the flag, where Python refuses the keyword.
"""

from __future__ import annotations

import pytest

from pfxab_flower.errors import ConfigError
from pfxab_flower.schema.run_config import RunConfig, parse_run_config
from pfxab_flower.simulations.cli.main import main

GRID = """
[experiment]
name = "big"

[fixed]
problem = "garland"
horizon = 2000
algorithm = "pf-sh"

[grid]
num_clients = [2, 3, 1000]
candidates = [2000]
"""


def one_line(capsys, *args: str) -> str:
    capsys.readouterr()
    assert main(list(args)) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured
    return captured.err.strip()


def test_a_sweep_grid_over_the_pf_sh_pair_limit_is_refused_before_any_run_naming_its_keys(tmp_path, capsys):
    (tmp_path / "big.toml").write_text(GRID)
    line = one_line(capsys, "sweep", str(tmp_path / "big.toml"), "--out", str(tmp_path / "out"), "--no-progress")
    assert line == ("pfxab sweep: error: big.toml: candidates=2000 is invalid; allowed: an integer in [0, 1,048] "
                    "with num-clients=1000 (candidates x clients at most 1,048,576)")
    assert not (tmp_path / "out").exists()  # before any work: nothing made


@pytest.mark.parametrize(("entry", "expected"), [
    ("python", "candidates=2000 is invalid; allowed: an integer in [0, 1,048] with num_clients=1000"),
    ("run config", "candidates=2000 is invalid; allowed: an integer in [0, 1,048] with num-clients=1000"),
])
def test_the_pair_limit_holds_from_python_and_a_run_config(entry, expected):
    with pytest.raises(ConfigError) as info:
        if entry == "python":
            RunConfig(algorithm="pf-sh", num_clients=1000, candidates=2000)
        else:
            parse_run_config({"algorithm": "pf-sh", "num-clients": 1000, "candidates": 2000})
    assert str(info.value).startswith(expected)


@pytest.mark.parametrize("command", ["run", "simulate"])
def test_the_pair_limit_on_the_command_line_names_the_flags(capsys, command, tmp_path):
    extra = ["--out", str(tmp_path / "r")] if command == "simulate" else []
    line = one_line(capsys, command, "--algorithm", "pf-sh", "--num-clients", "1000", "--candidates", "2000", *extra)
    assert "--candidates=2000 is invalid; allowed: an integer in [0, 1,048] with --num-clients=1000" in line
    assert RunConfig(algorithm="pf-sh", num_clients=1000, candidates=1048).candidates == 1048  # at the limit


@pytest.mark.parametrize("command", ["run", "simulate"])
def test_another_algorithms_flag_is_refused_as_python_refuses_the_keyword(capsys, command, tmp_path):
    args = [command, "--algorithm", "pf-xab", "--candidates", "10"]
    if command == "simulate":
        args += ["--out", str(tmp_path / "r")]
    line = one_line(capsys, *args)
    assert line == (f"pfxab {command}: error: --candidates=10 is invalid; allowed: only with --algorithm pf-sh, "
                    "whose parameter it is (this run is pf-xab on garland)")
    line = one_line(capsys, command, "--algorithm", "pf-sh", "--pf-pne-eps", "0.2", *args[5:])
    assert "--pf-pne-eps=0.2 is invalid; allowed: only with --algorithm pf-pne, whose parameter it is (this run is " \
           "pf-sh on garland)" in line
    line = one_line(capsys, command, "--problem", "garland", "--fields", "1,2", *args[5:])
    assert "--fields='1,2' is invalid; allowed: only with --problem landmine, whose parameter it is" in line
    line = one_line(capsys, command, "--problem", "garland-2d", "--landmine-data", "x.mat", *args[5:])
    assert "--landmine-data='x.mat' is invalid; allowed: only with --problem landmine" in line
    line = one_line(capsys, command, "--algorithm", "pf-sh", "--random-fraction", "0.5", *args[5:])
    assert "--random-fraction=0.5 is invalid; allowed: only with --algorithm random-search" in line


def test_a_run_config_for_one_algorithm_refuses_another_algorithms_option_set():
    with pytest.raises(ConfigError, match=r"^candidates=10 is invalid; allowed: only with algorithm pf-sh"):
        parse_run_config({"algorithm": "pf-xab", "candidates": 10})
    with pytest.raises(ConfigError, match=r"^spread=0\.5 is invalid; allowed: only with problem garland or "):
        parse_run_config({"problem": "landmine", "num-clients": 2, "spread": 0.5})
    config, _ = parse_run_config({"algorithm": "pf-xab", "candidates": 0})  # its default: every key is listed
    assert config.algorithm == "pf-xab"


def test_the_algorithms_own_flag_still_works_and_a_comparison_gives_it_to_who_declares_it(capsys):
    assert main(["run", "--algorithm", "pf-sh", "--candidates", "10", "--num-clients", "3", "--horizon", "2000",
                 "--json"]) == 0
    assert '"candidates": 10' in capsys.readouterr().out
    assert main(["compare", "--algorithms", "pf-xab,pf-sh", "--candidates", "10", "--num-clients", "3", "--horizon",
                 "2000", "--seeds", "0", "--no-progress"]) == 0


def test_a_sweep_or_comparison_refuses_an_own_parameter_none_of_its_runs_reads(tmp_path, capsys):
    """Before: ``candidates = 64`` beside ``algorithm = "pf-xab"`` ran PF-XAB, and the tables said candidates 64."""
    (tmp_path / "s.toml").write_text('[fixed]\nalgorithm = "pf-xab"\ncandidates = 64\nhorizon = 2000\n'
                                     '[grid]\nseed = [0, 1]\n')
    line = one_line(capsys, "sweep", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"))
    assert "s.toml: candidates=64 is invalid; allowed: only with algorithm pf-sh" in line
    line = one_line(capsys, "compare", "--algorithms", "pf-xab,fed-pne", "--candidates", "64", "--seeds", "0",
                    "--no-progress")
    assert "--candidates=64 is invalid; allowed: only with --algorithm pf-sh" in line
    (tmp_path / "both.toml").write_text('[fixed]\ncandidates = 64\nhorizon = 2000\nnum_clients = 3\n'
                                        '[grid]\nalgorithm = ["pf-xab", "pf-sh"]\n')
    assert main(["sweep", str(tmp_path / "both.toml"), "--out", str(tmp_path / "ok"), "--no-progress"]) == 0
    (tmp_path / "f.toml").write_text('[fixed]\nfields = "1,2"\nhorizon = 2000\nnum_clients = 2\n'
                                     '[grid]\nseed = [0, 1]\n')
    assert "f.toml: fields='1,2' is invalid; allowed: only with problem landmine" in one_line(
        capsys, "sweep", str(tmp_path / "f.toml"), "--out", str(tmp_path / "f"))
    assert "--fields='1,2' is invalid" in one_line(capsys, "compare", "--fields", "1,2", "--seeds", "0",
                                                    "--no-progress")
    from pfxab_flower import compare

    with pytest.raises(ConfigError, match=r"^candidates=64 is invalid; allowed: only with algorithm pf-sh"):
        compare(RunConfig(num_clients=3, horizon=2000), algorithms=["pf-xab"], seeds=[0], candidates=64, progress=False)
