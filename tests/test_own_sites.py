"""A Flower user's own sites (issue 48): the docs' 4-site app, its builder, its randomness, its names and failures.

The app of docs/flower.md ("Your own app in three files": four sites, a success/failure trial each, centres
from the node config) is copied from the page and run over Flower's Message API without Ray (the loopback
grid, which unpickles the ClientApp for every message as Flower's Ray engine does) and in process, with the
same seed: the same final point at every site. The builder runs once per node; a site that fails is one line
per phase with its name and its exception, and so is its lost-client record. Ray and ``flwr run``:
``tests/test_user_app.py`` and the tests marked ``ray`` here.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from pfxab_flower import ConfigError, Federation, run
from pfxab_flower.client_apps import objective_client_app
from pfxab_flower.running.site_table import site_columns, site_table
from pfxab_flower.simulations.cli.main import main
from pfxab_flower.simulations.flower.flwr_run_launcher import app_run_config, federation_config, supernodes_of
from pfxab_flower.strategies import STRATEGIES
from tests.message_loopback import LoopbackGrid, run_loopback
from tests.test_user_app import write_user_app

HORIZON = 4_000  # trials per site: every algorithm runs a few phases in well under a second


class DocsApp:
    """The docs' app, written out and imported: its config, task and client app modules."""

    def __init__(self, directory: Path, config: dict, task: ModuleType, client: ModuleType) -> None:
        self.directory, self.config, self.task, self.client = directory, config, task, client

    def federation(self, **keywords) -> Federation:
        """The same four sites in process: each site's trial, named as the app names them."""
        return Federation.from_callables([self.task.trials(c) for c in self.task.CENTRES], self.task.DOMAIN,
                                         evaluation="stochastic", value_range=(0.0, 1.0), sites=self.task.SITES,
                                         **keywords)

    def strategy(self, algorithm: str, **keywords):
        """The strategy the app's ServerApp makes (docs/flower.md's server_app.py)."""
        return STRATEGIES[algorithm](num_clients=self.config["num-clients"], horizon=HORIZON,
                                     alpha=self.config["alpha"],
                                     seed=self.config["seed"], dimensions=len(self.task.DOMAIN),
                                     reward_range=(0.0, 1.0), **keywords)


@pytest.fixture(scope="module")
def docs_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocsApp]:
    directory = tmp_path_factory.mktemp("own-sites")
    config = write_user_app(directory)
    sys.path.insert(0, str(directory))  # importable, as Flower makes an app's directory
    try:
        yield DocsApp(directory, config, importlib.import_module("my_app.task"),
                      importlib.import_module("my_app.client_app"))
    finally:
        sys.path.remove(str(directory))
        for name in [n for n in sys.modules if n == "my_app" or n.startswith("my_app.")]:
            del sys.modules[name]


@pytest.fixture(autouse=True)
def fresh_builds() -> Iterator[None]:
    """Every test's runs are run 1 of the loopback grid: the objectives an earlier test built are not this one's."""
    from pfxab_flower.client_apps import sessions

    sessions._BUILT.clear()
    yield
    sessions._BUILT.clear()


#: The nodes the counted builder built for, and the app's own builder it calls (module globals: a function of this
#: module is pickled by reference, so every unpickled copy of the app counts here).
BUILT_FOR: list[int] = []
BUILDER: list = []


def counted_builder(context):
    BUILT_FOR.append(int(context.node_id))
    return BUILDER[0](context)


