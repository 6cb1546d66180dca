"""PF-XAB's regret under ``bernstein`` over ``hoeffding`` as the horizon varies: docs/comparison.md.

The comparison at ``T = 2e6`` (``docs/confidence_comparison.py``) has one setting where
``bernstein`` loses. This script asks whether that is a property of the option or of
where ``T = 2e6`` falls among the phase boundaries: it runs PF-XAB under both options
on Garland and DoubleSine at alpha 0.1, 0.5, 0.9 (M = 10, seeds 0-4, the project's
defaults, nothing set per setting) for 21 horizons from 1e5 to 1e7 (log-spaced), and
writes every run to ``OUT/runs.parquet``, the summary table to ``OUT/tables.md`` and
the figure (regret ratio against ``T``) to ``OUT/confidence_horizons.{png,pdf}``.

    python docs/confidence_horizons.py OUT [--workers 2]

About 2 minutes on 2 cores.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the clone's code: the numbers of its docs
if not Path(sys.path[0], "pfxab_flower", "__init__.py").is_file():
    print(f"{Path(__file__).name}: error: {sys.path[0]} is not a clone of pfxab-flower; allowed: run this script from "
          "the docs/ folder of a clone (it is not installed with the package)", file=sys.stderr)
    raise SystemExit(2)

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from confidence_comparison import parse_arguments  # docs/, this script's directory
from tqdm import tqdm

from pfxab_flower.schema.catalogue import CONFIDENCES
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.storage.outputs import write_files_atomically
from pfxab_flower.studies.comparison import compare

SEEDS = list(range(5))
PROBLEMS = ("garland", "doublesine")
ALPHAS = (0.1, 0.5, 0.9)
HORIZONS = [int(round(t, -3)) for t in np.geomspace(1e5, 1e7, 21)]


def measure(workers: int) -> pd.DataFrame:
    """Every PF-XAB run of the study, one row each."""
    frames = []
    settings = [(p, a, t, c) for p in PROBLEMS for a in ALPHAS for t in HORIZONS for c in CONFIDENCES]
    for problem, alpha, horizon, confidence in tqdm(settings, desc="horizons", unit="setting"):
        base = RunConfig(problem=problem, alpha=alpha, num_clients=10, horizon=horizon, confidence=confidence)
        frames.append(compare(base, ["pf-xab"], SEEDS, workers=workers, progress=False).runs)
    return pd.concat(frames, ignore_index=True)


def ratios(runs: pd.DataFrame) -> pd.DataFrame:
    """Per problem, alpha and horizon: mean regret and phases under each option, and the regret ratio."""
    keys = ["problem", "alpha", "horizon"]
    means = runs.groupby([*keys, "confidence"], sort=False)[["regret", "phases"]].mean().unstack("confidence")
    table = pd.DataFrame({
        "regret_hoeffding": means[("regret", "hoeffding")],
        "regret_bernstein": means[("regret", "bernstein")],
        "phases_hoeffding": means[("phases", "hoeffding")],
        "phases_bernstein": means[("phases", "bernstein")],
    }).reset_index()
    table["ratio"] = table["regret_bernstein"] / table["regret_hoeffding"]
    return table


def summary(table: pd.DataFrame) -> str:
    """The Markdown table: per setting, how often ``bernstein`` wins and the spread of the ratio."""
    lines = ["| problem | alpha | horizons where bernstein wins | median ratio | smallest | largest (at T) |",
             "|---|---|---|---|---|---|"]
    for (problem, alpha), group in table.groupby(["problem", "alpha"], sort=False):
        worst = group.loc[group["ratio"].idxmax()]
        lines.append(f"| {problem} | {alpha:g} | {(group.ratio < 1).sum()} of {len(group)} "
                     f"| {group.ratio.median():.3f} | {group.ratio.min():.3f} "
                     f"| {worst.ratio:.3f} ({worst.horizon:,.0f}) |")
    return "\n".join(lines)


def figure(table: pd.DataFrame) -> plt.Figure:
    """Regret ratio against the horizon, one panel per problem, one line per alpha."""
    fig, axes = plt.subplots(1, len(PROBLEMS), figsize=(9.6, 3.6), sharey=True)
    for ax, problem in zip(axes, PROBLEMS, strict=True):
        for alpha in ALPHAS:
            rows = table[(table.problem == problem) & (table.alpha == alpha)]
            ax.plot(rows.horizon, rows.ratio, marker="o", markersize=3, label=f"alpha = {alpha:g}")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axvline(2e6, color="grey", linestyle=":", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_title(problem.capitalize())
        ax.set_xlabel("horizon T (pulls per client)")
    axes[0].set_ylabel("PF-XAB regret, bernstein / hoeffding")
    axes[0].legend(frameon=False)
    fig.tight_layout()
    return fig


def figure_bytes(fig: plt.Figure, fmt: str) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=150)
    return buffer.getvalue()


def main() -> None:
    args = parse_arguments(__doc__)
    runs = measure(args.workers)
    table = ratios(runs)
    text = summary(table)
    fig = figure(table)
    write_files_atomically(args.out, {
        "runs.parquet": runs.to_parquet(None, index=False),
        "confidence_horizons.png": figure_bytes(fig, "png"),
        "confidence_horizons.pdf": figure_bytes(fig, "pdf"),
        "tables.md": text,
    })
    print(text)


if __name__ == "__main__":
    main()
