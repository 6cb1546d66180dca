"""The benchmark's measuring tools: phase stamps become the reported figures; memory is sampled."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from benchmarks.memory import PeakMemory
from benchmarks.timeline import Timeline, server_timeline
from pfxab_flower.algorithms.phased import ServerMachine
from pfxab_flower.running.engine import run_config
from pfxab_flower.schema.run_config import RunConfig


def test_timeline_figures_split_startup_first_phase_and_later_phases() -> None:
    timeline = Timeline(started=10.0, first_instruction=12.0, phase_ends=[15.0, 15.5, 16.5], finished=17.0,
                        returned=19.0)
    figures = timeline.figures()
    assert figures["startup_s"] == pytest.approx(2.0)
    assert figures["first_phase_s"] == pytest.approx(3.0)
    assert figures["per_phase_s"] == pytest.approx(0.75)  # mean of 0.5 and 1.0
    assert figures["max_phase_s"] == pytest.approx(1.0)
    assert figures["final_round_s"] == pytest.approx(0.5)
    assert figures["shutdown_s"] == pytest.approx(2.0)
    assert figures["total_s"] == pytest.approx(9.0)
    assert Timeline(started=0.0).figures() == {"completed": False}


def test_server_timeline_stamps_every_phase_and_restores_the_machine() -> None:
    originals = (ServerMachine.next_instruction, ServerMachine.collect, ServerMachine.finish)
    with server_timeline() as timeline:
        result = run_config(RunConfig(problem="garland", num_clients=3, horizon=10_000, seed=0))
    assert len(timeline.phase_ends) == result.summary["phases"]
    assert timeline.figures()["total_s"] > 0
    assert (ServerMachine.next_instruction, ServerMachine.collect, ServerMachine.finish) == originals


def test_peak_memory_counts_this_process_and_marked_ones() -> None:
    with PeakMemory(marker="") as memory:
        pass
    assert memory.peak_processes == 1
    assert memory.peak_rss_mib > 1
    if sys.platform == "linux":  # PSS is Linux's
        assert 1 < memory.peak_pss_mib <= memory.peak_rss_mib
    marker = f"pfxab-test-{uuid.uuid4()}"
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                             env={**os.environ, "PFXAB_BENCH_MARKER": marker})
    try:
        with PeakMemory(marker=marker) as marked:
            pass
    finally:
        child.communicate(b"")
    assert marked.peak_processes == 2  # this process and the child found by the marker in its environment
    assert marked.peak_rss_mib > memory.peak_rss_mib


@pytest.mark.parametrize("argv, written", [(["--quick", "--only", "1"], "results-quick.json"),
                                           (["--only", "1"], "results-sections-1.json")])
def test_a_quick_or_partial_run_never_replaces_the_tracked_figures(monkeypatch, tmp_path, argv, written) -> None:
    """``python -m benchmarks --quick`` (or ``--only``) writes a file of its own, not ``benchmarks/results.json``."""
    import json

    from benchmarks import run as benchmarks

    monkeypatch.setattr(benchmarks, "HERE", tmp_path)  # stands for benchmarks/
    tracked = tmp_path / "results.json"
    tracked.write_text('{"figures": "of the full run, quoted by docs/performance.md"}\n')
    monkeypatch.setattr(benchmarks, "section_inprocess", lambda quick: [{"case": "in-process", "ns_per_pull": 1.0}])
    assert benchmarks.main(argv, no_loopback=None) == 0
    assert tracked.read_text() == '{"figures": "of the full run, quoted by docs/performance.md"}\n'
    assert json.loads((tmp_path / written).read_text())["rows"] == [{"case": "in-process", "ns_per_pull": 1.0}]


def test_the_cluster_benchmarks_sweep_grid_is_written_as_toml_the_sweep_reads(tmp_path) -> None:
    """Section 7's grid is written with tomli-w and read back by ``pfxab sweep``'s loader as the same table."""
    import tomllib

    import tomli_w

    from benchmarks.cluster import sweep_grid
    from pfxab_flower.simulations.experiments.experiment import load_experiment

    grid = sweep_grid(2000, [0, 1])
    path = tmp_path / "grid.toml"
    path.write_text(tomli_w.dumps(grid), encoding="utf-8")
    assert tomllib.loads(path.read_text(encoding="utf-8")) == grid
    experiment = load_experiment(path)
    assert (experiment.name, len(experiment.configs)) == ("throughput", 3 * 3 * 2)
    assert {(c.algorithm, c.horizon, c.num_clients) for c in experiment.configs} == {
        (algorithm, 2000, 10) for algorithm in ("pf-xab", "fed-pne", "pf-pne")}
