"""One declaration of the parameters: derived surfaces agree with it; limits and API edges get one line."""

from __future__ import annotations

import argparse
import tomllib
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from pfxab_flower.algorithms import PFPNE
from pfxab_flower.arms.domain import Domain
from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.errors import ConfigError, ObjectiveError
from pfxab_flower.limits import MAX_CLIENTS, MAX_CURVE_POINTS, MAX_DIMENSIONS, MAX_HORIZON, MAX_PULLS, MAX_SEEDS
from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.optimum import GRID_BITS, _grid_depth
from pfxab_flower.problems.synthetic import synthetic_federation
from pfxab_flower.running.engine import run
from pfxab_flower.schema.catalogue import PARAMETERS, check, declared, parse, parse_seeds, run_config_value, scoped
from pfxab_flower.schema.run_config import APP_DEFAULTS, AppOptions, RunConfig
from pfxab_flower.simulations.cli.commands import simulate
from pfxab_flower.simulations.cli.commands.options import add_run_options
from pfxab_flower.simulations.experiments.experiment import load_experiment
from pfxab_flower.simulations.flower.simulation_environment import check_num_cpus
from tests.conftest import cli_error_line

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


# --- one declaration ---------------------------------------------------------------------------------------


def test_pyproject_app_config_is_the_declaration_s_defaults() -> None:
    table = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["flwr"]["app"]["config"]
    declared = {p.key: run_config_value(p.name, p.default) for p in scoped("run") + scoped("app")}
    assert table == declared


def test_run_config_and_app_options_fields_are_the_declared_ones_with_their_defaults() -> None:
    # RunConfig's typed fields are the common run parameters; its options every algorithm's and problem's own
    typed = {f.name for f in fields(RunConfig)} - {"options"}
    common = {name for name, p in PARAMETERS.items() if p.scope == "run"}
    assert typed <= common and all(name in vars(RunConfig()) for name in common)  # a new one may be untyped
    assert set(RunConfig().options) == {p.name for p in scoped("run")} - common  # a common one is an attribute
    assert RunConfig().to_dict() == {p.name: p.default for p in scoped("run")}
    assert list(RunConfig().to_dict()) == RunConfig.names() == [p.name for p in scoped("run")]
    assert {f.name: getattr(AppOptions(), f.name) for f in fields(AppOptions)} == {
        p.name: p.default for p in scoped("app")}
    assert declared("pf_pne_eps") is PFPNE.parameters[0] and RunConfig().pf_pne_eps == PFPNE.parameters[0].default
    assert {p.key: run_config_value(p.name, p.default) for p in scoped("app")} == APP_DEFAULTS


def test_cli_flags_carry_the_declared_help_for_every_run_parameter() -> None:
    parser = argparse.ArgumentParser()
    add_run_options(parser)
    helps = {a.dest: a.help for a in parser._actions if a.dest != "help" and a.help != argparse.SUPPRESS}
    assert set(helps) == {p.name for p in scoped("run")}
    for name, text in helps.items():
        assert text.startswith(declared(name).help)


def test_simulate_flags_are_derived_from_the_declaration() -> None:
    sub = argparse.ArgumentParser()
    simulate.add_arguments(sub)
    by_dest = {a.dest: a for a in sub._actions}
    assert by_dest["round_timeout"].default == PARAMETERS["round_timeout"].default == 600.0
    assert by_dest["num_cpus"].default == PARAMETERS["num_cpus"].default
    assert by_dest["out"].default == PARAMETERS["out_dir"].default
    for name in ("fail_rate", "fail_clients", "straggle_seconds", "min_fraction", "api", "secure_aggregation"):
        assert by_dest[name].help.startswith(PARAMETERS[name].help)


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_every_declared_default_passes_its_own_check(name: str) -> None:
    default = PARAMETERS[name].default
    expected = tuple(default) if isinstance(default, list) else default
    assert check(name, default) == expected


