"""The per-site Optuna TPE baseline (``optuna-tpe``) and the optional extra it lives behind.

With optuna installed: each site's trials, its best observed point exploited to ``T``, the same numbers on
every engine (in-process, Message API, legacy API: the loopback harnesses, without Ray). Without it (made so
here by hiding the module): choosing the algorithm is one line naming the extra, and the rest runs.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from pfxab_flower import RunConfig, compare, run, run_config
from pfxab_flower.algorithms import make_policy, registry
from pfxab_flower.algorithms.baselines.optuna_tpe import DEFAULT_TRIALS
from pfxab_flower.errors import ConfigError
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.synthetic import synthetic_federation
from pfxab_flower.running.engine import make_settings, simulate
from pfxab_flower.running.results import RECOMMENDATION_KEYS
from pfxab_flower.simulations.cli.main import main

needs_optuna = pytest.mark.skipif(not registry.installed("optuna"), reason='needs optuna: pip install -e ".[optuna]"')


def small(**changes: object) -> RunConfig:
    """A small optuna-tpe run (built when asked: without optuna, choosing the algorithm is refused)."""
    return RunConfig(**{"problem": "doublesine-shifted-2d", "algorithm": "optuna-tpe", "num_clients": 3, "alpha": 0.5,
                        "horizon": 90, "seed": 2, **changes})
SAME_KEYS = ("regret", "regret_per_client", "final_nodes", "final_points", "pulls_scored", "phases",
             "communication_rounds", "values_up", "values_down", "rejected_replies", "evaluations_per_client",
             *RECOMMENDATION_KEYS)


@needs_optuna
def test_each_site_runs_its_trials_then_exploits_its_best_observed_point() -> None:
    config = small(tpe_trials=40, noise="none")
    result = run_config(config)
    summary = result.summary
    assert summary["tpe_trials"] == 40 and summary["phases"] == 0 and summary["communication_rounds"] == 1
    assert summary["evaluations_per_client"] == [40] * 3  # one evaluation per trial (noise none: each point once)
    assert summary["final_nodes"] == summary["best_nodes"]  # it exploits its best observed point
    assert summary["best_observed_pulls_per_client"] == [1] * 3
    federation = build_federation(config)
    own = federation.local_values(np.array(summary["best_points"]))
    np.testing.assert_array_equal(np.diag(own), summary["best_observed_mean_per_client"])  # noise none: the value
    for ledger in result.ledger.clients:  # 40 pulls of the trials, then the rest of T on the best
        assert ledger.pulls == 90
    assert run_config(config).summary["regret"] == summary["regret"]  # deterministic


@needs_optuna
def test_tpe_proposes_where_the_rewards_were_high() -> None:
    """After its random start-up trials, TPE's proposals are far better than uniform points on average (a sampler
    that ignored the rewards, or was told them with the wrong sign, would fail)."""
    federation = synthetic_federation("garland", 4)
    uniform = federation.local_values((np.arange(4096)[:, None] + 0.5) / 4096).mean(axis=1)  # each mu_m's mean
    settings = make_settings(4, algorithm="optuna-tpe", alpha=1.0, horizon=150, seed=1, tpe_trials=150)
    sim = simulate(federation, make_policy("optuna-tpe"), settings)
    for m, env in enumerate(sim.envs):
        assert env.log.counts[:150].tolist() == [1] * 150  # its trials, in order, one pull each
        later = federation.local_values(federation.partition.midpoints(env.log.node_ids[50:150]))[m]
        assert later.mean() > uniform[m] + 0.1, (m, later.mean(), uniform[m])


@needs_optuna
def test_the_trials_are_the_budget_up_to_the_cap_and_max_evaluations() -> None:
    assert run_config(small()).summary["evaluations_per_client"] == [90] * 3  # T < the default cap: every pull a trial
    capped = run_config(small(tpe_trials=30, max_evaluations=20, noise="none")).summary
    assert capped["evaluations_per_client"] == [20] * 3 and capped["pulls_scored"] == [90] * 3
    assert RunConfig().tpe_trials == DEFAULT_TRIALS == 1000


@needs_optuna
@pytest.mark.parametrize("api", ["message", "legacy"])
def test_flower_gives_the_in_process_numbers(api: str) -> None:
    from pfxab_flower.client_apps import federation_sessions, message_client_app
    from pfxab_flower.schema.run_config import AppOptions
    from pfxab_flower.simulations.flower.app_builders import strategy_of
    from tests import flower_loopback, message_loopback

    config = small()
    federation = build_federation(config)
    strategy = strategy_of(config, AppOptions(api=api), federation)
    if api == "message":
        grid = message_loopback.LoopbackGrid(3, message_client_app(federation_sessions(federation)), 0, None)
        message_loopback.run_loopback(strategy, grid)
    else:
        flower_loopback.run_loopback(strategy, federation_sessions(federation), 3)
    flower, inprocess = strategy.run_result().summary, run_config(small()).summary
    for key in SAME_KEYS:
        assert flower[key] == inprocess[key], key
    assert flower["engine"] == "flower"


def test_without_optuna_choosing_it_is_one_line_naming_the_extra_and_the_rest_runs(monkeypatch, capsys) -> None:
    monkeypatch.setattr(registry, "installed", lambda module: module != "optuna")
    why = (r"is invalid without optuna installed; allowed: another algorithm, or first pip install "
           r"\"pfxab-flower\[optuna\]\" \(in a clone: pip install -e \"\.\[optuna\]\"\)$")
    with pytest.raises(ConfigError, match=r"^algorithm='optuna-tpe' " + why):
        RunConfig(algorithm="optuna-tpe")
    with pytest.raises(ConfigError, match=r"^algorithm='optuna-tpe' " + why):
        run(synthetic_federation("garland", 2), "optuna-tpe", horizon=100)
    with pytest.raises(ConfigError, match=r"^algorithms='optuna-tpe' " + why):
        compare(synthetic_federation("garland", 2), ["pf-xab", "optuna-tpe"], [0], horizon=100, progress=False)
    assert main(["run", "--algorithm", "optuna-tpe", "--horizon", "100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--algorithm='optuna-tpe' is invalid without optuna installed" in err[0]
    assert "optuna-tpe" not in registry.available_names() and "optuna-tpe" in registry.algorithm_names()
    comparison = compare(synthetic_federation("garland", 2), seeds=[0], horizon=2_000, progress=False)
    assert comparison.algorithms == registry.available_names()  # every algorithm it can run, by default
    assert main(["run", "--algorithm", "random-search", "--num-clients", "2", "--horizon", "500", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["algorithm"] == "random-search"


def test_the_package_imports_no_optuna_until_a_run_uses_it() -> None:
    code = ("import sys; import pfxab_flower, pfxab_flower.algorithms, pfxab_flower.simulations.cli.main; "
            "from pfxab_flower import RunConfig, run_config; run_config(RunConfig(horizon=1000)); "
            "print(sys.modules.get('optuna') is not None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"
