"""Markdown tables of a finished sweep: the numbers behind each figure.

For a regret sweep: final cumulative regret (mean +- sd over seeds) per algorithm
and alpha, and what each algorithm communicated. For a rewards sweep (figure 3):
the per-step average rewards per alpha next to the reference values.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from pfxab_flower.simulations.experiment import Experiment, series_keys, series_label
from pfxab_flower.simulations.sweep import load_sweep


def _scale(values: pd.Series) -> tuple[float, str]:
    """A power of ten that keeps the table's numbers short (1e6 -> "× 10^6")."""
    largest = float(np.nanmax(np.abs(values))) if len(values) else 0.0
    if largest < 1e4:
        return 1.0, ""
    power = math.floor(math.log10(largest))
    return 10.0**power, f" (× 10^{power})"


def _mean_sd(values: pd.Series, scale: float = 1.0, digits: int = 3) -> str:
    sd = values.std(ddof=1) if len(values) > 1 else 0.0
    return f"{values.mean() / scale:.{digits}f} ± {sd / scale:.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def regret_report(experiment: Experiment, runs: pd.DataFrame) -> str:
    keys = series_keys(experiment)
    alphas = sorted(runs["alpha"].unique())
    scale, unit = _scale(runs["regret"])
    seeds = runs["seed"].nunique()
    clients, horizon = int(runs["clients"].iloc[0]), int(runs["horizon"].iloc[0])
    groups = list(runs.groupby(keys, sort=False)) if keys else [((), runs)]
    rows, comm = [], []
    for values, group in groups:
        label = series_label(experiment, values if isinstance(values, tuple) else (values,))
        rows.append([label] + [_mean_sd(group.loc[group["alpha"] == a, "regret"], scale) for a in alphas])
        comm.append([
            label,
            f"{group['phases'].mean():.1f}",
            f"{group['communication_rounds'].mean():.1f}",
            f"{(group['bytes_up'] + group['bytes_down']).mean() / 1e3:.1f}",
            f"{group['wall_seconds'].mean():.2f}",
        ])
    header = ["algorithm"] + [f"α = {a:g}" for a in alphas]
    title = (f"Final cumulative regret{unit}, summed over M = {clients} clients at T = {horizon:,}; "
             f"mean ± sd over {seeds} seeds")
    comm_header = ["algorithm", "phases", "communication rounds", "kB sent (up + down)", "wall s per run"]
    return (f"**{experiment.title}**\n\n{title}:\n\n{_table(header, rows)}\n\n"
            f"Communication (mean over all runs of each algorithm):\n\n{_table(comm_header, comm)}\n")


def rewards_report(experiment: Experiment, runs: pd.DataFrame) -> str:
    seeds = runs["seed"].nunique()
    rows = []
    for alpha, group in runs.groupby("alpha"):
        rows.append([f"{alpha:g}"] + [_mean_sd(group[f"mean_reward_{k}"], digits=4)
                                      for k in ("personalised", "global", "local")]
                    + [f"{group['best_personalised'].mean():.4f}"])
    header = ["α", "personalised", "global", "local", "best personalised"]
    best_local, best_global = runs["best_local"].mean(), runs["best_global"].mean()
    return (f"**{experiment.title}**\n\nAverage per-step reward (mean over clients), mean ± sd over {seeds} seeds; "
            f"best local = {best_local:.4f}, best global = {best_global:.4f}:\n\n{_table(header, rows)}\n")


def report(sweep_dir: str | Path) -> str:
    experiment, runs, _ = load_sweep(sweep_dir)
    if experiment.kind == "rewards":
        return rewards_report(experiment, runs)
    return regret_report(experiment, runs)
