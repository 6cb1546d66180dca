"""The small-budget map's tables: means per setting, each algorithm against the references, winners and cost."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pfxab_flower.simulations.reports.small_budget_map import (
    by_horizon,
    costs,
    head_to_head,
    head_to_head_by_horizon,
    horizon_markdown,
    markdown,
    setting_means,
    winners,
)


def runs() -> pd.DataFrame:
    """Two settings (T = 50, 200), three algorithms, two seeds: (simple regret, cumulative regret) per seed."""
    values = {(50, "random-search"): ((0.4, 20.0), (0.6, 22.0)), (50, "optuna-tpe"): ((0.2, 18.0), (0.2, 26.0)),
              (50, "pf-sh"): ((0.3, 30.0), (0.5, 30.0)),
              (200, "random-search"): ((0.2, 60.0), (0.2, 60.0)), (200, "optuna-tpe"): ((0.05, 40.0), (0.15, 40.0)),
              (200, "pf-sh"): ((0.2, 30.0), (0.4, 50.0))}
    rows = []
    for (horizon, algorithm), seeds in values.items():
        for seed, (simple, regret) in enumerate(seeds):
            rows.append({"problem": "garland-shifted", "num_clients": 5, "horizon": horizon, "alpha": 0.5,
                         "noise_sigma": 0.1, "algorithm": algorithm, "seed": seed, "simple_regret": simple,
                         "regret": regret, "wall_seconds": 1.0 + seed + (horizon == 200)})
    return pd.DataFrame(rows)


def test_means_ratios_and_head_to_head_per_setting() -> None:
    table = setting_means(runs()).set_index(["horizon", "algorithm"])
    assert table.loc[(50, "optuna-tpe"), "simple_regret_mean"] == pytest.approx(0.2)
    assert table.loc[(50, "optuna-tpe"), "simple_regret_to_random_search"] == pytest.approx(0.2 / 0.5)
    assert table.loc[(200, "pf-sh"), "regret_to_best"] == pytest.approx(40.0 / 40.0)
    assert table.loc[(50, "pf-sh"), "regret_to_best"] == pytest.approx(30.0 / 21.0)
    assert table["dimension"].eq(1).all()
    duels = head_to_head(setting_means(runs()), "simple_regret").set_index(["algorithm", "reference"])
    # pf-sh against TPE: 0.4/0.2 at T = 50, 0.3/0.1 at T = 200: never at or below, median loss x2.5
    assert duels.loc[("pf-sh", "optuna-tpe"), "at_or_below"] == 0
    assert duels.loc[("pf-sh", "optuna-tpe"), "median_ratio"] == pytest.approx(2.5)
    assert duels.loc[("pf-sh", "optuna-tpe"), "worst_ratio"] == pytest.approx(3.0)
    assert duels.loc[("optuna-tpe", "random-search"), "at_or_below"] == 2
    assert np.isnan(duels.loc[("optuna-tpe", "random-search"), "median_loss"])
    assert ("optuna-tpe", "optuna-tpe") not in duels.index and ("pf-sh", "optuna-tpe-fed") not in duels.index


def test_winners_by_each_measure_and_the_cost() -> None:
    table = setting_means(runs())
    simple = winners(table, "simple_regret").set_index("horizon")
    cumulative = winners(table, "regret").set_index("horizon")
    assert simple.loc[50, "best"] == "Optuna-TPE" and cumulative.loc[50, "best"] == "Random-Search"
    assert cumulative.loc[200, "best"] in {"Optuna-TPE", "PF-SH"}  # a tie at 40: either, and the runner-up x1
    assert cumulative.loc[200, "runner_up_ratio"] == pytest.approx(1.0)
    assert simple.loc[200, "random_search_ratio"] == pytest.approx(0.2 / 0.1)
    curve = by_horizon(table, "simple_regret").set_index(["algorithm", "horizon"])
    assert curve.loc[("optuna-tpe", 200), "median"] == pytest.approx(0.5)
    cost = costs(runs()).set_index("algorithm")
    assert cost.loc["pf-sh", "seconds_per_run_T50"] == 1.5 and cost.loc["pf-sh", "total_seconds"] == 8.0
    text = markdown(table, head_to_head(table, "simple_regret"), runs())
    assert "| PF-SH | 0/2 (x2.50, worst x3.00, lost by x2.50) |" in text


def test_head_to_head_per_horizon_and_over_all() -> None:
    table = setting_means(runs())
    duels = head_to_head_by_horizon(table, "regret")
    cells = duels.set_index(["algorithm", "reference", "horizon"])
    # pf-sh against TPE: 30/22 at T = 50 (lost), 40/40 at T = 200 (a tie, at or below): 1 of 2 over both;
    # over both, simple vs random search 0.8 and 1.5 (median 1.15), cumulative 30/21 and 40/60 (1.05)
    assert cells.loc[("pf-sh", "optuna-tpe", "50"), "at_or_below"] == 0
    assert cells.loc[("pf-sh", "optuna-tpe", "50"), "median_ratio"] == pytest.approx(30.0 / 22.0)
    assert cells.loc[("pf-sh", "optuna-tpe", "200"), "at_or_below"] == 1
    assert cells.loc[("pf-sh", "optuna-tpe", "all"), "at_or_below"] == 1
    assert cells.loc[("pf-sh", "optuna-tpe", "all"), "settings"] == 2
    overall = head_to_head(table, "regret").set_index(["algorithm", "reference"])
    assert cells.xs("all", level="horizon")["at_or_below"].sort_index().equals(overall["at_or_below"].sort_index())
    both = pd.concat([head_to_head_by_horizon(table, m) for m in ("simple_regret", "regret")], ignore_index=True)
    text = horizon_markdown(both)
    assert "| algorithm | T | simple: vs Optuna-TPE | simple: vs PF-SH | simple: vs Random-Search |" in text
    assert "| PF-SH | 50 | 0/1 (x2.00) |  | 1/1 (x0.80) | 0/1 (x1.36) |  | 0/1 (x1.43) |" in text
    assert "| PF-SH | all | 0/2 (x2.50) |  | 1/2 (x1.15) | 1/2 (x1.18) |  | 1/2 (x1.05) |" in text
