"""The practice map: which algorithm variant has the least regret for each budget, noise and personalisation.

``python -m pfxab_flower.simulations.reports.practice_map DIR [DIR ...] --out MAP`` reads finished practice
sweeps and writes the map's tables and figures (docs/practice.md, "Reproduce"). Which variant wins
is what the runs measured: nothing here chooses or weighs the algorithms.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pandas as pd

from pfxab_flower.errors import ConfigError
from pfxab_flower.problems import registry as problem_registry
from pfxab_flower.schema.catalogue import PARAMETERS
from pfxab_flower.simulations.experiments.experiment import ALGORITHM_LABELS
from pfxab_flower.simulations.experiments.sweep_tables import load_sweep
from pfxab_flower.storage.outputs import atomic_file

if TYPE_CHECKING:  # matplotlib is imported only when a figure is drawn
    from matplotlib.figure import Figure

SETTING = ["problem", "horizon", "alpha", "noise_sigma"]
#: The paper's bound, the run parameters' default: a variant under it is labelled by its algorithm alone.
DEFAULT_BOUND = str(PARAMETERS["confidence"].default)
VARIANT = ["algorithm", "confidence"]


def family_and_dimension(problem: str) -> tuple[str, int]:
    """``("garland", 3)`` for ``garland-3d`` (:mod:`pfxab_flower.problems.separable`), ``("landmine", 2)``: the
    family is the name without its ``-Nd``, the dimension the registry's (1 if the problem declares none)."""
    match = re.fullmatch(r"(.+)-\d+d", problem)
    return (match.group(1) if match else problem), problem_registry.problem(problem).dimension or 1


def variant_label(algorithm: str, confidence: str) -> str:
    """``PF-XAB`` for the paper's widths, ``PF-XAB (bernstein)`` for the other bound."""
    label = ALGORITHM_LABELS.get(algorithm, algorithm)
    return label if confidence == DEFAULT_BOUND else f"{label} ({confidence})"


def bound_blind(runs: pd.DataFrame) -> set[str]:
    """Algorithms whose every run gave the same regret under every bound (the bound is not used: a baseline
    that never eliminates); their variants are one, shown without a bound."""
    blind = set()
    for algorithm, group in runs.groupby("algorithm"):
        by_bound = group.pivot_table(index=[*SETTING, "seed"], columns="confidence", values="regret")
        if by_bound.shape[1] > 1 and by_bound.nunique(axis=1).eq(1).all():
            blind.add(str(algorithm))
    return blind


