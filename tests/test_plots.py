"""Figure 3 (rewards against alpha): the paper's trends at a small scale, its references, its plot and table;
and a comparison's figure and table (``pfxab compare --out D && pfxab plot D && pfxab report D``).

Scale: PF-XAB's rewards at alpha = 0 and alpha = 1 were measured on Garland with
M = 10 for T from 5e3 to 2e6 (3 seeds each). Below T = 1.5e5 the direction of
the local reward flips with T (it fell at T = 2e4 and 1e5: there are too few
phases for the partition to separate the clients' optima); from T = 1.5e5 to
2e6 it held at every T tried. The test uses T = 3e5, inside that range.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pfxab_flower.formatting import format_mean_sd
from pfxab_flower.simulations.cli.main import main
from pfxab_flower.studies.comparison import MANIFEST, load_comparison
from tests.conftest import CHEAP_ALGORITHMS_FLAG, cli_error_line

FIGURE3_SMALL = """
[experiment]
name = "figure3-small"
kind = "rewards"
title = "PF-XAB on Garland, small"

[fixed]
problem = "garland"
algorithm = "pf-xab"
num_clients = 10
horizon = 300000

[grid]
alpha = [0.0, 1.0]
seed = [0, 1]
"""


@pytest.fixture(scope="module")
def figure3_small(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("figure3")
    config, out = root / "figure3-small.toml", root / "out"
    config.write_text(FIGURE3_SMALL)
    assert main(["sweep", str(config), "--out", str(out), "--no-progress", "--workers", "2"]) == 0
    return out


def test_rewards_move_as_the_paper_reports_from_alpha_0_to_alpha_1(figure3_small):
    runs = pd.read_parquet(figure3_small / "runs.parquet")
    means = runs.groupby("alpha")[["mean_reward_personalised", "mean_reward_global", "mean_reward_local"]].mean()
    start, end = means.loc[0.0], means.loc[1.0]
    assert end["mean_reward_personalised"] > start["mean_reward_personalised"]
    assert end["mean_reward_local"] > start["mean_reward_local"]
    assert end["mean_reward_global"] < start["mean_reward_global"]


def test_reference_values_bound_what_any_policy_earns(figure3_small):
    runs = pd.read_parquet(figure3_small / "runs.parquet")
    best_local, best_global = runs["best_local"].iloc[0], runs["best_global"].iloc[0]
    assert runs["best_local"].nunique() == 1 and runs["best_global"].nunique() == 1
    assert best_local > best_global  # Garland is built so that the local optima differ
    assert (runs["mean_reward_local"] <= best_local).all()
    assert (runs["mean_reward_global"] <= best_global).all()
    assert (runs["mean_reward_personalised"] <= runs["best_personalised"]).all()
    # the personalised optimum is the global one at alpha = 0 and the local ones at alpha = 1
    by_alpha = runs.groupby("alpha")["best_personalised"].first()
    assert by_alpha[0.0] == pytest.approx(best_global) and by_alpha[1.0] == pytest.approx(best_local)
    # at alpha = 0 every client plays the same point, so its local and global rewards coincide
    zero = runs[runs["alpha"] == 0.0]
    assert zero["mean_reward_local"].to_numpy() == pytest.approx(zero["mean_reward_global"].to_numpy())


def test_figure3_plot_and_table(figure3_small, tmp_path, capsys):
    png = tmp_path / "figure3.png"
    assert main(["plot", str(figure3_small), "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    capsys.readouterr()
    assert main(["report", str(figure3_small)]) == 0
    table = capsys.readouterr().out
    runs = pd.read_parquet(figure3_small / "runs.parquet")
    assert "| α | personalised | global | local | best personalised |" in table
    assert f"best local = {runs['best_local'].iloc[0]:.4f}" in table
    rows = [line for line in table.splitlines() if line.startswith(("| 0 |", "| 1 |"))]
    assert len(rows) == 2
    local_at_1 = runs.loc[runs["alpha"] == 1.0, "mean_reward_local"].mean()
    assert rows[1].split(" | ")[3].startswith(f"{local_at_1:.4f} ± ")


# --- a comparison directory -------------------------------------------------------------------------------------

COMPARE_ARGS = ["compare", "--problem", "garland", "--num-clients", "3", "--alpha", "0.5", "--horizon", "30000",
                "--seeds", "0,1", "--no-progress", *CHEAP_ALGORITHMS_FLAG]


@pytest.fixture(scope="module")
def comparison_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("compare") / "D"
    assert main([*COMPARE_ARGS, "--out", str(out)]) == 0
    return out


def test_compare_then_plot_then_report(comparison_dir, tmp_path, capsys):
    capsys.readouterr()
    png, pdf = tmp_path / "D.png", tmp_path / "D.pdf"
    assert main(["plot", str(comparison_dir), "--out", str(png)]) == 0
    assert capsys.readouterr().out == f"wrote {png}\n"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert main(["plot", str(comparison_dir), "--out", str(pdf)]) == 0
    assert pdf.read_bytes()[:5] == b"%PDF-"
    capsys.readouterr()
    assert main(["report", str(comparison_dir)]) == 0
    report = capsys.readouterr().out
    comparison = load_comparison(comparison_dir)
    runs = comparison.runs
    assert report.startswith("**garland: M=3 alpha=0.5 T=30000") and "seeds=0,1" in report.splitlines()[0]
    assert "| algorithm | cumulative regret | simple regret | evaluations | phases |" in report
    means = runs.groupby("algorithm")["regret"].mean()
    winner = means.idxmin()
    for algorithm, group in runs.groupby("algorithm"):
        cell = format_mean_sd(group["regret"].mean(), group["regret"].std(ddof=1))
        simple = format_mean_sd(group["simple_regret"].mean(), group["simple_regret"].std(ddof=1))
        name, cell = (f"**{algorithm}**", f"**{cell}**") if algorithm == winner else (algorithm, cell)
        row = f"| {name} | {cell} | {simple} |"
        assert row in report, row
    last = report.strip().splitlines()[-1]
    assert last.startswith("Lowest mean regret: **") and last.endswith(" of 2 seeds.")
    others = means.drop(winner)
    assert f"has {others.min() / means[winner]:.2f}x as much" in last


def test_the_figure_draws_what_the_tables_hold(comparison_dir):
    """The bars are the mean regrets (cumulative, then simple), the dots every seed's, the curves end at the mean
    final regret."""
    from matplotlib.collections import PathCollection

    from pfxab_flower.algorithms.registry import label as algorithm_label
    from pfxab_flower.simulations.reports.plots import plot_comparison

    comparison = load_comparison(comparison_dir)
    fig = plot_comparison(comparison)
    try:
        bars_ax, simple_ax, curves_ax = fig.axes
        for ax, metric in ((bars_ax, "regret"), (simple_ax, "simple_regret")):
            heights = [patch.get_height() for patch in ax.patches]
            assert heights == pytest.approx(list(comparison.summary[f"{metric}_mean"]))
            dots = sorted(y for collection in ax.collections if isinstance(collection, PathCollection)
                          for _, y in collection.get_offsets())
            assert dots == pytest.approx(sorted(comparison.runs[metric]))
        assert comparison.runs["simple_regret"].between(0, 1).all()  # Garland's values are in [0, 1]
        assert curves_ax.get_xscale() == "log"
        lines = {line.get_label(): line for line in curves_ax.get_lines()}
        labels = {name: algorithm_label(name) for name in comparison.summary["algorithm"]}
        assert set(lines) == set(labels.values()) and {"PF-XAB", "Fed-PNE", "PF-PNE"} <= set(lines)
        for record in comparison.summary.to_dict("records"):
            assert lines[labels[record["algorithm"]]].get_ydata()[-1] == pytest.approx(record["regret_mean"])
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_plot_without_out_draws_dir_png_beside_the_directory(comparison_dir, capsys):
    capsys.readouterr()
    figure = comparison_dir.with_name(comparison_dir.name + ".png")
    assert main(["plot", str(comparison_dir)]) == 0
    assert capsys.readouterr().out == f"wrote {figure}\n"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["plot", str(comparison_dir)]) == 0  # its own figure: drawn again
    figure.unlink()


def test_the_algorithm_names_under_the_bars_do_not_overlap(comparison_dir):
    """Every registered algorithm's label (Local-Only, Random-Search, PF-XAB-Adaptive, ...) stands clear of the next."""
    import matplotlib.pyplot as plt

    from pfxab_flower.simulations.reports.plots import plot_comparison

    comparison = load_comparison(comparison_dir)
    fig = plot_comparison(comparison)
    try:
        renderer = fig.canvas.get_renderer()
        labels = [label for label in fig.axes[0].get_xticklabels() if label.get_text()]
        assert len(labels) == len(comparison.summary) >= 6
        for label, after in itertools.pairwise(labels):
            angle = np.radians(label.get_rotation())
            if angle == 0:
                assert not label.get_window_extent(renderer).overlaps(after.get_window_extent(renderer))
                continue
            # parallel text boxes anchored at one height: apart when their baselines are a text's height apart
            height = renderer.get_text_width_height_descent(label.get_text(), label.get_fontproperties(), False)[1]
            spacing = after.get_window_extent(renderer).x1 - label.get_window_extent(renderer).x1
            assert spacing * np.sin(angle) >= height, (label.get_text(), after.get_text())
        assert all(fig.bbox.contains(*label.get_window_extent(renderer).p0) for label in labels)  # inside the figure
    finally:
        plt.close(fig)


