"""The small-budget map: which algorithm at 50 to 1,000 evaluations per site, by simple and by cumulative regret.

``python -m pfxab_flower.simulations.reports.small_budget_map DIR [DIR ...] --out MAP`` reads finished sweeps of
``simulations/configs/small_budget*.toml`` and writes the map's tables and figures (docs/practice.md, "Small
budgets"). Which algorithm wins is what the runs measured: nothing here chooses or weighs the algorithms.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from pfxab_flower.errors import ConfigError
from pfxab_flower.simulations.experiments.experiment import ALGORITHM_LABELS
from pfxab_flower.simulations.experiments.sweep_tables import load_sweep
from pfxab_flower.simulations.reports.practice_map import (
    family_and_dimension,
    pyplot,
    save_with_shared_legend,
    winners_figure,
)
from pfxab_flower.storage.outputs import atomic_file

SETTING = ["problem", "num_clients", "horizon", "alpha", "noise_sigma"]
#: The two measures, by the runs' column: what a site deploys (its final point), and every evaluation counted.
MEASURES = {"simple_regret": "simple regret", "regret": "cumulative regret"}
#: What each algorithm is held against, where it ran: the external baselines, the project's best, random search.
REFERENCES = ("optuna-tpe", "optuna-tpe-fed", "pf-sh", "random-search")


def setting_means(runs: pd.DataFrame) -> pd.DataFrame:
    """Per setting and algorithm: each measure's mean and sd over the seeds, and its ratio to random search's
    and to the setting's best mean; the problem's family and dimension."""
    table = runs.groupby([*SETTING, "algorithm"], as_index=False).agg(
        seeds=("seed", "nunique"), run_seconds=("wall_seconds", "mean"),
        **{f"{m}_{k}": (m, k) for m in MEASURES for k in ("mean", "std")})
    for measure in MEASURES:
        mean = table[f"{measure}_mean"]
        reference = table[table["algorithm"] == "random-search"].set_index(SETTING)[f"{measure}_mean"]
        aligned = reference.reindex(pd.MultiIndex.from_frame(table[SETTING])).to_numpy()  # NaN: none in the setting
        table[f"{measure}_to_random_search"] = mean / aligned
        table[f"{measure}_to_best"] = mean / table.groupby(SETTING)[f"{measure}_mean"].transform("min")
    table["family"], table["dimension"] = zip(*map(family_and_dimension, table["problem"]), strict=True)
    return table.sort_values([*SETTING, "algorithm"], ignore_index=True)


def head_to_head(table: pd.DataFrame, measure: str) -> pd.DataFrame:
    """Each algorithm against each reference (:data:`REFERENCES`) over the settings both ran: in how many its mean
    was at or below the reference's, the median and worst ratio of means, and the median ratio where it lost."""
    means = table.pivot_table(index=SETTING, columns="algorithm", values=f"{measure}_mean")
    rows = []
    for algorithm in means.columns:
        for reference in (r for r in REFERENCES if r in means.columns and r != algorithm):
            ratio = (means[algorithm] / means[reference]).dropna()
            lost = ratio[ratio > 1]
            rows.append({"measure": measure, "algorithm": algorithm, "reference": reference, "settings": len(ratio),
                         "at_or_below": int((ratio <= 1).sum()), "median_ratio": float(ratio.median()),
                         "worst_ratio": float(ratio.max()),
                         "median_loss": float(lost.median()) if len(lost) else np.nan})
    return pd.DataFrame(rows)


def head_to_head_by_horizon(table: pd.DataFrame, measure: str) -> pd.DataFrame:
    """:func:`head_to_head` within each horizon, then over all of them (``horizon`` ``"all"``): whether a lead holds,
    grows or shrinks as the budget grows, which the counts over the whole map hide."""
    parts = [head_to_head(group, measure).assign(horizon=f"{int(horizon):,}")
             for horizon, group in table.groupby("horizon", sort=True)]
    return pd.concat([*parts, head_to_head(table, measure).assign(horizon="all")], ignore_index=True)


def winners(table: pd.DataFrame, measure: str) -> pd.DataFrame:
    """Each setting's algorithm of least mean ``measure``, the runner-up's ratio to it and random search's."""
    rows = []
    for setting, group in table.groupby(SETTING, sort=True):
        group = group.sort_values(f"{measure}_mean")
        best = group.iloc[0]
        rows.append({**dict(zip(SETTING, setting, strict=True)), "measure": MEASURES[measure],
                     "family": f"{MEASURES[measure]}, M = {best['num_clients']}", "dimension": best["dimension"],
                     "best": ALGORITHM_LABELS.get(best["algorithm"], best["algorithm"]),
                     "best_mean": best[f"{measure}_mean"],
                     "runner_up_ratio": group.iloc[1][f"{measure}_to_best"] if len(group) > 1 else np.nan,
                     "random_search_ratio": float(group.loc[group["algorithm"] == "random-search",
                                                            f"{measure}_to_best"].iloc[0])
                     if (group["algorithm"] == "random-search").any() else np.nan})
    return pd.DataFrame(rows)


