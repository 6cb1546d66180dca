"""The problem registry: a new d-dimensional problem is one builder and one registration line.

The test registers a 2-D problem of its own (a bowl per client, optimum known in closed form)
and runs it by name through every entry point that takes a problem name: ``RunConfig``,
``run_config``, ``compare`` and the ``pfxab`` command line (built in this process, so it sees
the registration).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np
import pytest

from pfxab_flower import register_problem
from pfxab_flower.arms.domain import Domain
from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.arms.partition import Partition
from pfxab_flower.errors import ConfigError
from pfxab_flower.problems import Federation, build_federation
from pfxab_flower.problems.registry import problem_names, unregister_problem
from pfxab_flower.running.engine import run_config
from pfxab_flower.schema.catalogue import PARAMETERS
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.simulations.cli.main import build_parser, main
from pfxab_flower.studies.comparison import compare


def bowl_centres(clients: int) -> np.ndarray:
    """Client ``m``'s best point, off the partition's cell boundaries."""
    return np.array([(0.2, 0.7), (0.45, 0.35), (0.8, 0.6), (0.3, 0.3)])[np.arange(clients) % 4]


def bowl_federation(config: RunConfig, noise: NoiseModel) -> Federation:
    """``mu_m(x) = 1 - |x - c_m|^2`` on ``[0, 1]^2``: what a user writes for a problem of their own."""
    objectives = [lambda x, c=c: 1.0 - ((x - c) ** 2).sum(axis=1) for c in bowl_centres(config.num_clients)]
    domain = Domain.from_mapping({"u": (0.0, 1.0), "v": (0.0, 1.0)})
    return Federation(objectives, domain, noise, name="bowl", value_range=(-1.0, 1.0))


@pytest.fixture
def bowl():
    register_problem("bowl", bowl_federation, help="2-D, a bowl per client")
    yield "bowl"
    unregister_problem("bowl")


def test_a_registered_2d_problem_runs_by_name_and_reaches_its_personalised_optima(bowl) -> None:
    config = RunConfig(problem=bowl, num_clients=3, alpha=0.5, horizon=100_000, seed=1)
    result = run_config(config)
    summary = result.summary
    assert summary["problem"] == "bowl" and summary["num_clients"] == 3
    points = np.array(summary["final_points"])
    assert points.shape == (3, 2)
    centres = bowl_centres(3)
    # alpha mu_m + (1 - alpha) mean(mu) is 1 - |x - b_m|^2 - const with b_m = alpha c_m + (1 - alpha) mean(c):
    # each client ends in the cell that holds its own b_m, below depth 0, as its final point says
    best = 0.5 * centres + 0.5 * centres.mean(axis=0)
    low, high = Partition(bowl_federation(config, NoiseModel()).domain).bounds(np.array(summary["final_nodes"]))
    assert np.all((low <= best) & (best <= high)) and np.all(high - low < 1.0), (low, best, high)
    np.testing.assert_allclose(points, (low + high) / 2)
    assert summary["phases"] >= 3 and summary["dimensions"] == ["u", "v"]
    assert np.isfinite(summary["regret"]) and summary["regret"] > 0
    assert run_config(config).summary["regret"] == summary["regret"]  # same seed, same numbers


BUMPS = ("bumps", "bumps-2d", "bumps-3d", "bumps-5d")


def test_a_registered_problem_is_a_choice_everywhere(bowl) -> None:
    package = problem_names()[:-1]  # the package's own, from the registry: a test list would drift
    assert package[:3] == ("garland", "doublesine", "landmine") and "bowl" not in package
    assert problem_names() == (*package, "bowl")  # a registered problem is listed last
    assert "bowl" in PARAMETERS["problem"].allowed
    with pytest.raises(ConfigError, match=r"^problem='bow' is invalid; allowed: " + ", ".join(package) + ", bowl$"):
        RunConfig(problem="bow")
    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["run"].format_help().split())
    assert "--problem {" + ",".join(package) + ",bowl}" in help_text
    assert "bowl: 2-D, a bowl per client" in help_text


def test_the_command_line_and_compare_run_a_registered_problem(bowl, capsys) -> None:
    assert main(["run", "--problem", bowl, "--num-clients", "2", "--horizon", "20000", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["problem"] == "bowl" and len(summary["final_points"][0]) == 2
    comparison = compare(RunConfig(problem=bowl, num_clients=2, horizon=20_000), ["pf-xab"], [0], progress=False)
    assert comparison.runs["regret"].tolist() == [summary["regret"]]


def test_the_registry_refuses_a_bad_registration_in_one_line(bowl) -> None:
    with pytest.raises(ConfigError, match="problem 'bowl' is already registered"):
        register_problem("bowl", bowl_federation, help="again")
    with pytest.raises(ConfigError, match="problem name 'Bowl 2' is invalid"):
        register_problem("Bowl 2", bowl_federation, help="a bowl")
    with pytest.raises(ConfigError, match="builder=42 of problem 'bowl2' is invalid"):
        register_problem("bowl2", 42, help="a bowl")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="help='' of problem 'bowl2' is invalid"):
        register_problem("bowl2", bowl_federation, help="")
    for bad in (0, 2.0, True):
        message = rf"^dimension={bad!r} of problem 'bowl2' is invalid; allowed: an integer >= 1$"
        with pytest.raises(ConfigError, match=message):
            register_problem("bowl2", bowl_federation, help="a bowl", dimension=bad)  # type: ignore[arg-type]
    assert "bowl2" not in problem_names()


def test_a_builder_that_makes_the_wrong_number_of_clients_is_refused_in_one_line() -> None:
    register_problem("short", lambda config, noise: bowl_federation(config.replace(num_clients=2), noise),
                     help="one short")
    try:
        with pytest.raises(ConfigError,
                           match=r"^problem='short' built 2 clients for num_clients=3; allowed: a builder"):
            build_federation(RunConfig(problem="short", num_clients=3))
    finally:
        unregister_problem("short")


def test_a_problem_registered_by_reference_is_imported_only_when_built() -> None:
    """``import pfxab_flower`` and a RunConfig naming landmine stay cheap: no scikit-learn, no landmine module.

    (``problems.synthetic`` is not in the list: checking ``algorithm`` reads the algorithm registry, whose
    policies import the sampling code, which imports the ``problems`` package.)"""
    code = ("import sys; import pfxab_flower.schema.run_config as c; c.RunConfig(problem='landmine', num_clients=2); "
            "import pfxab_flower.simulations.cli.main; "
            "print(sorted(m for m in ('sklearn', 'pfxab_flower.problems.landmine') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_problem_s_own_parameter_is_a_run_parameter_its_flag_and_key_read_by_its_builder() -> None:
    """Declared at registration only: RunConfig, its run-config key, the CLI flag and the builder follow."""
    from pfxab_flower.parameter import Parameter, between
    from pfxab_flower.schema.run_config import parse_run_config
    from pfxab_flower.simulations.cli.commands.options import add_run_options

    depth = Parameter("bowl_depth", float, 1.0, "a number in (0, 2]", "how deep the bowls are",
                      between(0, 2, low_open=True), after="evaluation", late=True)

    def deep_bowls(config, noise: NoiseModel) -> Federation:
        objectives = [lambda x, c=c: config.bowl_depth * (1.0 - ((x - c) ** 2).sum(axis=1))
                      for c in bowl_centres(config.num_clients)]
        return Federation(objectives, Domain.from_mapping({"u": (0.0, 1.0), "v": (0.0, 1.0)}), noise, name="deep")

    register_problem("deep-bowl", deep_bowls, help="2-D, bowls of a declared depth", parameters=(depth,))
    try:
        assert RunConfig().bowl_depth == 1.0 and "bowl_depth" in RunConfig.names()
        config, _ = parse_run_config({"problem": "deep-bowl", "bowl-depth": "0.5", "num-clients": 2})
        assert config.bowl_depth == 0.5 and config.to_dict()["bowl_depth"] == 0.5
        assert build_federation(config).objectives[0](np.array(bowl_centres(1)))[0] == 0.5
        with pytest.raises(ConfigError, match=r"^bowl_depth=3\.0 is invalid; allowed: a number in \(0, 2\]$"):
            RunConfig(problem="deep-bowl", bowl_depth=3.0)
        parser = argparse.ArgumentParser()
        add_run_options(parser)
        assert parser.parse_args(["--bowl-depth", "0.5"]).bowl_depth == "0.5"
    finally:
        unregister_problem("deep-bowl")
    assert "bowl_depth" not in RunConfig.names()
