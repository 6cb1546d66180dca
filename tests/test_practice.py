"""The practice map's tables: the winner of each setting is the variant with the least mean regret."""

from __future__ import annotations

import pandas as pd

from pfxab_flower.simulations.reports.practice_map import family_and_dimension, markdown, practice_map, winners


def runs() -> pd.DataFrame:
    """Two settings, three variants, two seeds: random search wins the first, PF-XAB the second."""
    rows = []
    regrets = {(1000, "pf-xab", "hoeffding"): (30.0, 34.0), (1000, "pf-xab", "bernstein"): (20.0, 22.0),
               (1000, "random-search", "hoeffding"): (10.0, 12.0),
               (10000, "pf-xab", "hoeffding"): (50.0, 50.0), (10000, "pf-xab", "bernstein"): (80.0, 90.0),
               (10000, "random-search", "hoeffding"): (100.0, 120.0)}
    for (horizon, algorithm, confidence), values in regrets.items():
        for seed, regret in enumerate(values):
            rows.append({"problem": "garland", "horizon": horizon, "alpha": 0.5, "noise_sigma": 0.1,
                         "algorithm": algorithm, "confidence": confidence, "seed": seed, "regret": regret})
    return pd.DataFrame(rows)


def test_the_map_ranks_each_setting_by_mean_regret() -> None:
    table = practice_map(runs())
    first = table[table["horizon"] == 1000].set_index("variant")
    assert first.loc["Random-Search", "regret_mean"] == 11.0 and first.loc["Random-Search", "ratio_to_best"] == 1.0
    assert first.loc["PF-XAB", "ratio_to_best"] == 32.0 / 11.0
    assert first.loc["PF-XAB (bernstein)", "regret_per_pull"] == 21.0 / 1000
    best = winners(table).set_index("horizon")
    assert best.loc[1000, "best"] == "Random-Search" and best.loc[1000, "runner_up"] == "PF-XAB (bernstein)"
    assert best.loc[10000, "best"] == "PF-XAB" and best.loc[10000, "random_search_ratio"] == 110.0 / 50.0
    text = markdown(winners(table))
    assert family_and_dimension("garland-5d") == ("garland", 5) and family_and_dimension("landmine") == ("landmine", 2)
    assert ("| garland | 1 | 0.1 | 0.5 | 1e+03 | Random-Search (11) | PF-XAB (bernstein) (x1.91) | x2.91 | x1.00 |"
            in text)


def test_a_baseline_that_ignores_the_bound_is_one_variant() -> None:
    frame = runs()
    copy = frame[frame["algorithm"] == "random-search"].assign(confidence="bernstein")
    table = practice_map(pd.concat([frame, copy], ignore_index=True))
    assert sorted(table["variant"].unique()) == ["PF-XAB", "PF-XAB (bernstein)", "Random-Search"]
    changed = copy.assign(regret=copy["regret"] + 1.0)  # a bound that changes one run is a variant of its own
    table = practice_map(pd.concat([frame, changed], ignore_index=True))
    assert "Random-Search (bernstein)" in set(table["variant"])