def practice_map(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and sd of the final regret per setting and variant, with the ratio to the setting's best mean.

    An algorithm that gave the same regret under both bounds in every run (:func:`bound_blind`) is
    one variant, kept once (under the default bound) and labelled without a bound.
    """
    blind = bound_blind(runs)
    runs = runs[~(runs["algorithm"].isin(blind) & (runs["confidence"] != DEFAULT_BOUND))]
    table = (runs.groupby([*SETTING, *VARIANT], as_index=False)
             .agg(regret_mean=("regret", "mean"), regret_sd=("regret", "std"), seeds=("seed", "nunique")))
    table["regret_per_pull"] = table["regret_mean"] / table["horizon"]
    best = table.groupby(SETTING)["regret_mean"].transform("min")
    table["ratio_to_best"] = table["regret_mean"] / best
    table["variant"] = [variant_label(a, c) for a, c in zip(table["algorithm"], table["confidence"], strict=True)]
    table["family"], table["dimension"] = zip(*map(family_and_dimension, table["problem"]), strict=True)
    return table.sort_values([*SETTING, "regret_mean"], ignore_index=True)


def winners(table: pd.DataFrame) -> pd.DataFrame:
    """Each setting's best variant, its runner-up, and PF-XAB's and random search's ratios to the best."""
    rows = []
    for setting, group in table.groupby(SETTING, sort=True):
        group = group.sort_values("regret_mean")
        ratio = dict(zip(group["variant"], group["ratio_to_best"], strict=True))
        rows.append({**dict(zip(SETTING, setting, strict=True)), "family": group["family"].iloc[0],
                     "dimension": group["dimension"].iloc[0], "best": group["variant"].iloc[0],
                     "best_regret": group["regret_mean"].iloc[0], "runner_up": group["variant"].iloc[1],
                     "runner_up_ratio": group["ratio_to_best"].iloc[1],
                     "pf_xab_ratio": ratio.get(variant_label("pf-xab", DEFAULT_BOUND)),
                     "random_search_ratio": ratio.get(variant_label("random-search", DEFAULT_BOUND))})
    return pd.DataFrame(rows)


def markdown(best: pd.DataFrame) -> str:
    """The winners as a Markdown table (regret in the run's units; ratios to the best mean)."""
    lines = ["| problem | d | noise sigma | alpha | T | best (mean regret) | runner-up (x best) | PF-XAB (x best) | "
             "random search (x best) |", "|---|---|---|---|---|---|---|---|---|"]
    for row in best.sort_values(["family", "dimension", "noise_sigma", "alpha", "horizon"]).itertuples():
        lines.append(f"| {row.family} | {row.dimension} | {row.noise_sigma:g} | {row.alpha:g} | {row.horizon:.0e} | "
                     f"{row.best} ({row.best_regret:,.0f}) | {row.runner_up} (x{row.runner_up_ratio:.2f}) | "
                     f"x{row.pf_xab_ratio:.2f} | x{row.random_search_ratio:.2f} |")
    return "\n".join(lines)


def pyplot() -> ModuleType:
    """matplotlib's pyplot on the Agg backend (imported when a figure is drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Figure, stem: Path) -> list[Path]:
    """``fig`` as ``stem.png`` and ``stem.pdf`` (each written whole), closed; the paths."""
    written = []
    for suffix in (".png", ".pdf"):
        path = stem.with_suffix(suffix)
        with atomic_file(path) as tmp:
            fig.savefig(tmp, dpi=100, format=suffix[1:])
        written.append(path)
    pyplot().close(fig)
    return written


def save_with_shared_legend(fig: Figure, axes: Any, stem: Path, columns: int) -> list[Path]:
    """``fig`` with the first panel's legend below every panel (at most ``columns`` a row), saved by
    :func:`save_figure`: the map's grids of panels all share their lines."""
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), columns), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return save_figure(fig, stem)