@pytest.fixture
def builds(docs_app: DocsApp, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every call of the app's builder, by the node it built for (the app's own builder, counted)."""
    BUILT_FOR.clear()
    BUILDER[:] = [docs_app.client.make_objective.make_objective]
    monkeypatch.setattr(docs_app.client.make_objective, "make_objective", counted_builder)
    yield BUILT_FOR
    BUILDER.clear()


def test_the_docs_app_declares_every_key_it_reads_and_what_flower_asks_for(docs_app: DocsApp) -> None:
    text = (docs_app.directory / "pyproject.toml").read_text()
    assert {"algorithm", "num-clients", "horizon", "alpha", "seed", "num-server-rounds", "results-file"} <= set(
        docs_app.config)
    assert 'description = "' in text and 'license = "' in text  # Flower warned of both when they were missing
    assert len(docs_app.task.SITES) == len(docs_app.task.CENTRES) == docs_app.config["num-clients"] == 4


def test_each_sites_objective_is_built_once_per_node_though_flower_unpickles_the_app_for_every_message(
    docs_app: DocsApp, builds: list[int]
) -> None:
    """Flower's Ray engine hands every message a fresh copy of the ClientApp: the builder's own cache was lost
    with each copy, and it ran on every message (23 times per node in a 23-exchange run)."""
    grid = LoopbackGrid(4, docs_app.client.app, repickle=True)
    run_loopback(docs_app.strategy("pf-xab"), grid)
    assert grid.sent >= 4 * 5  # many messages per node ...
    assert Counter(builds) == dict.fromkeys(grid.contexts, 1)  # ... and one build per node


@pytest.mark.parametrize("algorithm", ["pf-sh", "pf-xab", "local-only"])
def test_the_docs_app_gives_each_site_the_same_final_point_over_flower_and_in_process(
    docs_app: DocsApp, algorithm: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The trials draw from the rng the product hands them ((seed, client, phase)), so the engine changes nothing;
    the sites keep their names, and the run ends with each site's row in the log."""
    strategy = docs_app.strategy(algorithm)
    with caplog.at_level(logging.INFO, logger="pfxab_flower"):
        result = run_loopback(strategy, LoopbackGrid(4, docs_app.client.app, repickle=True))
    alone = run(docs_app.federation(), algorithm=algorithm, horizon=HORIZON, alpha=docs_app.config["alpha"],
                seed=docs_app.config["seed"])
    np.testing.assert_array_equal(result.arrays["final-points"].numpy(), np.array(alone.summary["final_points"]))
    assert result.arrays["client-sites"].numpy().tolist() == alone.summary["sites"] == docs_app.task.SITES
    assert strategy.driver.phase_metrics() == alone.phases.to_dict("records") or algorithm == "local-only"
    lines = [r.getMessage() for r in caplog.records]
    table = lines[lines.index("each site's final point:") + 1:][:5]
    assert table[0].split()[:3] == ["client", "site", "flower_node"]
    assert [row.split()[1] for row in table[1:]] == docs_app.task.SITES


def test_a_user_objective_s_own_randomness_follows_the_seed_through_the_rng_it_is_given(docs_app: DocsApp) -> None:
    trial = docs_app.task.trials(docs_app.task.CENTRES[0])
    runs = [run(docs_app.federation(), algorithm="pf-xab", horizon=HORIZON, seed=seed).summary for seed in (0, 0, 1)]
    assert runs[0]["mean_observed_reward_per_client"] == runs[1]["mean_observed_reward_per_client"]
    assert runs[0]["mean_observed_reward_per_client"] != runs[2]["mean_observed_reward_per_client"]
    # the form objective(points, partition_id, rng) passes it on too, on the Message API
    app = objective_client_app(lambda points, partition_id, rng: docs_app.task.trials(
        docs_app.task.CENTRES[partition_id])(points, rng), docs_app.task.DOMAIN, evaluation="stochastic",
        value_range=(0.0, 1.0))
    result = run_loopback(docs_app.strategy("pf-xab"), LoopbackGrid(4, app, repickle=True))
    np.testing.assert_array_equal(result.arrays["final-points"].numpy(), np.array(runs[0]["final_points"]))
    assert trial(np.zeros((3, 2)), np.random.default_rng(0)).tolist() == \
        trial(np.zeros((3, 2)), np.random.default_rng(0)).tolist()


