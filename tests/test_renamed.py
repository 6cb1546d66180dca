"""One name for the number of clients ``M``: ``num_clients`` (``--num-clients``, run-config key ``num-clients``).

Its former name ``clients`` is refused as a keyword, run-config or sweep key, before any work, in one line naming the
new spelling; the former flag ``--clients N`` is read as ``--num-clients N`` with a one-line warning (commands in
scripts and notes outlive a rename). Results a sweep wrote under the former name still resume (same run ids).
"""

from __future__ import annotations

import json

import pytest

from pfxab_flower.errors import ConfigError
from pfxab_flower.schema.run_config import RunConfig, parse_run_config
from pfxab_flower.simulations.cli.main import build_parser, main
from pfxab_flower.simulations.experiments.experiment import load_experiment, run_id, same_run
from pfxab_flower.simulations.flower.flwr_run_launcher import supernodes_of


@pytest.mark.parametrize("command", ["run", "compare", "calibrate", "simulate"])
@pytest.mark.parametrize("flag", [["--clients", "3"], ["--clients=3"]])
def test_the_former_flag_is_read_as_the_new_one_with_a_one_line_warning(command, flag, capsys) -> None:
    args = build_parser(commands=[command]).parse_args([command, *flag, "--horizon", "1000"])
    assert args.num_clients == "3" and not hasattr(args, "clients")
    assert capsys.readouterr().err == (f"pfxab {command}: warning: --clients is deprecated, read as --num-clients 3; "
                                       "use --num-clients\n")


def test_a_run_given_the_former_flag_is_the_run_given_the_new_one(capsys) -> None:
    assert main(["run", "--clients", "3", "--horizon", "1000", "--json"]) == 0
    former = capsys.readouterr()
    assert main(["run", "--num-clients", "3", "--horizon", "1000", "--json"]) == 0
    new = capsys.readouterr()
    def numbers(summary: str) -> dict:  # every key but the measured times (``wall_seconds``, ``run_seconds``, ...)
        return {k: v for k, v in json.loads(summary).items() if "seconds" not in k}

    assert numbers(former.out) == numbers(new.out)
    assert json.loads(former.out)["num_clients"] == 3
    assert former.err == "pfxab run: warning: --clients is deprecated, read as --num-clients 3; use --num-clients\n" \
        + new.err


@pytest.mark.parametrize(("words", "error"), [
    (["--clients", "0"], "--num-clients=0 is invalid; allowed: an integer in [1, 1000]"),
    (["--clients"], "argument --clients: expected one argument"),
])
def test_a_bad_former_flag_is_one_line_before_any_work(words, error, tmp_path, capsys) -> None:
    try:
        status = main(["run", *words, "--horizon", "1000", "--out", str(tmp_path / "out")])
    except SystemExit as exited:  # argparse's own errors exit; the declared checks return the status
        status = exited.code
    assert status == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"pfxab run: error: {error}"
    assert list(tmp_path.iterdir()) == []


def test_the_former_flag_is_not_in_the_help(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--clients" not in capsys.readouterr().out.replace("--num-clients", "")


def test_the_former_keyword_and_run_config_key_are_one_line_naming_the_new_one() -> None:
    with pytest.raises(ConfigError, match=r"^'clients' is renamed num_clients; allowed: num_clients$"):
        RunConfig(clients=3)
    with pytest.raises(ConfigError, match=r"^'clients' is renamed num_clients; allowed: num_clients$"):
        RunConfig.from_mapping({"clients": 3})
    with pytest.raises(ConfigError, match=r"^'clients' is renamed num-clients; allowed: num-clients$"):
        parse_run_config({"clients": 3, "horizon": 1000})
    assert RunConfig(num_clients=3) == RunConfig.from_mapping({"num-clients": "3"}) == parse_run_config(
        {"num-clients": 3})[0]
    assert RunConfig(num_clients=3).to_dict()["num_clients"] == 3 and "clients" not in RunConfig().to_dict()


def test_the_former_sweep_key_is_one_line_naming_the_new_one(tmp_path) -> None:
    path = tmp_path / "old.toml"
    path.write_text('[fixed]\nclients = 3\nhorizon = 1000\n[grid]\nseed = [0, 1]\n')
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    assert str(info.value) == "old.toml: [fixed] clients is renamed num_clients; allowed: num_clients"
    path.write_text('[fixed]\nnum_clients = 3\nhorizon = 1000\n[grid]\nseed = [0, 1]\n')
    assert [c.num_clients for c in load_experiment(path).configs] == [3, 3]


def test_a_users_app_declaring_the_former_key_is_one_line(tmp_path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.flwr.app.config]\nclients = 4\nhorizon = 1000\n')
    with pytest.raises(ConfigError, match=r"^run-config key 'clients' in '.*pyproject.toml' is renamed num-clients; "
                                          r"allowed: num-clients$"):
        supernodes_of(pyproject, RunConfig(), frozenset())
    pyproject.write_text('[tool.flwr.app.config]\nnum-clients = 4\nhorizon = 1000\n')
    assert supernodes_of(pyproject, RunConfig(), frozenset()) == 4
    assert supernodes_of(pyproject, RunConfig(num_clients=6), frozenset({"num-clients"})) == 6


def test_a_run_written_under_the_former_name_is_the_same_run() -> None:
    """A sweep's run directory from before the rename (``config.json`` with ``clients``) resumes: same id, same run."""
    config = RunConfig(num_clients=3, horizon=1000, seed=2)
    saved = {("clients" if k == "num_clients" else k): v for k, v in config.to_dict().items()}
    assert same_run(saved, config) and not same_run({**saved, "clients": 4}, config)
    assert run_id(config) != run_id(config.replace(num_clients=4))