@pytest.mark.parametrize("command", ["plot", "report"])
def test_a_directory_that_is_neither_a_sweep_nor_a_comparison_is_one_line(tmp_path, command):
    (tmp_path / "stuff").mkdir()
    (tmp_path / "stuff" / "notes.txt").write_text("x")
    extra = ["--out", str(tmp_path / "f.png")] if command == "plot" else []
    line = cli_error_line(command, str(tmp_path / "stuff"), *extra)
    assert line == (f"pfxab {command}: error: dir={str(tmp_path / 'stuff')!r} is invalid (neither config.toml nor "
                    "comparison.json in it); allowed: a finished sweep directory (`pfxab sweep --out`, with "
                    "config.toml) or a comparison directory (`pfxab compare --out`, with comparison.json)")
    assert "no such directory" in cli_error_line(command, str(tmp_path / "missing"), *extra)
    assert not (tmp_path / "f.png").exists()


def test_a_damaged_comparison_is_one_line(comparison_dir, tmp_path):
    import shutil

    cases = {
        "old": (lambda d: (d / MANIFEST).unlink(), "a comparison written before comparison.json existed"),
        "manifest": (lambda d: (d / MANIFEST).write_text("{not json"), "comparison.json is unreadable"),
        "setting": (lambda d: (d / MANIFEST).write_text(json.dumps(
            {**json.loads((d / MANIFEST).read_text()), "setting": {}})), "comparison.json lacks setting 'problem'"),
        "seeds": (lambda d: (d / MANIFEST).write_text(json.dumps(
            {**json.loads((d / MANIFEST).read_text()), "seeds": [0, 1, 2]})), "its tables do not hold the runs"),
        "curves": (lambda d: (d / "curves.parquet").write_bytes(b"PAR1 broken"), "curves.parquet is unreadable"),
    }
    for name, (damage, fragment) in cases.items():
        copy = tmp_path / name
        shutil.copytree(comparison_dir, copy)
        damage(copy)
        line = cli_error_line("report", str(copy))
        assert line.startswith(f"pfxab report: error: dir={str(copy)!r} is invalid (") and fragment in line, line