def test_a_site_that_fails_is_one_line_per_phase_with_its_name_and_exception_and_so_is_its_record(
    docs_app: DocsApp, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Site lab-c's builder raises KeyError('data-root') on every message: 23 lines and 23 Flower tracebacks
    before, a lost-client record without the exception or the node."""
    built = docs_app.client.make_objective.make_objective

    def needs_data_root(context):
        if context.node_config["partition-id"] == 2:
            return {}["data-root"]
        return built(context)

    monkeypatch.setattr(docs_app.client.make_objective, "make_objective", needs_data_root)
    grid = LoopbackGrid(4, docs_app.client.app, repickle=True)
    failed = docs_app.client.app(_first_message(docs_app), grid.contexts[102])
    assert failed.has_error() and failed.error.reason == "client 2 (site 'lab-c'): KeyError: 'data-root'"
    strategy = docs_app.strategy("pf-xab")
    with caplog.at_level(logging.INFO, logger="pfxab_flower"):
        run_loopback(strategy, grid)
    lines = [r.getMessage() for r in caplog.records if "lab-c" in r.getMessage()]
    per_phase = Counter(int(re.match(r"phase (\d+): ", line)[1]) for line in lines if line.startswith("phase "))
    phases = strategy.driver.machine.completed
    assert set(per_phase) == set(range(1, phases + 2)) and set(per_phase.values()) == {1}  # once per phase
    assert all("client 2 (site 'lab-c', Flower node 102)" in line and line.endswith("KeyError: 'data-root'")
               for line in lines if line.startswith("phase ")), lines
    assert strategy.lost_clients == [{"client": 2, "site": "lab-c", "flower_node": 102, "phase": 1,
                                      "reason": "KeyError: 'data-root'"}]


def _first_message(docs_app: DocsApp):
    """The run's first train message, as the strategy sends it (a copy made by running one round)."""
    strategy = docs_app.strategy("pf-xab")
    captured = []

    class FirstOnly(LoopbackGrid):
        def send_and_receive(self, messages, *, timeout=None):
            messages = list(messages)
            captured.extend(messages)
            raise RuntimeError("first message captured")

    with pytest.raises(RuntimeError, match="first message captured"):
        run_loopback(strategy, FirstOnly(4, docs_app.client.app))
    return captured[0]


def test_pfxab_simulate_names_a_flag_the_users_app_does_not_declare_before_anything_starts(
    docs_app: DocsApp, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--app-dir", str(docs_app.directory), "--noise-sigma", "0.2",
                 "--out", str(docs_app.directory / "out")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"pfxab simulate: error: --noise-sigma=0.2 is invalid with app-dir="
                          f"{str(docs_app.directory)!r}: the app declares no run-config key 'noise-sigma' (its "
                          "[tool.flwr.app.config] declares: algorithm, num-clients, horizon, alpha, seed, ")
    pyproject = docs_app.directory / "pyproject.toml"
    given = app_run_config(pyproject, {"algorithm": "fed-pne", "horizon": 9, "noise": "gaussian"},
                           frozenset({"algorithm"}))
    assert given == {"algorithm": "fed-pne"}  # only what the user gave: the app's own defaults otherwise
    from pfxab_flower.schema.run_config import RunConfig

    assert supernodes_of(pyproject, RunConfig(), frozenset()) == 4  # the app's own clients, not the default 10
    assert supernodes_of(pyproject, RunConfig(num_clients=6), frozenset({"num-clients"})) == 6


def test_a_fraction_of_a_core_per_client_is_whole_logical_cpus_for_flower(monkeypatch: pytest.MonkeyPatch) -> None:
    """Flower's federation config carries CPUs as a uint32: client-resources-num-cpus=0.25 failed."""
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert federation_config(4, 1.0, None) == "num-supernodes=4 client-resources-num-cpus=1 init-args-num-cpus=2"
    assert federation_config(4, 0.5, None) == "num-supernodes=4 client-resources-num-cpus=1 init-args-num-cpus=4"
    assert federation_config(3, 0.125, None) == "num-supernodes=3 client-resources-num-cpus=1 init-args-num-cpus=3"
    with pytest.raises(ConfigError, match=r"num_cpus=0\.5 is invalid with ray_address"):
        federation_config(4, 0.5, "127.0.0.1:6379")


def test_the_site_table_shows_the_columns_a_result_has_in_a_fixed_order() -> None:
    names = ["client", "site", "flower_node", "regret", "final_node", "final_x", "final_y", "optimum_x",
             "best_x", "simple_regret", "mean_observed_reward"]
    assert site_columns(names) == ["client", "site", "flower_node", "final_x", "final_y", "regret",
                                   "simple_regret", "best_x", "mean_observed_reward"]
    text = site_table({"client": [0, 1], "site": [None, None], "flower_node": [None, None],
                       "final_x": [0.1234567891, float("nan")], "regret": [12.5, 3.0]})
    assert text.splitlines() == ["client  final_x regret", "     0 0.123457   12.5", "     1        -      3"]


def test_pfxab_run_prints_each_sites_row(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--num-clients", "3", "--horizon", "20000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["client", "final_x"])
    assert [line.split()[0] for line in lines[header + 1:header + 4]] == ["0", "1", "2"]


def test_final_points_stay_float64_end_to_end(docs_app: DocsApp, tmp_path: Path) -> None:
    """pf-sh's candidates are cell centres at depth 48: in one dimension odd multiples of 2**-49, which float32
    cannot hold (0.20946326851844788, the issue's point, is a depth-48 centre of a 2-D domain: 2**-25 apart)."""
    sites = Federation.from_callables([lambda p, c=c: 1 - np.abs(p[:, 0] - c) for c in (0.2, 0.6)], {"x": (0, 1)})
    result = run(sites, algorithm="pf-sh", horizon=20_000, seed=0)
    points = np.array(result.summary["final_points"])[:, 0]
    assert (points.astype(np.float32).astype(float) != points).all()
    assert all(float(np.ldexp(p, 49)).is_integer() and int(np.ldexp(p, 49)) % 2 == 1 for p in points)
    written = result.write(tmp_path / "out")
    assert json.loads((written / "summary.json").read_text())["final_points"] == result.summary["final_points"]
    import pandas as pd

    assert pd.read_csv(written / "clients.csv")["final_x"].tolist() == points.tolist()
    app = objective_client_app(lambda p, m: 1 - np.abs(p[:, 0] - (0.2, 0.6)[m]), {"x": (0, 1)})
    strategy = STRATEGIES["pf-sh"](num_clients=2, horizon=20_000, seed=0, dimensions=1)
    arrays = run_loopback(strategy, LoopbackGrid(2, app)).arrays["final-points"].numpy()
    assert arrays.dtype == np.float64 and arrays[:, 0].tolist() == points.tolist()


def test_pf_sh_logs_its_rounds_in_candidates_and_local_only_reports_its_clients_phases(caplog) -> None:
    sites = Federation.from_callables([lambda p, c=c: 1 - np.abs(p[:, 0] - c) for c in (0.2, 0.6)], {"x": (0, 1)})
    with caplog.at_level(logging.INFO, logger="pfxab_flower"):
        run(sites, algorithm="pf-sh", horizon=20_000, seed=0)
    rounds = [r.getMessage() for r in caplog.records if r.getMessage().startswith("phase ")]
    assert rounds and all(re.fullmatch(r"phase \d+: \d+ candidates, \d+ dropped, \d+ kept, \d+ pulls per client, "
                                       r"\d+ exchanges so far", line) for line in rounds), rounds
    summary = run(sites, algorithm="local-only", horizon=20_000, seed=0).summary
    alone = run(Federation.from_callables([sites.objectives[0]], sites.domain), algorithm="pf-xab", alpha=1.0,
                horizon=20_000, seed=0)
    assert summary["phases"] == 0 and summary["client_phases"][0] > 0
    assert min(summary["client_phases"]) <= alone.summary["phases"] + 1 and max(summary["client_phases"]) >= 1
    from pfxab_flower import compare

    assert compare(sites, algorithms=["local-only"], horizon=20_000, seeds=[0]).runs["phases"].tolist() == [
        float(np.mean(summary["client_phases"]))]


def test_pfxab_simulate_counts_the_phases_of_the_streamed_log_on_a_terminal() -> None:
    import io

    from pfxab_flower.simulations.flower.flwr_run_progress import PhaseBar

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    lines = ["pfxab: \t├──> Horizon: 20000 pulls per client: at most 3 phases: 4 Flower rounds, 7 exchanges\n",
             "pfxab: phase 1 (depth 1): 2 active nodes, 0 eliminated, 9 pulls per client, 2 exchanges so far\n",
             "pfxab: phase 2: 8 candidates, 4 dropped, 4 kept, 9 pulls per client, 4 exchanges so far\n"]
    shown = PhaseBar(Terminal())
    for line in lines:
        shown.write(line)
    assert shown.bar is not None and shown.bar.n == 2 and shown.bar.total == 4
    shown.write("pfxab: final exchange: 4 of 4 clients sent their final point; 2 phases, 5 exchanges in all\n")
    assert shown.bar is None and all(line.strip() in shown.log.getvalue() for line in lines)
    plain = PhaseBar(io.StringIO())
    for line in lines:
        plain.write(line)
    assert plain.bar is None and plain.log.getvalue() == "".join(lines)  # a file or a pipe: the log unchanged


def test_a_simulation_names_its_sites_from_the_run_configs_sites_key_when_the_app_gives_none(
    docs_app: DocsApp,
) -> None:
    app = objective_client_app(docs_app.client.make_objective, docs_app.task.DOMAIN, evaluation="stochastic",
                               value_range=(0.0, 1.0))  # no sites=
    grid = LoopbackGrid(4, app, repickle=True)
    for context in grid.contexts.values():
        context.run_config = {"sites": "north, south, east, west"}
    grid.contexts[103].node_config["site"] = "own"  # a node's own label wins
    result = run_loopback(docs_app.strategy("pf-xab"), grid)
    assert result.arrays["client-sites"].numpy().tolist() == ["north", "south", "east", "own"]


def test_the_docs_sites_give_the_same_final_points_on_the_legacy_api(docs_app: DocsApp) -> None:
    """The same sessions under Flower's legacy Strategy/NumPyClient loop: the trials' rng is the sessions'."""
    from pfxab_flower.client_apps import objective_sessions
    from pfxab_flower.strategies import LEGACY_STRATEGIES
    from tests.flower_loopback import run_loopback as run_legacy_loopback

    sessions = objective_sessions(docs_app.client.make_objective, docs_app.task.DOMAIN, evaluation="stochastic",
                                  value_range=(0.0, 1.0))
    strategy = LEGACY_STRATEGIES["pf-sh"](num_clients=4, horizon=HORIZON, seed=docs_app.config["seed"],
                                          alpha=docs_app.config["alpha"], dimensions=2, reward_range=(0.0, 1.0))
    run_legacy_loopback(strategy, sessions, 4)
    alone = run(docs_app.federation(), algorithm="pf-sh", horizon=HORIZON, alpha=docs_app.config["alpha"],
                seed=docs_app.config["seed"])
    np.testing.assert_array_equal(strategy.final_points(), np.array(alone.summary["final_points"]))
