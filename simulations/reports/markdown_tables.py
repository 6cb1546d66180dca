"""Markdown tables of a finished sweep or comparison: the numbers behind each figure.

Final regret per algorithm and alpha (or rewards per alpha for figure 3) with what was communicated;
for a comparison, its summary and the winner. Numbers as :mod:`pfxab_flower.formatting` prints them.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from pfxab_flower.formatting import format_mean_sd, format_number
from pfxab_flower.simulations.experiments.experiment import ALGORITHM_LABELS, Experiment, series_keys, series_label
from pfxab_flower.simulations.experiments.sweep_tables import load_sweep
from pfxab_flower.simulations.reports.result_dirs import result_kind
from pfxab_flower.studies.comparison import Comparison, load_comparison


def _scale(values: pd.Series) -> tuple[float, str]:
    """A power of ten that keeps the table's numbers short (1e6 -> "× 10^6")."""
    largest = float(np.nanmax(np.abs(values))) if len(values) else 0.0
    if largest < 1e4:
        return 1.0, ""
    power = math.floor(math.log10(largest))
    return 10.0**power, f" (× 10^{power})"


def _mean_sd(values: pd.Series, scale: float = 1.0, decimals: int = 3) -> str:
    """Mean ± sd over seeds on the table's scale, with the table's fixed decimals (one seed: sd 0)."""
    sd = values.std(ddof=1) if len(values) > 1 else 0.0
    return format_mean_sd(values.mean() / scale, sd / scale, decimals=decimals)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def regret_report(experiment: Experiment, runs: pd.DataFrame) -> str:
    keys = series_keys(experiment)
    alphas = sorted(runs["alpha"].unique())
    scale, unit = _scale(runs["regret"])
    seeds = runs["seed"].nunique()
    clients, horizon = int(runs["num_clients"].iloc[0]), int(runs["horizon"].iloc[0])
    groups = list(runs.groupby(keys, sort=False)) if keys else [((), runs)]
    rows, simple, comm = [], [], []
    for values, group in groups:
        label = series_label(experiment, values if isinstance(values, tuple) else (values,))
        rows.append([label] + [_mean_sd(group.loc[group["alpha"] == a, "regret"], scale) for a in alphas])
        simple.append([label] + [_mean_sd(group.loc[group["alpha"] == a, "simple_regret"], decimals=4)
                                 for a in alphas])
        comm.append([
            label,
            format_number(group["phases"].mean(), decimals=1),
            format_number(group["communication_rounds"].mean(), decimals=1),
            format_number((group["bytes_up"] + group["bytes_down"]).mean() / 1e3, decimals=1),
            format_number(group["wall_seconds"].mean(), decimals=2),
        ])
    header = ["algorithm"] + [f"α = {a:g}" for a in alphas]
    title = (f"Final cumulative regret{unit}, summed over M = {clients} clients at T = {horizon:,}; "
             f"mean ± sd over {seeds} seeds")
    comm_header = ["algorithm", "phases", "communication rounds", "kB sent (up + down)", "wall s per run"]
    simple_table = ""
    if np.isfinite(runs["simple_regret"].to_numpy(dtype=float)).any():  # not known for runs written before it was
        simple_table = (f"Simple regret of the final points (mean over the M = {clients} clients), mean ± sd over "
                        f"{seeds} seeds:\n\n{_table(header, simple)}\n\n")
    return (f"**{experiment.title}**\n\n{title}:\n\n{_table(header, rows)}\n\n{simple_table}"
            f"Communication (mean over all runs of each algorithm):\n\n{_table(comm_header, comm)}\n")


def rewards_report(experiment: Experiment, runs: pd.DataFrame) -> str:
    seeds = runs["seed"].nunique()
    rows = []
    for alpha, group in runs.groupby("alpha"):
        rows.append([f"{alpha:g}"] + [_mean_sd(group[f"mean_reward_{k}"], decimals=4)
                                      for k in ("personalised", "global", "local")]
                    + [format_number(group["best_personalised"].mean(), decimals=4)])
    header = ["α", "personalised", "global", "local", "best personalised"]
    best_local, best_global = runs["best_local"].mean(), runs["best_global"].mean()
    return (f"**{experiment.title}**\n\nAverage per-step reward (mean over clients), mean ± sd over {seeds} seeds; "
            f"best local = {format_number(best_local, decimals=4)}, "
            f"best global = {format_number(best_global, decimals=4)}:\n\n{_table(header, rows)}\n")


def comparison_report(comparison: Comparison) -> str:
    """The comparison's summary table (winner in bold) and one line on the winner."""
    header, *rows = comparison.cells()
    winner = comparison.winner()
    bold = 2  # the winner's name and regret
    rows = [[f"**{c}**" for c in row[:bold]] + row[bold:] if row[0] == winner else row for row in rows]
    clients, horizon = comparison.setting["num_clients"], comparison.setting["horizon"]
    title = (f"Final cumulative regret, summed over M = {clients} clients at T = {horizon:,}; simple regret, the "
             f"final points' (mean over the clients); and what each run cost; mean ± sd over "
             f"{_seeds(len(comparison.seeds))}")
    return f"**{comparison.header()}**\n\n{title}:\n\n{_table(header, rows)}\n\n{winner_line(comparison)}\n"


def _seeds(count: int) -> str:
    return f"{count} seed{'s' if count != 1 else ''}"


def winner_line(comparison: Comparison) -> str:
    """Which algorithm has the lowest mean regret, how much more the next has, and on how many seeds it is lowest."""
    means = comparison.summary.set_index("algorithm")["regret_mean"].sort_values(kind="stable")
    winner = comparison.winner()
    name = ALGORITHM_LABELS.get(winner, winner)
    line = f"Lowest mean regret: **{name}** ({format_number(means[winner])})"
    if len(means) == 1:
        return line + ", the only algorithm compared."
    runner_up, second = means.index[1], means.iloc[1]
    other = f"{ALGORITHM_LABELS.get(runner_up, runner_up)} ({format_number(second)})"
    if second == means[winner]:
        line += f", tied with {other}"
    elif means[winner] > 0:
        line += f"; the next, {other}, has {second / means[winner]:.2f}x as much"
    else:
        line += f"; the next is {other}"
    won = comparison.seeds_won(winner)
    return line + f"; {name} is below every other algorithm on {won} of {_seeds(len(comparison.seeds))}."


def report(result_dir: str | Path) -> str:
    """The Markdown report of a finished sweep or comparison directory."""
    if result_kind(result_dir) == "comparison":
        return comparison_report(load_comparison(result_dir))
    experiment, runs, _ = load_sweep(result_dir)
    if experiment.kind == "rewards":
        return rewards_report(experiment, runs)
    return regret_report(experiment, runs)
