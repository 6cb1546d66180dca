"""The landmine objective, its evaluation cache, its estimated optimum and a small run.

On the small generated landmine-format file (``tests/landmine_files.py``): these check the
machinery, not the real data's numbers.
"""

from __future__ import annotations

import numpy as np
import pytest

from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.arms.partition import nodes_at_depth
from pfxab_flower.problems import landmine
from pfxab_flower.problems.landmine import DOMAIN, SvmEvaluator, cache_namespace, landmine_federation, svm_auc
from pfxab_flower.problems.landmine_data import ENV_VAR, URL_ENV_VAR, load_splits
from pfxab_flower.problems.landmine_table import ENV_VAR as TABLE_ENV_VAR
from pfxab_flower.running.engine import run, run_config
from pfxab_flower.schema.run_config import RunConfig
from pfxab_flower.storage import cache as cache_module
from pfxab_flower.storage.cache import EvaluationStore, cache_dir
from tests.landmine_files import NOWHERE, LandmineFile, accepting
from tests.patience import patient


@pytest.fixture(scope="module")
def splits(landmine_file: LandmineFile):
    with accepting(landmine_file):
        return load_splits((0, 15, 27), str(landmine_file.path))


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch, landmine_file: LandmineFile):
    """Every test gets an empty cache directory (never the user's), the generated data and no download.

    The shipped reward table is for the real data, so it is switched off: every reward is a fit.
    """
    monkeypatch.setenv("PFXAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(ENV_VAR, str(landmine_file.path))
    monkeypatch.setenv(URL_ENV_VAR, NOWHERE)
    monkeypatch.setenv(TABLE_ENV_VAR, "none")
    with accepting(landmine_file):
        yield


def _points(n: int, seed: int = 0) -> np.ndarray:
    return DOMAIN.to_user(np.random.default_rng(seed).random((n, 2)))


def test_objective_is_deterministic_and_in_unit_interval(splits):
    fields, sha = splits
    points = _points(6)
    first = SvmEvaluator(fields, cache_namespace(sha), store=None, workers=1).evaluate_all(points)
    again = SvmEvaluator(fields, cache_namespace(sha), store=None, workers=1).evaluate_all(points)
    np.testing.assert_array_equal(first, again)
    assert first.shape == (3, 6)
    assert ((first >= 0.0) & (first <= 1.0)).all()
    direct = [svm_auc(fields[1], float(c), float(g)) for c, g in points]
    np.testing.assert_array_equal(first[1], direct)


def test_each_distinct_point_is_fit_once(splits):
    fields, sha = splits
    evaluator = SvmEvaluator(fields, cache_namespace(sha), store=None, workers=1)
    points = _points(4)
    repeated = np.vstack([points, points[::-1]])
    values = evaluator.evaluate(2, repeated)
    assert evaluator.fits == 4
    np.testing.assert_array_equal(values[:4], values[4:][::-1])
    evaluator.evaluate_all(points)
    assert evaluator.fits == 4 + 2 * 4  # only the other two fields were missing


def test_disk_cache_returns_the_fresh_values(splits):
    fields, sha = splits
    namespace = cache_namespace(sha)
    points = _points(5, seed=1)
    fresh = SvmEvaluator(fields, namespace, store=None, workers=1).evaluate_all(points)
    writer = SvmEvaluator(fields, namespace, store=EvaluationStore(), workers=1)
    writer.evaluate_all(points)
    assert cache_dir().joinpath(EvaluationStore().path.name).is_file()
    reader = SvmEvaluator(fields, namespace, store=EvaluationStore(), workers=1)
    np.testing.assert_array_equal(reader.evaluate_all(points), fresh)
    assert reader.fits == 0
    other = SvmEvaluator(fields, namespace + "/other-version", store=EvaluationStore(), workers=1)
    other.evaluate(0, points[:1])
    assert other.fits == 1  # a different namespace (data, split, version) never reuses values


def test_values_another_process_stored_since_the_load_are_taken_not_fit_again(splits, monkeypatch):
    """Parallel sweep workers each load the store once; what one fits later, the other must not fit again."""
    fields, sha = splits
    namespace = cache_namespace(sha)
    monkeypatch.setattr(cache_module, "_POINTS_PER_QUERY", 3)  # the lookup's slices, exercised
    points = _points(7, seed=11)
    early = SvmEvaluator(fields, namespace, store=EvaluationStore(), workers=1)  # loaded before the fits below
    writer = SvmEvaluator(fields, namespace, store=EvaluationStore(), workers=1)
    fresh = writer.evaluate_all(points[:5])
    np.testing.assert_array_equal(early.evaluate_all(points[:5]), fresh)
    assert early.fits == 0
    early.evaluate(1, points)  # two new points: only they are fit
    assert early.fits == 2


def test_parallel_fits_equal_serial_fits(splits, monkeypatch):
    fields, sha = splits
    monkeypatch.setattr(landmine, "_PARALLEL_FROM", 8)
    monkeypatch.setattr(landmine, "_CHUNK", 4)
    points = _points(12, seed=2)
    serial = SvmEvaluator(fields[:1], cache_namespace(sha), store=None, workers=1).evaluate_all(points)
    parallel = SvmEvaluator(fields[:1], cache_namespace(sha), store=None, workers=2).evaluate_all(points)
    np.testing.assert_array_equal(parallel, serial)


def test_store_survives_an_unusable_directory(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    with pytest.warns(UserWarning, match="disabled"):
        store = EvaluationStore(blocker / "evaluations.sqlite")
    assert not store.enabled
    store.save("ns", [(0, b"k", 0.5)])
    assert store.load("ns", [0]) == {0: {}}


def test_optimum_is_the_best_of_grid_and_evaluated_points(splits, monkeypatch):
    monkeypatch.setattr(landmine, "OPTIMUM_GRID_DEPTH", 4)
    config = RunConfig(problem="landmine", fields="0,15,27", num_clients=2, alpha=0.4)
    federation = landmine_federation(config, NoiseModel())
    extra = _points(3, seed=3)
    federation.local_values(extra)
    alpha = 0.4
    optimum = federation.optimum(alpha)
    assert optimum.estimated and "31 cell centres of depths 0-4" in optimum.method
    grid = federation.partition.midpoints(np.concatenate([nodes_at_depth(d) for d in range(5)]))
    for points in (grid, extra):
        local = federation.local_values(points)
        personalised = alpha * local + (1 - alpha) * local.mean(axis=0)
        assert (personalised.max(axis=1) <= optimum.values).all()
    assert federation.optimum(alpha) is optimum  # nothing new evaluated: the estimate is reused
    better = federation.local_values(_points(40, seed=4))
    assert better.shape == (2, 40)
    assert (federation.optimum(alpha).values >= optimum.values).all()  # recomputed with the new points


def test_small_landmine_run_completes(splits, monkeypatch):
    monkeypatch.setattr(landmine, "OPTIMUM_GRID_DEPTH", 6)
    config = RunConfig(problem="landmine", algorithm="pf-xab", fields="0,15,27", num_clients=3, alpha=0.4,
                       horizon=20_000, seed=0)
    result = run_config(config)
    summary = result.summary
    assert summary["problem"] == "landmine" and summary["num_clients"] == 3
    assert summary["optimum_estimated"] is True
    # Every pulled midpoint is among the points the optimum is taken over, so no regret is negative.
    assert all(r >= 0 for r in summary["regret_per_client"])
    assert all(0.0 <= v <= 1.0 for v in summary["optimum_personalised"])
    again = run_config(config).summary  # warm (memory and disk cache): same numbers
    assert again["regret_per_client"] == summary["regret_per_client"]


def test_a_runs_regret_does_not_depend_on_what_the_federation_evaluated_before(splits, monkeypatch):
    """The optimum is estimated from the grid and evaluated points: a run is scored with its own points only."""
    monkeypatch.setattr(landmine, "OPTIMUM_GRID_DEPTH", 2)  # 7 cell centres: random points beat them
    config = RunConfig(problem="landmine", fields="0,15,27", num_clients=2, alpha=0.4)
    keywords = {"alpha": 0.4, "horizon": 3_000, "seed": 0}
    alone = run(landmine_federation(config, NoiseModel()), "pf-xab", **keywords).summary
    federation = landmine_federation(config, NoiseModel())
    federation.local_values(_points(200, seed=5))  # what an earlier run (random search, say) evaluated
    assert (federation.optimum(0.4).values > np.array(alone["optimum_personalised"])).any()  # the test can fail
    after = run(federation, "pf-xab", **keywords).summary
    assert after["regret"] == alone["regret"] and after["optimum_personalised"] == alone["optimum_personalised"]


def test_federation_pickles_for_flower_workers(splits, monkeypatch):
    import pickle

    monkeypatch.setattr(landmine, "OPTIMUM_GRID_DEPTH", 2)
    federation = landmine_federation(RunConfig(problem="landmine", fields="0,15", num_clients=2), NoiseModel())
    points = _points(3, seed=5)
    before = federation.local_values(points)
    copy = pickle.loads(pickle.dumps(federation))
    np.testing.assert_array_equal(copy.local_values(points), before)
    np.testing.assert_array_equal(copy.evaluate(1, points), before[1])
    assert copy.evaluator.fits == federation.evaluator.fits  # values travel with it, nothing refit


def test_two_writers_share_one_store(tmp_path):
    first, second = EvaluationStore(tmp_path / "e.sqlite"), EvaluationStore(tmp_path / "e.sqlite")
    first.save("ns", [(0, b"a", 0.25), (1, b"a", 0.5)])
    second.save("ns", [(0, b"a", 0.99), (0, b"b", 0.75)])  # an existing key keeps its first value
    assert first.load("ns", [0, 1]) == {0: {b"a": 0.25, b"b": 0.75}, 1: {b"a": 0.5}}
    assert second.load("other", [0]) == {0: {}}


#: The store a forked worker inherits (not an argument: that would be pickled, not inherited).
_FORKED_STORE: list[EvaluationStore] = []


def _save_in_a_fork(item: int) -> tuple[int, int]:
    """Save through the store this process inherited by fork; which connection it held, and which it used."""
    (store,) = _FORKED_STORE
    inherited = id(store._connection)
    store.save("ns", [(item, bytes([i]) * 16, 0.5) for i in range(100)])
    return inherited, id(store._connection)


def test_forked_workers_open_their_own_connection_and_lose_no_write(tmp_path):
    """Sweeps fork their workers after the parent used the store; SQLite forbids sharing a connection
    across fork(), so each worker must open its own, and every worker's rows must reach the file."""
    import multiprocessing

    store = EvaluationStore(tmp_path / "e.sqlite")
    store.save("ns", [(0, b"parent", 0.25)])
    _FORKED_STORE[:] = [store]
    try:
        # one task per worker (maxtasksperchild): a worker that took both would hold its own connection by the second
        with multiprocessing.get_context("fork").Pool(2, maxtasksperchild=1) as pool:
            used = pool.map(_save_in_a_fork, [1, 2], chunksize=1)
    finally:
        _FORKED_STORE.clear()
    assert all(inherited == id(store._connection) != own for inherited, own in used)
    rows = EvaluationStore(tmp_path / "e.sqlite").load("ns", [0, 1, 2])
    assert [len(rows[item]) for item in (0, 1, 2)] == [1, 100, 100]
    store.save("ns", [(0, b"after", 0.5)])  # the parent's own connection still works
    assert store.load("ns", [0]) == {0: {b"parent": 0.25, b"after": 0.5}}


def test_corrupt_cache_is_moved_aside_and_rebuilt(tmp_path, capsys):
    path = tmp_path / "evaluations.sqlite"
    path.write_bytes(b"this is not a database " * 200)
    store = EvaluationStore(path)
    assert store.enabled
    store.save("ns", [(0, b"a", 0.25)])
    assert EvaluationStore(path).load("ns", [0]) == {0: {b"a": 0.25}}  # the new cache works and persists
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "corrupt" in lines[0] and "moved it to" in lines[0]
    aside = list(tmp_path.glob("evaluations.sqlite.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"this is not a database")


def test_cache_damaged_inside_heals_on_read(tmp_path, capsys):
    path = tmp_path / "evaluations.sqlite"
    store = EvaluationStore(path)
    store.save("ns", [(0, bytes([i]) * 16, 0.5) for i in range(200)])
    store.close()
    import sqlite3

    with sqlite3.connect(path) as connection:  # fold the WAL in, then damage the table's pages
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    content = bytearray(path.read_bytes())
    content[4096:] = b"\xff" * (len(content) - 4096)
    path.write_bytes(bytes(content))
    assert EvaluationStore(path).load("ns", [0]) == {0: {}}  # nothing trusted from the damaged file
    assert "corrupt" in capsys.readouterr().err
    healed = EvaluationStore(path)
    healed.save("ns", [(0, b"b", 0.75)])
    assert healed.load("ns", [0]) == {0: {b"b": 0.75}}


def test_cached_values_outside_the_objectives_range_are_refit(splits, capsys):
    fields, sha = splits
    namespace = cache_namespace(sha)
    points = _points(3, seed=6)
    fresh = SvmEvaluator(fields[:1], namespace, store=None, workers=1).evaluate_all(points)
    EvaluationStore().save(namespace, [(fields[0].field, row.tobytes(), 7.5) for row in points])
    evaluator = SvmEvaluator(fields[:1], namespace, store=EvaluationStore(), workers=1)
    np.testing.assert_array_equal(evaluator.evaluate_all(points), fresh)
    assert evaluator.fits == 3  # the bad values were not used
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "outside [0, 1]" in lines[0]
    again = SvmEvaluator(fields[:1], namespace, store=EvaluationStore(), workers=1)
    np.testing.assert_array_equal(again.evaluate_all(points), fresh)
    assert again.fits == 0  # the refit values replaced them on disk


# -- issue 37, class 3: the cache is only a speed-up: no problem of it fails or slows a run -------------------


def _run_with_cache(tmp_path, code: str = "", **env: str):
    """``pfxab run --json`` (a short garland run, whose optimum goes through the cache) in a fresh process."""
    import json
    import os
    import subprocess
    import sys

    program = (code + "\nimport sys\nfrom pfxab_flower.simulations.cli.main import main\n"
               "sys.exit(main(['run', '--horizon', '2000', '--num-clients', '3', '--json']))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=patient(300),
                          env={**os.environ, "PFXAB_CACHE_DIR": str(tmp_path), **env}, cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    return summary, [line for line in done.stderr.splitlines() if "cache" in line]


REFERENCE_REGRET: list[float] = []


def _reference(tmp_path) -> float:
    if not REFERENCE_REGRET:
        (tmp_path / "reference").mkdir()
        REFERENCE_REGRET.append(_run_with_cache(tmp_path / "reference")[0]["regret"])
    return REFERENCE_REGRET[0]


def test_without_a_home_directory_the_run_goes_on_without_the_cache(tmp_path):
    """A uid without a passwd entry and no HOME: ``Path.home()`` raised when the optimum was scored, after the run."""
    no_home = ("import os, pwd\nos.environ.pop('HOME', None)\n"
               "pwd.getpwuid = lambda uid: (_ for _ in ()).throw(KeyError(uid))")
    summary, lines = _run_with_cache(tmp_path, no_home, PFXAB_CACHE_DIR="", XDG_CACHE_HOME="")
    assert summary["regret"] == _reference(tmp_path)
    assert len(lines) == 1 and lines[0].startswith("pfxab: warning: evaluation cache") and "home directory" in lines[0]


def test_a_cache_locked_by_another_process_costs_seconds_not_minutes(tmp_path):
    """Another program's ``BEGIN EXCLUSIVE`` made two 60 s busy waits: ``pfxab run`` took 122 s instead of 2 s."""
    import sqlite3
    import subprocess
    import sys

    path = tmp_path / "evaluations-v2.sqlite"
    sqlite3.connect(path).execute("PRAGMA journal_mode=DELETE").close()
    holder = subprocess.Popen([sys.executable, "-c", "import sqlite3, sys, time\n"
                               f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
                               "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); time.sleep(300)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        summary, lines = _run_with_cache(tmp_path)
    finally:
        holder.kill()
        holder.wait()
    assert summary["regret"] == _reference(tmp_path)
    assert summary["scoring_seconds"] < 30  # a bound on waiting, not a speed target: it was 120 s
    assert len(lines) == 1 and "database is locked" in lines[0]


def test_another_applications_database_at_the_cache_path_is_left_alone(tmp_path):
    """Our table was added to it (and its journal mode changed); now it is never written to, with one line."""
    import sqlite3

    path = tmp_path / "evaluations-v2.sqlite"
    with sqlite3.connect(path) as other:
        other.execute("CREATE TABLE contacts (name TEXT, phone TEXT)")
        other.execute("INSERT INTO contacts VALUES ('Ada', '123')")
    before = path.read_bytes()
    summary, lines = _run_with_cache(tmp_path)
    assert summary["regret"] == _reference(tmp_path) and path.read_bytes() == before
    assert len(lines) == 1 and "not a pfxab cache" in lines[0]


def test_a_cache_of_another_layout_is_moved_aside_once_and_the_next_run_is_warm(tmp_path):
    """A cache file of the wrong schema was disabled for good, with 4 warnings a run; it heals as a corrupt one does."""
    import sqlite3

    path = tmp_path / "evaluations-v2.sqlite"
    with sqlite3.connect(path) as old:
        old.execute("CREATE TABLE evaluations (namespace TEXT, item INTEGER, value REAL)")
    summary, lines = _run_with_cache(tmp_path)
    assert summary["regret"] == _reference(tmp_path)
    assert len(lines) == 1 and "moved it to" in lines[0] and len(list(tmp_path.glob("*.corrupt-*"))) == 1
    again, lines = _run_with_cache(tmp_path)
    assert again["regret"] == summary["regret"] and lines == []