def test_check_is_the_strategy_keyword_check() -> None:
    assert check("horizon", np.int64(1000)) == 1000 and type(check("horizon", np.int64(1000))) is int
    assert check("alpha", np.float32(0.5)) == 0.5 and type(check("alpha", np.float32(0.5))) is float
    assert check("fail_clients", (0, np.int64(2))) == (0, 2)
    for name, bad, fragment in [
        ("horizon", True, "horizon=True is invalid; allowed: an integer in [1, "),
        ("alpha", "0.5", "alpha='0.5' is invalid; allowed: a number in [0, 1]"),
        ("round_timeout", 0, "round_timeout=0 is invalid; allowed: a number of seconds > 0"),
        ("api", "grpc", "api='grpc' is invalid; allowed: message, legacy"),
        ("no_such", 1, "unknown parameter 'no-such'; allowed: problem, "),
    ]:
        with pytest.raises(ConfigError) as exc:
            check(name, bad)
        assert _one_line(exc).startswith(fragment)


def test_parse_converts_text_then_checks() -> None:
    assert parse("horizon", "2e6") == 2_000_000
    assert parse("max_depth", "") is None and parse("fail_clients", "") is None
    assert parse("secure_aggregation", "TRUE") is True
    with pytest.raises(ConfigError, match=r"^horizon='1e30' is invalid"):
        parse("horizon", "1e30")


def test_the_second_checks_are_the_declared_ones() -> None:
    for call, fragment in [
        (lambda: NoiseModel("loud", 0.1), "noise='loud' is invalid; allowed: " + PARAMETERS["noise"].allowed),
        (lambda: NoiseModel("uniform", -1.0), "noise_sigma=-1.0 is invalid; allowed: a number >= 0"),
        (lambda: synthetic_federation("garland", 0), "num_clients=0 is invalid; allowed: an integer in [1, "),
        (lambda: synthetic_federation("garland", 3, spread=1.0), "spread=1.0 is invalid; allowed: a number in [0, 1)"),
        (lambda: check_num_cpus(10_000), "num_cpus=10000 is invalid; allowed: a number in [0.125, "),
    ]:
        with pytest.raises(ConfigError) as exc:
            call()
        assert _one_line(exc).startswith(fragment)


# --- limits --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("run", "--horizon", str(2**63)), f"horizon={2**63} is invalid; allowed: an integer in [1, "),
        (("run", "--horizon", "1e30"), "horizon='1e30' is invalid"),
        (("run", "--horizon", str(MAX_HORIZON + 1)), f"horizon={MAX_HORIZON + 1} is invalid"),
        (("run", "--num-clients", str(10**7)),
         f"num-clients=10000000 is invalid; allowed: an integer in [1, {MAX_CLIENTS}]"),
        (("run", "--num-clients", str(10**12)), "num-clients=1000000000000 is invalid"),
        (("run", "--seed", str(2**32)), f"seed={2**32} is invalid; allowed: an integer in [0, 2**32)"),
        (("compare", "--seeds", "0-100000000000"), "seeds='0-100000000000' is invalid"),
    ],
)
def test_limits_are_refused_in_one_line_before_any_work(args: tuple[str, ...], fragment: str) -> None:
    line = cli_error_line(*args)
    assert line.startswith(f"pfxab {args[0]}: error: --{fragment}")


