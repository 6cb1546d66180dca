"""The paper's figures from a sweep directory (matplotlib, Agg backend: no display needed).

* ``kind = "regret"`` (figures 1, 2, 4): cumulative regret (summed over the M
  clients) against t, the mean over seeds with a shaded band of one standard
  deviation, one panel per alpha, one line per algorithm. The t axis is linear
  by default, as in the paper: the final regret, which is what the figures
  compare, and the slope of the last (longest) phase are read directly. A log
  axis (``log_x``) shows the early phases instead.
* ``kind = "rewards"`` (figure 3): the per-step average personalised, global and
  local reward against alpha (mean +- one sd over seeds), with the best-local and
  best-global values as horizontal reference lines and the best personalised value
  (what a learner playing each client's personalised optimum earns) as a dotted curve.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd

from pfxab_flower.errors import ConfigError
from pfxab_flower.outputs import OutputError, atomic_file
from pfxab_flower.simulations.experiment import Experiment, series_keys, series_label
from pfxab_flower.simulations.sweep import load_sweep

FORMATS = (".png", ".pdf")
#: Colours of the paper's figure 3 caption: personalised green, local red, global purple,
#: best local blue, best global yellow.
REWARD_STYLE = {
    "personalised": "tab:green",
    "local": "tab:red",
    "global": "tab:purple",
    "best_local": "tab:blue",
    "best_global": "goldenrod",
}
def _groups(frame: pd.DataFrame, keys: list[str]):
    if not keys:
        yield (), frame
        return
    for values, group in frame.groupby(keys, sort=False):
        yield (values if isinstance(values, tuple) else (values,)), group


def plot_regret(experiment: Experiment, curves: pd.DataFrame, runs: pd.DataFrame, log_x: bool = False):
    """One panel per alpha; mean cumulative regret over seeds with a +-1 sd band per line."""
    keys = series_keys(experiment)
    alphas = sorted(curves["alpha"].unique())
    fig, axes = plt.subplots(1, len(alphas), figsize=(max(6.4, 4.6 * len(alphas) + 0.4), 4.0), squeeze=False)
    clients = int(runs["clients"].iloc[0])
    seeds = runs["seed"].nunique()
    for ax, alpha in zip(axes[0], alphas, strict=True):
        panel = curves[curves["alpha"] == alpha]
        for values, group in _groups(panel, keys):
            table = group.pivot_table(index="t", columns="seed", values="regret")
            mean, sd = table.mean(axis=1), table.std(axis=1, ddof=1).fillna(0.0)
            t = table.index.to_numpy()
            if log_x:
                keep = t > 0
                t, mean, sd = t[keep], mean[keep], sd[keep]
            (line,) = ax.plot(t, mean, lw=1.8, label=series_label(experiment, values))
            ax.fill_between(t, mean - sd, mean + sd, color=line.get_color(), alpha=0.25, lw=0)
        ax.set_title(f"α = {alpha:g}")
        ax.set_xlabel("t (pulls per client)")
        ax.set_xscale("log" if log_x else "linear")
        ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
        if not log_x:
            ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"cumulative regret (sum over M = {clients} clients)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    axes[0][0].legend(handles, labels, loc="upper left", frameon=True)
    fig.suptitle(f"{experiment.title}" + ("" if seeds > 1 else " (1 seed)"))
    fig.tight_layout()
    return fig


def plot_rewards(experiment: Experiment, runs: pd.DataFrame):
    """Per-step average rewards against alpha, mean +- 1 sd over seeds, with reference lines."""
    fig, ax = plt.subplots(figsize=(8.2, 4.6))
    stats = runs.groupby("alpha").agg(
        **{f"{k}_{s}": (f"mean_reward_{k}", s) for k in ("personalised", "global", "local") for s in ("mean", "std")},
        best_personalised=("best_personalised", "mean"),
        best_local=("best_local", "mean"),
        best_global=("best_global", "mean"),
    ).fillna(0.0)
    alpha = stats.index.to_numpy()
    ax.axhline(stats["best_local"].iloc[0], color=REWARD_STYLE["best_local"], ls="--", lw=1.5, label="best local")
    ax.axhline(stats["best_global"].iloc[0], color=REWARD_STYLE["best_global"], ls="--", lw=1.5, label="best global")
    ax.plot(alpha, stats["best_personalised"], color=REWARD_STYLE["personalised"], ls=":", lw=1.5,
            label="best personalised")
    for kind in ("personalised", "local", "global"):
        mean, sd = stats[f"{kind}_mean"], stats[f"{kind}_std"]
        ax.plot(alpha, mean, marker="o", ms=4, lw=1.8, color=REWARD_STYLE[kind], label=kind)
        ax.fill_between(alpha, mean - sd, mean + sd, color=REWARD_STYLE[kind], alpha=0.25, lw=0)
    ax.set_xlabel("α (personalisation)")
    ax.set_ylabel("average per-step reward (mean over clients)")
    ax.set_title(experiment.title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=9)
    fig.tight_layout()
    return fig


def plot_sweep(sweep_dir: str | Path, out: str | Path, log_x: bool = False) -> Path:
    """Draw the figure of a finished sweep into ``out`` (.png or .pdf); returns the path."""
    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise ConfigError(f"out={str(out)!r} is invalid; allowed: a file name ending in {' or '.join(FORMATS)}")
    experiment, runs, curves = load_sweep(sweep_dir)
    if experiment.kind == "rewards":
        fig = plot_rewards(experiment, runs)
    else:
        fig = plot_regret(experiment, curves, runs, log_x=log_x)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(out) as tmp:  # an older figure stays whole if drawing or writing fails
            fig.savefig(tmp, dpi=150, format=out.suffix.lower()[1:])
    except OSError as exc:
        raise OutputError(f"out={str(out)!r} could not be written ({exc.strerror or exc}); "
                          "allowed: a file in a writable directory") from None
    finally:
        plt.close(fig)
    return out
