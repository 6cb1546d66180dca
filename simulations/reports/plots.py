"""The paper's figures from a sweep or comparison directory (matplotlib, Agg backend: no display needed).

Regret sweeps (figures 1, 2, 4) and rewards sweeps (figure 3) as in docs/results.md; a comparison as
its final regrets (mean, sd and every seed) beside its regret curves. Each algorithm keeps its
colour in every figure (:func:`algorithm_colour`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from pfxab_flower.errors import spelled
from pfxab_flower.schema.catalogue import algorithm_names
from pfxab_flower.simulations.experiments.experiment import ALGORITHM_LABELS, Experiment, series_keys, series_label
from pfxab_flower.simulations.experiments.sweep_tables import load_sweep
from pfxab_flower.simulations.reports.result_dirs import result_kind
from pfxab_flower.storage.outputs import OutputError, atomic_file, check_output_file
from pfxab_flower.studies.calibration import Calibration
from pfxab_flower.studies.comparison import Comparison, load_comparison

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


def algorithm_colour(algorithm: str) -> str:
    """The colour of ``algorithm`` in every figure: its place in the one list of algorithms."""
    names = algorithm_names()
    place = names.index(algorithm) if algorithm in names else len(names)
    return f"C{place % 10}"


def _groups(frame: pd.DataFrame, keys: list[str]) -> Iterator[tuple[tuple[Any, ...], pd.DataFrame]]:
    if not keys:
        yield (), frame
        return
    for values, group in frame.groupby(keys, sort=False):
        yield (values if isinstance(values, tuple) else (values,)), group


def _mean_with_band(ax: Axes, curves: pd.DataFrame, label: str, log_x: bool, colour: str | None = None) -> None:
    """One line: the mean over seeds of ``curves`` (t, seed, regret) with a +-1 sd band (none for one seed)."""
    table = curves.pivot_table(index="t", columns="seed", values="regret")
    mean, sd = table.mean(axis=1), table.std(axis=1, ddof=1).fillna(0.0)
    t = table.index.to_numpy()
    if log_x:
        keep = t > 0
        t, mean, sd = t[keep], mean[keep], sd[keep]
    (line,) = ax.plot(t, mean, lw=1.8, label=label, color=colour)
    ax.fill_between(t, mean - sd, mean + sd, color=line.get_color(), alpha=0.25, lw=0)


def plot_regret(experiment: Experiment, curves: pd.DataFrame, runs: pd.DataFrame, log_x: bool = False) -> Figure:
    """One panel per alpha; mean cumulative regret over seeds with a +-1 sd band per line."""
    keys = series_keys(experiment)
    alphas = sorted(curves["alpha"].unique())
    fig, axes = plt.subplots(1, len(alphas), figsize=(max(6.4, 4.6 * len(alphas) + 0.4), 4.0), squeeze=False)
    clients = int(runs["num_clients"].iloc[0])
    seeds = runs["seed"].nunique()
    for ax, alpha in zip(axes[0], alphas, strict=True):
        panel = curves[curves["alpha"] == alpha]
        for values, group in _groups(panel, keys):
            _mean_with_band(ax, group, series_label(experiment, values), log_x)
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


def plot_rewards(experiment: Experiment, runs: pd.DataFrame) -> Figure:
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


def _bars_with_seeds(ax: Axes, comparison: Comparison, metric: str) -> None:
    """One bar per algorithm: the mean of ``metric`` over seeds with a +-1 sd error bar, and a dot per seed."""
    seeds = len(comparison.seeds)
    offsets = np.linspace(-0.2, 0.2, seeds) if seeds > 1 else np.zeros(1)  # the seeds' dots, side by side
    for place, record in enumerate(comparison.summary.to_dict("records")):
        algorithm = record["algorithm"]
        colour = algorithm_colour(algorithm)
        sd = record[f"{metric}_std"] if seeds > 1 else None
        ax.bar(place, record[f"{metric}_mean"], width=0.6, color=colour, alpha=0.45, yerr=sd, capsize=6,
               edgecolor=colour, error_kw={"lw": 1.4})
        runs = comparison.runs[comparison.runs["algorithm"] == algorithm].set_index("seed")
        values = runs.loc[list(comparison.seeds), metric].to_numpy()
        ax.scatter(place + offsets, values, s=16, color=colour, edgecolor="black", linewidth=0.5, zorder=3)
    names = [ALGORITHM_LABELS.get(a, a) for a in comparison.summary["algorithm"]]
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", rotation_mode="anchor")  # long names clear
    ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    ax.grid(alpha=0.3, axis="y")


def plot_comparison(comparison: Comparison) -> Figure:
    """Final cumulative regret and the final points' simple regret per algorithm (mean, sd, every seed) beside the
    regret curves (mean +- 1 sd, log t); no simple-regret panel where it is not known (an unscored run)."""
    simple = bool(np.isfinite(comparison.runs["simple_regret"].to_numpy(dtype=float)).any())
    ratios = [1, 1, 1.5] if simple else [1, 1.5]
    fig, axes = plt.subplots(1, len(ratios), figsize=(4.4 * sum(ratios), 4.2), gridspec_kw={"width_ratios": ratios})
    bars, curves = axes[0], axes[-1]
    setting, seeds = comparison.setting, len(comparison.seeds)
    what = "mean ± 1 sd; dots: seeds" if seeds > 1 else "1 seed"
    _bars_with_seeds(bars, comparison, "regret")
    bars.set_ylabel(f"final cumulative regret (sum over M = {setting['num_clients']} clients)")
    bars.set_title(f"cumulative regret: {what}", pad=14)
    if simple:
        _bars_with_seeds(axes[1], comparison, "simple_regret")
        axes[1].set_ylabel("simple regret of the final points (mean over clients)")
        axes[1].set_title(f"simple regret: {what}", pad=14)
    for algorithm in comparison.summary["algorithm"]:
        _mean_with_band(curves, comparison.curves[comparison.curves["algorithm"] == algorithm],
                        ALGORITHM_LABELS.get(algorithm, algorithm), log_x=True, colour=algorithm_colour(algorithm))
    curves.set_xscale("log")
    curves.set_xlabel("t (pulls per client)")
    curves.set_ylabel("cumulative regret")
    curves.set_title("regret curves: mean ± 1 sd over seeds" if seeds > 1 else "regret curves (1 seed)", pad=14)
    curves.legend(loc="upper left", frameon=True)
    curves.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    curves.grid(alpha=0.3)
    fig.suptitle(f"{setting['problem']}: M = {setting['num_clients']}, α = {setting['alpha']:g}, "
                 f"T = {setting['horizon']:,}, {seeds} seed{'s' if seeds > 1 else ''}")
    fig.tight_layout()
    return fig


#: Written into every figure's metadata (PNG ``Software``, PDF ``Creator``): how ``pfxab plot`` knows a file
#: at ``--out`` is a figure of its own, which it may replace (any other file there is the user's, never replaced).
FIGURE_MARK = "pfxab plot (pfxab-flower)"
_MARK_KEY = {".png": "Software", ".pdf": "Creator"}
#: Larger than any figure this module draws: a bigger file is not one of ours (and is not read whole).
_MAX_FIGURE_BYTES = 64 << 20


def is_our_figure(path: Path) -> bool:
    """Whether ``path`` is a figure ``pfxab plot`` wrote (it carries :data:`FIGURE_MARK`)."""
    try:
        if path.stat().st_size > _MAX_FIGURE_BYTES:
            return False
        return FIGURE_MARK.encode() in path.read_bytes()
    except OSError:
        return False


def _save(fig: Figure, out: Path, name: str = "out") -> Path:
    """Write ``fig`` to ``out`` whole or not at all; a failure is one line naming the parameter ``name`` (its flag)."""
    suffix = out.suffix.lower()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(out, name) as tmp:  # an older figure stays whole if drawing or writing fails
            fig.savefig(tmp, dpi=150, format=suffix[1:], metadata={_MARK_KEY[suffix]: FIGURE_MARK})
    except OSError as exc:
        raise OutputError(f"{spelled(name)}={str(out)!r} could not be written ({exc.strerror or exc}); "
                          "allowed: a file in a writable directory") from None
    finally:
        plt.close(fig)
    return out


def _checked_out(out: str | Path) -> Path:
    """``out`` if a figure may be written there: a new file or a figure of ours (one line otherwise)."""
    return check_output_file(out, FORMATS, ours=is_our_figure)


def check_figure_path(out: str | Path, name: str = "out") -> Path:
    """``out`` if a figure may be written there (one line naming the flag ``name`` otherwise)."""
    return check_output_file(out, FORMATS, name=name, ours=is_our_figure)


def calibration_figure(calibration: Calibration) -> Figure:
    """The evidence of :func:`pfxab_flower.calibrate`: measured variation against depth, both models, the spans.

    Only what has a point to draw gets a line and a legend entry (a log axis cannot show a zero).
    """
    evidence = calibration.evidence
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    noisy = bool((evidence["standard_error"] > 0).any())
    positive = evidence["variation"] > 0
    for used, face, label in ((True, "C0", "measured variation, used in the fit"),
                              (False, "none", "measured variation, not above the noise (not used)")):
        rows = evidence[(evidence["used_in_fit"] == used) & positive]
        if rows.empty:
            continue
        error = rows["standard_error"] if noisy else None
        ax.errorbar(rows["depth"], rows["variation"], yerr=error, fmt="o", capsize=3, color="C0", mfc=face,
                    label=label + (" (± 1 standard error)" if noisy else ""))
    ax.plot(evidence["depth"], evidence["model"], "-", color="C1",
            label=f"calibrated model nu1 rho^h (nu1={calibration.nu1:.3g}, rho={calibration.rho:.3g})")
    ax.plot(evidence["depth"], evidence["default_model"], "--", color="C2", label="defaults' model (nu1=1, rho=0.5)")
    spans = evidence[evidence["span"] > 0]
    if not spans.empty:
        ax.plot(spans["depth"], spans["span"] / 3.0, ":", marker=".", color="C3",
                label="least cell span / 3 (a node below it can go)")
    ax.set_yscale("log")
    ax.set_xlabel("depth h (a cell's diameter halves every d depths)")
    ax.set_ylabel("shortfall from the best value in the cell")
    ax.set_title(f"pfxab calibrate: nu1={calibration.nu1:.3g}, rho={calibration.rho:.3g}; "
                 f"verdict: {calibration.verdict}", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def plot_calibration(calibration: Calibration, out: str | Path) -> Path:
    """Draw :func:`calibration_figure` into ``out`` (.png or .pdf); returns the path."""
    out = check_figure_path(out, "plot")
    return _save(calibration_figure(calibration), out, "plot")


def plot_sweep(sweep_dir: str | Path, out: str | Path, log_x: bool = False) -> Path:
    """Draw the figure of a finished sweep into ``out`` (.png or .pdf); returns the path."""
    out = _checked_out(out)
    experiment, runs, curves = load_sweep(sweep_dir)
    if experiment.kind == "rewards":
        fig = plot_rewards(experiment, runs)
    else:
        fig = plot_regret(experiment, curves, runs, log_x=log_x)
    return _save(fig, out)


def plot_result(result_dir: str | Path, out: str | Path, log_x: bool = False) -> Path:
    """Draw the figure of a finished sweep or comparison into ``out`` (.png or .pdf); returns the path.

    ``log_x`` is for a sweep's regret figure; a comparison's curves are always on a log t axis.
    """
    out = _checked_out(out)
    if result_kind(result_dir) == "comparison":
        return _save(plot_comparison(load_comparison(result_dir)), out)
    return plot_sweep(result_dir, out, log_x=log_x)