def by_horizon(table: pd.DataFrame, measure: str) -> pd.DataFrame:
    """The median over settings of each algorithm's ratio to random search, per horizon and number of clients."""
    column = f"{measure}_to_random_search"
    return (table.groupby(["algorithm", "num_clients", "horizon"], as_index=False)
            .agg(median=(column, "median"), low=(column, lambda v: v.quantile(0.25)),
                 high=(column, lambda v: v.quantile(0.75)), settings=(column, "size")))


def costs(runs: pd.DataFrame) -> pd.DataFrame:
    """Each algorithm's wall time in the sweeps: in all, and per run at each horizon (seconds)."""
    per_run = runs.pivot_table(index="algorithm", columns="horizon", values="wall_seconds", aggfunc="mean")
    per_run.columns = [f"seconds_per_run_T{int(h)}" for h in per_run.columns]
    return per_run.assign(runs=runs.groupby("algorithm").size(),
                          total_seconds=runs.groupby("algorithm")["wall_seconds"].sum()).reset_index()


def _measure_order(column: pd.Series) -> pd.Series:
    """Simple regret before cumulative (the order of :data:`MEASURES`), then the clients as numbers."""
    return column.map(list(MEASURES.values()).index) if column.name == "measure" else column


def _label(algorithm: str) -> str:
    return ALGORITHM_LABELS.get(algorithm, algorithm)


def markdown(table: pd.DataFrame, duels: pd.DataFrame, runs: pd.DataFrame) -> str:
    """The head-to-head counts (each measure), the winners per algorithm and the cost, as Markdown."""
    settings = table.groupby(SETTING).ngroups
    references = [r for r in REFERENCES if r in set(duels["reference"])]
    lines = []
    for measure, name in MEASURES.items():
        lines += [f"**{name.capitalize()}** (mean over seeds per setting; {settings} settings): at or below the "
                  "reference's in n of N settings, median and worst ratio of means, median ratio where it lost",
                  "", "| algorithm | " + " | ".join(f"vs {_label(r)}" for r in references) + " |",
                  "|---|" + "---|" * len(references)]
        part = duels[duels["measure"] == measure]
        for algorithm in sorted(part["algorithm"].unique(), key=_label):
            cells = []
            for reference in references:
                row = part[(part["algorithm"] == algorithm) & (part["reference"] == reference)]
                if row.empty:
                    cells.append("")
                    continue
                r = row.iloc[0]
                loss = "" if np.isnan(r["median_loss"]) else f", lost by x{r['median_loss']:.2f}"
                cells.append(f"{r['at_or_below']}/{r['settings']} (x{r['median_ratio']:.2f}, worst "
                             f"x{r['worst_ratio']:.2f}{loss})")
            lines.append(f"| {_label(algorithm)} | " + " | ".join(cells) + " |")
        lines.append("")
        won = winners(table, measure)["best"].value_counts()
        lines += [f"Least mean {name}, settings won: " + ", ".join(f"{a} {n}" for a, n in won.items()), ""]
    cost = costs(runs)
    horizons = sorted((c for c in cost.columns if c.startswith("seconds_per_run_T")),
                      key=lambda c: int(c.removeprefix("seconds_per_run_T")))
    lines += ["Cost (wall seconds, one process): per run at each horizon, and in all", "",
              "| algorithm | runs | " + " | ".join(f"T = {c.removeprefix('seconds_per_run_T')}" for c in horizons)
              + " | total |", "|---|---|" + "---|" * (len(horizons) + 1)]
    for row in cost.sort_values("total_seconds").itertuples(index=False):
        values = row._asdict()
        lines.append(f"| {_label(row.algorithm)} | {row.runs} | "
                     + " | ".join(f"{values[c]:.2f}" for c in horizons) + f" | {row.total_seconds:,.0f} |")
    return "\n".join(lines)