def test_limits_themselves_are_accepted() -> None:
    assert RunConfig(horizon=MAX_HORIZON, num_clients=MAX_PULLS // MAX_HORIZON).horizon == MAX_HORIZON
    assert RunConfig(horizon=MAX_PULLS // MAX_CLIENTS, num_clients=MAX_CLIENTS).num_clients == MAX_CLIENTS
    assert len(parse_seeds(f"0-{MAX_SEEDS - 1}")) == MAX_SEEDS
    assert parse_seeds("5,0-2") == [5, 0, 1, 2]


def test_a_seed_is_one_32_bit_word_so_no_two_runs_share_a_noise_stream(tmp_path: Path) -> None:
    """numpy's SeedSequence reads an integer as 32-bit words and pads with zeros: seeds >= 2**32 made different
    runs' streams coincide (solo_seed(0, 1) == solo_seed(2**32, 0)); every entry point refuses them now."""
    from pfxab_flower.algorithms.baselines.solo import solo_seed
    from pfxab_flower.limits import MAX_SEED
    from pfxab_flower.schema.spec import AlgorithmSpec

    assert solo_seed(0, 1) == solo_seed(2**32, 0)  # the hazard: two runs, one stream
    assert MAX_SEED == 2**32 - 1 and RunConfig(seed=MAX_SEED).seed == MAX_SEED
    allowed = "allowed: an integer in [0, 2**32)"
    assert cli_error_line("run", "--seed", str(2**32)) == f"pfxab run: error: --seed={2**32} is invalid; {allowed}"
    assert cli_error_line("compare", "--seeds", f"{MAX_SEED}-{2**32}").startswith(
        f"pfxab compare: error: --seeds='{MAX_SEED}-{2**32}' is invalid; allowed: an integer, a range")
    for call in (lambda: RunConfig(seed=2**32), lambda: parse_seeds(str(2**32)),
                 lambda: run(synthetic_federation("garland", 2), horizon=100, seed=2**32),
                 lambda: AlgorithmSpec.from_wire({**AlgorithmSpec.build("pf-xab", num_clients=2).to_wire(),
                                                  "param-seed": 2**32})):
        with pytest.raises(ConfigError, match=r"seeds?=.*is invalid; allowed: .*\[0, 2\*\*32\)"):
            call()
    path = tmp_path / "e.toml"
    path.write_text(f"[fixed]\nhorizon = 100\n[grid]\nseed = [0, {2**32}]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"seed=4294967296 is invalid; allowed: an integer in \[0, 2\*\*32\)"):
        load_experiment(path)


@pytest.mark.parametrize("text", [f"0-{MAX_SEEDS}", "0-100000000000", "0-5,3", "3,3", "1" * 30])
def test_too_many_or_repeated_seeds_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match=rf"^seeds='{text}' is invalid; allowed: .*at most 10,000 seeds"):
        parse_seeds(text)


@pytest.mark.parametrize("points, ok", [(2, True), (MAX_CURVE_POINTS, True), (1, False),
                                        (MAX_CURVE_POINTS + 1, False), (True, False)])
def test_sweep_curve_points_within_the_declared_limit(tmp_path: Path, points: int, ok: bool) -> None:
    path = tmp_path / "e.toml"
    path.write_text(f'[experiment]\ncurve_points = {str(points).lower()}\n[fixed]\nhorizon = 100\n', encoding="utf-8")
    if ok:
        assert load_experiment(path).curve_points == points
    else:
        with pytest.raises(ConfigError) as exc:
            load_experiment(path)
        assert _one_line(exc).startswith(f"e.toml: [experiment] curve_points={points!s} is invalid; allowed: ")


def test_optimum_grid_stops_growing_with_the_dimension_and_too_many_dimensions_are_refused() -> None:
    assert [_grid_depth(d) for d in (1, 3, 16, 17, 24, MAX_DIMENSIONS)] == [16, 15, 16, 16, 16, 16]
    assert max(_grid_depth(d) for d in range(1, MAX_DIMENSIONS + 1)) == GRID_BITS
    spec = {f"x{i}": (0.0, 1.0) for i in range(24)}
    federation = Federation.from_callables([lambda x: -((x - 0.5) ** 2).sum(axis=1)], spec)
    optimum = federation.optimum(1.0)  # 24 dimensions used to want 2**24 grid points (3 GiB)
    assert optimum.method.startswith("grid of 2^16 cell centres") and optimum.estimated
    assert -1.5 < optimum.values[0] <= 0.0
    with pytest.raises(ConfigError, match=rf"^dimensions={MAX_DIMENSIONS + 1} is invalid; allowed: an integer in"):
        Domain.from_mapping({f"x{i}": (0.0, 1.0) for i in range(MAX_DIMENSIONS + 1)})
    with pytest.raises(ConfigError, match=r"^dimensions=0 is invalid"):
        Domain.from_mapping({})


# --- API edges -----------------------------------------------------------------------------------------------


def _tents() -> list:
    return [lambda x, c=c: 1.0 - np.abs(x[:, 0] - c) for c in (0.2, 0.5, 0.7)]


@pytest.mark.parametrize(
    "domain, fragment",
    [
        ({"x": ("0", 1)}, "dimension 'x': bounds ('0', 1) are invalid; allowed: finite numbers with low < high"),
        ({"x": (None, 1.0)}, "dimension 'x': bounds (None, 1.0) are invalid"),
        ({"x": (0.0, float("inf"))}, "dimension 'x': bounds (0.0, inf) are invalid"),
        ({"x": (True, 2)}, "dimension 'x': bounds (True, 2) are invalid"),
        ({"x": 5}, "domain dimension 'x': 5 is invalid; allowed: (low, high) or (low, high, scale)"),
        ([("x", 0, 1)], "domain=[('x', 0, 1)] is invalid; allowed: a mapping"),
    ],
)
def test_bad_bounds_are_one_line_config_errors(domain: object, fragment: str) -> None:
    with pytest.raises(ConfigError) as exc:
        Federation.from_callables(_tents(), domain)  # type: ignore[arg-type]
    assert _one_line(exc) == fragment or _one_line(exc).startswith(fragment)


def test_numpy_bounds_are_numbers() -> None:
    domain = Domain.from_mapping({"x": (np.float32(0.0), np.int64(2))})
    assert (domain.dimensions[0].low, domain.dimensions[0].high) == (0.0, 2.0)


@pytest.mark.parametrize("sigma", ["0.1", None, [0.1], float("nan")])
def test_a_noise_sigma_that_is_not_a_number_is_a_config_error(sigma: object) -> None:
    with pytest.raises(ConfigError, match=r"^noise_sigma=.* is invalid; allowed: a number >= 0$"):
        Federation.from_callables(_tents(), {"x": (0.0, 1.0)}, noise_sigma=sigma)  # type: ignore[arg-type]


def test_too_many_objectives_are_refused() -> None:
    with pytest.raises(ConfigError, match=rf"^num_clients={MAX_CLIENTS + 1} is invalid"):
        Federation.from_callables(_tents()[:1] * (MAX_CLIENTS + 1), {"x": (0.0, 1.0)})


def test_engine_run_accepts_numpy_numbers_and_reports_plain_ones() -> None:
    federation = Federation.from_callables(_tents(), {"x": (0.0, 1.0)})
    result = run(federation, alpha=np.float32(0.5), horizon=np.int64(20_000), seed=np.int64(3))
    plain = run(federation, alpha=0.5, horizon=20_000, seed=3)
    assert type(result.summary["horizon"]) is int and result.summary["regret"] == plain.summary["regret"]
    result.to_json()  # no numpy scalar left in the summary


def test_an_objective_gets_a_read_only_copy_of_its_points() -> None:
    seen: list[np.ndarray] = []

    def keeps(x: np.ndarray) -> np.ndarray:
        seen.append(x)
        return 1.0 - np.abs(x[:, 0] - 0.5)

    def mutates(x: np.ndarray) -> np.ndarray:
        x -= 0.1  # used to shift the optimiser's own grid: the optimum moved from 0.95 to 0.875
        return 1.0 - np.abs(x[:, 0] - 0.5)

    points = np.array([[0.25], [0.5]])
    Federation.from_callables([keeps], {"x": (0.0, 1.0)}).evaluate(0, points)
    assert not seen[0].flags.writeable and seen[0] is not points and points.flags.writeable
    federation = Federation.from_callables([mutates], {"x": (0.0, 1.0)})
    with pytest.raises(ObjectiveError, match=r"^objective of client 0 raised ValueError: .*read-only"):
        federation.optimum(0.5)


ROOT = PYPROJECT.parent
#: The folders installed as the package (``pfxab_flower.strategies`` & co. are installed from the adapters').
PACKAGE_DIRS = ("pfxab_flower", "flower_shared", "strategies", "client_apps", "simulations")


@pytest.mark.parametrize("name", ["pf_pne_eps", "random_fraction"])
def test_an_algorithm_s_own_parameter_is_named_only_where_it_is_declared_and_used(name: str) -> None:
    """Everything else (RunConfig, the wire, flags, run-config keys, sweep columns) is derived from its declaration."""
    naming = sorted(str(path.relative_to(ROOT)) for folder in PACKAGE_DIRS for path in (ROOT / folder).rglob("*.py")
                    if name in path.read_text(encoding="utf-8") or name.replace("_", "-") in
                    path.read_text(encoding="utf-8"))
    assert 1 <= len(naming) <= 2, naming