def winners_figure(best: pd.DataFrame, stem: Path, ratio: str = "pf_xab_ratio",
                   ratio_label: str = "PF-XAB's regret / the winner's",
                   rows: list[tuple[str, float]] | None = None) -> list[Path]:
    """Where each variant wins: a panel per (family, noise) row and alpha column; horizon across, dimension up.

    Each cell's text is its ``ratio`` column (what ``ratio_label`` says); ``rows`` orders the panels' rows
    (default: sorted)."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    plt = pyplot()
    variants = sorted(best["best"].unique())
    code = {v: i for i, v in enumerate(variants)}
    palette = [plt.get_cmap("tab10")(i % 10) for i in range(len(variants))]
    rows = rows if rows is not None else sorted(best.groupby(["family", "noise_sigma"]).groups)
    alphas, horizons = sorted(best["alpha"].unique()), sorted(best["horizon"].unique())
    dimensions = sorted(best["dimension"].unique())
    fig, axes = plt.subplots(len(rows), len(alphas), figsize=(3.3 * len(alphas), 2.5 * len(rows)), squeeze=False)
    for r, (family, noise) in enumerate(rows):
        for c, alpha in enumerate(alphas):
            ax = axes[r][c]
            panel = best[(best["family"] == family) & (best["noise_sigma"] == noise) & (best["alpha"] == alpha)]
            grid = panel.pivot(index="dimension", columns="horizon", values="best").reindex(
                index=dimensions, columns=horizons)
            text = panel.pivot(index="dimension", columns="horizon", values=ratio).reindex(
                index=dimensions, columns=horizons)
            ax.imshow(grid.apply(lambda column: column.map(code)).to_numpy(dtype=float), origin="lower",
                      cmap=ListedColormap(palette), vmin=-0.5, vmax=len(variants) - 0.5, aspect="auto")
            for i in range(len(dimensions)):
                for j in range(len(horizons)):
                    if pd.notna(text.iat[i, j]):  # a family not run at this dimension and horizon: left blank
                        ax.text(j, i, f"x{text.iat[i, j]:.1f}", ha="center", va="center", fontsize=7)
            ax.set_xticks(range(len(horizons)), [_horizon_label(h) for h in horizons], fontsize=7)
            ax.set_yticks(range(len(dimensions)), [str(d) for d in dimensions], fontsize=7)
            ax.set_title(f"{family}, sigma {noise:g}, alpha {alpha:g}", fontsize=9)
            if c == 0:
                ax.set_ylabel("dimension d")
            if r == len(rows) - 1:
                ax.set_xlabel("horizon T")
    handles = [Patch(color=palette[code[v]], label=v) for v in variants]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 4), fontsize=8, frameon=False,
               title=f"least mean regret (cell text: {ratio_label})", title_fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return save_figure(fig, stem)


def _horizon_label(horizon: float) -> str:
    """``1e4`` from 10,000 on where that is exact (the practice map's horizons), else the number (``200``)."""
    text = f"{horizon:.0e}".replace("+0", "")
    return text if horizon >= 1e4 and float(text) == horizon else f"{horizon:,.0f}"


def curves_figure(table: pd.DataFrame, stem: Path) -> list[Path]:
    """Regret per pull against the horizon for the 1-D problems: a panel per (problem, noise) row and alpha column."""
    plt = pyplot()
    table = table[table["dimension"] == 1]
    rows = sorted(table.groupby(["problem", "noise_sigma"]).groups)
    alphas = sorted(table["alpha"].unique())
    variants = sorted(table["variant"].unique())
    colours = {v: plt.get_cmap("tab10")(i % 10) for i, v in enumerate(variants)}
    fig, axes = plt.subplots(len(rows), len(alphas), figsize=(3.4 * len(alphas), 2.6 * len(rows)),
                             sharex=True, squeeze=False)
    for r, (problem, noise) in enumerate(rows):
        for c, alpha in enumerate(alphas):
            ax = axes[r][c]
            panel = table[(table["problem"] == problem) & (table["noise_sigma"] == noise) & (table["alpha"] == alpha)]
            for variant, line in panel.groupby("variant"):
                line = line.sort_values("horizon")
                ax.plot(line["horizon"], line["regret_per_pull"], marker="o", markersize=3, label=variant,
                        color=colours[variant], linestyle="-" if line["confidence"].iloc[0] == DEFAULT_BOUND else "--")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{problem}, sigma {noise:g}, alpha {alpha:g}", fontsize=9)
            ax.grid(True, which="major", alpha=0.3)
            if c == 0:
                ax.set_ylabel("regret / T (sum of M clients)")
            if r == len(rows) - 1:
                ax.set_xlabel("horizon T")
    return save_with_shared_legend(fig, axes, stem, columns=4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pfxab_flower.simulations.reports.practice_map",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("directory", nargs="+",
                        help="finished sweeps of simulations/configs/practice.toml (and practice_smooth.toml, "
                             "practice_landmine.toml)")
    parser.add_argument("--out", default=None, help="where to write the map (default: the first DIRECTORY-map)")
    args = parser.parse_args(argv)
    frames = []
    for directory in args.directory:
        try:
            _, frame, _ = load_sweep(directory)
        except ConfigError as exc:  # not a finished sweep: one line, before any work
            parser.exit(2, f"{parser.prog}: error: {exc}\n")
        missing = [c for c in [*SETTING, *VARIANT, "seed", "regret"] if c not in frame.columns]
        if missing:
            parser.error(f"{directory} has no column {missing[0]!r}; allowed: a sweep of practice.toml's grid")
        frames.append(frame)
    runs = pd.concat(frames, ignore_index=True)
    out = Path(args.out or f"{str(args.directory[0]).rstrip('/')}-map")
    out.mkdir(parents=True, exist_ok=True)
    table = practice_map(runs)
    best = winners(table)
    for name, frame in (("practice_map.csv", table), ("practice_winners.csv", best)):
        with atomic_file(out / name) as tmp:
            frame.to_csv(tmp, index=False)
    for path in [*winners_figure(best, out / "practice"), *curves_figure(table, out / "practice_curves")]:
        print(f"wrote {path}", file=sys.stderr)
    print(markdown(best))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