def horizon_markdown(duels: pd.DataFrame) -> str:
    """Each algorithm against each reference per horizon (:func:`head_to_head_by_horizon`), both measures side by
    side, as Markdown: at or below in n of N settings, the median ratio of means in brackets."""
    references = [r for r in REFERENCES if r in set(duels["reference"])]
    columns = [(measure, reference) for measure in MEASURES for reference in references]
    lines = ["Each algorithm against the references by horizon: at or below in n of N settings (median ratio of "
             "means)", "",
             "| algorithm | T | " + " | ".join(f"{MEASURES[m].split()[0]}: vs {_label(r)}" for m, r in columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    cells = duels.set_index(["algorithm", "horizon", "measure", "reference"])
    for algorithm in sorted(duels["algorithm"].unique(), key=_label):
        for horizon in dict.fromkeys(duels["horizon"]):
            row = []
            for measure, reference in columns:
                key = (algorithm, horizon, measure, reference)
                row.append("" if key not in cells.index else
                           f"{cells.loc[key, 'at_or_below']}/{cells.loc[key, 'settings']} "
                           f"(x{cells.loc[key, 'median_ratio']:.2f})")
            lines.append(f"| {_label(algorithm)} | {horizon} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def ratios_figure(table: pd.DataFrame, stem: Path) -> list[Path]:
    """Median ratio to random search against the horizon: a column per measure, a row per M, a line per algorithm
    (band: the middle half of the settings)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    from pfxab_flower.simulations.reports.plots import algorithm_colour

    plt = pyplot()
    clients = sorted(table["num_clients"].unique())
    algorithms = sorted((a for a in table["algorithm"].unique() if a != "random-search"), key=_label)
    colours = {a: algorithm_colour(a) for a in algorithms}  # each algorithm's colour in every figure
    fig, axes = plt.subplots(len(clients), len(MEASURES), figsize=(5.0 * len(MEASURES), 3.4 * len(clients)),
                             sharex=True, squeeze=False)
    for c, (measure, name) in enumerate(MEASURES.items()):
        curves = by_horizon(table, measure)
        for r, m in enumerate(clients):
            ax = axes[r][c]
            for algorithm in algorithms:
                line = curves[(curves["algorithm"] == algorithm) & (curves["num_clients"] == m)].sort_values("horizon")
                ax.plot(line["horizon"], line["median"], marker="o", markersize=3, color=colours[algorithm],
                        label=_label(algorithm))
                ax.fill_between(line["horizon"], line["low"], line["high"], color=colours[algorithm], alpha=0.12,
                                lw=0)
            ax.axhline(1.0, color="black", lw=0.8, ls=":")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xticks(sorted(table["horizon"].unique()), [f"{h:,}" for h in sorted(table["horizon"].unique())])
            ax.xaxis.set_minor_formatter(NullFormatter())  # the horizons run are the only ticks labelled
            for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
                axis(FuncFormatter(lambda value, _: f"{value:g}"))
            ax.set_title(f"{name}, M = {m}", fontsize=10)
            ax.grid(True, which="major", alpha=0.3)
            if c == 0:
                ax.set_ylabel("mean regret / random search's\n(median over settings)")
            if r == len(clients) - 1:
                ax.set_xlabel("evaluations per site T")
    return save_with_shared_legend(fig, axes, stem, columns=5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pfxab_flower.simulations.reports.small_budget_map",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("directory", nargs="+", help="finished sweeps of simulations/configs/small_budget*.toml")
    parser.add_argument("--out", default=None, help="where to write the map (default: the first DIRECTORY-map)")
    args = parser.parse_args(argv)
    frames = []
    for directory in args.directory:
        try:
            _, frame, _ = load_sweep(directory)
        except ConfigError as exc:  # not a finished sweep: one line, before any work
            parser.exit(2, f"{parser.prog}: error: {exc}\n")
        if frame["simple_regret"].isna().all():
            parser.error(f"{directory} has no simple regret; allowed: a sweep run since runs report it")
        frames.append(frame)
    runs = pd.concat(frames, ignore_index=True)
    out = Path(args.out or f"{str(args.directory[0]).rstrip('/')}-map")
    out.mkdir(parents=True, exist_ok=True)
    table = setting_means(runs)
    synthetic = table[table["problem"] != "landmine"]
    per_horizon = pd.concat([head_to_head_by_horizon(synthetic, measure) for measure in MEASURES],
                            ignore_index=True)
    duels = per_horizon[per_horizon["horizon"] == "all"].drop(columns="horizon")
    best = pd.concat([winners(synthetic, measure) for measure in MEASURES], ignore_index=True)
    for name, frame in (("small_budget_map.csv", table), ("small_budget_duels.csv", per_horizon),
                        ("small_budget_winners.csv", best), ("small_budget_costs.csv", costs(runs))):
        with atomic_file(out / name) as tmp:
            frame.to_csv(tmp, index=False)
    written = ratios_figure(synthetic, out / "small_budget")
    families = dict.fromkeys(best.sort_values(["measure", "num_clients"], key=_measure_order)["family"])
    order = [(family, noise) for family in families for noise in sorted(best["noise_sigma"].unique())]
    written += winners_figure(best, out / "small_budget_winners", ratio="random_search_ratio",
                              ratio_label="random search's mean / the winner's", rows=order)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    print(markdown(synthetic, duels, runs[runs["problem"] != "landmine"]))
    print("\n" + horizon_markdown(per_horizon))
    landmine = table[table["problem"] == "landmine"]
    if len(landmine):
        print("\n" + landmine_markdown(landmine))
    return 0


def landmine_markdown(table: pd.DataFrame) -> str:
    """Landmine per horizon: each algorithm's mean simple and cumulative regret (± sd over seeds)."""
    lines = ["**Landmine** (M = 10, real fits): mean ± sd over seeds, simple regret / cumulative regret", "",
             "| algorithm | " + " | ".join(f"T = {h:,}" for h in sorted(table["horizon"].unique())) + " |",
             "|---|" + "---|" * table["horizon"].nunique()]
    for algorithm, group in sorted(table.groupby("algorithm"), key=lambda item: _label(str(item[0]))):
        group = group.sort_values("horizon")
        cells = [f"{r.simple_regret_mean:.4f} ± {r.simple_regret_std:.4f} / {r.regret_mean:,.1f} ± {r.regret_std:,.1f}"
                 for r in group.itertuples()]
        lines.append(f"| {_label(str(algorithm))} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
