"""The landmine federation: personalised tuning of an RBF-kernel SVM's ``(C, gamma)`` on real data.

Client ``m`` is one landmine field; an arm's mean reward is the held-out ROC-AUC of the SVM fit on
the field's other half. Fits are read from the shipped table or cached (:class:`SvmEvaluator`); the
personalised optimum is an estimate, from the run being scored alone (docs/landmine.md).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

import numpy as np

from pfxab_flower.arms.domain import Domain
from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.arms.partition import Partition, nodes_at_depth
from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.landmine_data import SPLIT_ID, FieldSplit, load_splits
from pfxab_flower.problems.landmine_table import NUM_FIELDS, RewardTable, load_table
from pfxab_flower.problems.optimum import Optimum
from pfxab_flower.problems.registry import ProblemRun, landmine_fields
from pfxab_flower.processes.lifetime import exit_with_parent
from pfxab_flower.processes.remote import fit_mapper, in_ray_task
from pfxab_flower.storage.cache import EvaluationStore

DOMAIN = Domain.from_mapping({"C": (1e-4, 1e4, "log"), "gamma": (1e-2, 10, "log")})
#: Bump when the meaning of a cached value changes (objective, model, scoring).
OBJECTIVE_VERSION = 1
#: The optimum's candidates include every cell centre of depths 0..12: 8,191 points, the
#: deepest 64 x 64 (steps of 1/8 decade in C and 3/64 decade in gamma). The shipped table
#: holds exactly these, so the estimate costs no fit; without the table it is 8,191 fits per field.
OPTIMUM_GRID_DEPTH = 12
#: Rewards are ROC-AUCs: a cached value outside this range is damaged and is refit.
REWARD_RANGE = (0.0, 1.0)
#: Fits per task sent to a worker process (and saved to disk per transaction).
_CHUNK = 64
#: Fit in worker processes from this many missing fits on (measured on 2 cores, 2,560 fits:
#: 14.6 s in process, 12.8 s with two threads, 5.6 s with two processes).
_PARALLEL_FROM = 128
#: Idle worker processes exit after this long.
_WORKER_IDLE_SECONDS = 30
#: Show a progress bar on stderr when at least this many fits are missing.
_PROGRESS_FROM = 200


def svm_auc(split: FieldSplit, C: float, gamma: float) -> float:
    """ROC-AUC on the test half of an RBF SVM fit on the train half (the objective of one field)."""
    from sklearn.metrics import roc_auc_score
    from sklearn.svm import SVC

    model = SVC(kernel="rbf", C=C, gamma=gamma).fit(split.X_train, split.y_train)
    return float(roc_auc_score(split.y_test, model.decision_function(split.X_test)))


def cache_namespace(data_sha256: str) -> str:
    """Everything a cached value depends on besides the field and the point."""
    import sklearn

    return (
        f"landmine/v{OBJECTIVE_VERSION}/data-sha256={data_sha256}/{SPLIT_ID}/"
        f"SVC(kernel=rbf).decision_function+roc_auc_score/sklearn={sklearn.__version__}"
    )


class SvmEvaluator:
    """Each field's objective, each distinct ``(field, point)`` fit once (memory + disk cache)."""

    def __init__(
        self,
        splits: Sequence[FieldSplit],
        namespace: str,
        store: EvaluationStore | None = None,
        workers: int | None = None,
        table: RewardTable | None = None,
    ) -> None:
        self.splits = list(splits)
        self.namespace = namespace
        self.store = store
        self.workers = workers or os.cpu_count() or 1
        fields_ = [s.field for s in self.splits]
        loaded = store.load(namespace, fields_, REWARD_RANGE) if store is not None else {f: {} for f in fields_}
        self._values: list[dict[bytes, float]] = [loaded[f] for f in fields_]
        if table is not None:  # the shipped rewards of every cell centre down to table.depth: no fit needed there
            keys = [row.tobytes() for row in table_points(table.depth)[1]]
            for values, f in zip(self._values, fields_, strict=True):
                values.update(zip(keys, table.values[f].tolist(), strict=True))
        #: Every distinct point asked for through this evaluator, in order (user units).
        self._seen: dict[bytes, None] = {}
        self.fits = 0

    @property
    def num_clients(self) -> int:
        return len(self.splits)

    @property
    def seen_count(self) -> int:
        return len(self._seen)

    def forget_seen(self) -> None:
        """Start a new list of evaluated points (a new run's scoring); the values stay cached."""
        self._seen.clear()

    def seen_points(self) -> np.ndarray:
        """Every distinct point evaluated through this evaluator, shape ``(n, 2)``."""
        if not self._seen:
            return np.zeros((0, 2))
        return np.frombuffer(b"".join(self._seen), dtype=np.float64).reshape(-1, 2).copy()

    def evaluate(self, client: int, points: np.ndarray) -> np.ndarray:
        """Client ``client``'s objective at ``points`` ``(n, 2)``: ``n`` values."""
        values: np.ndarray = self._values_at([client], points)[0]
        return values

    def evaluate_all(self, points: np.ndarray) -> np.ndarray:
        """Every client's objective at ``points``: shape ``(M, n)``."""
        return self._values_at(range(self.num_clients), points)

    def _values_at(self, clients: Sequence[int], points: np.ndarray) -> np.ndarray:
        points = np.ascontiguousarray(np.atleast_2d(points), dtype=np.float64)
        keys = [row.tobytes() for row in points]
        self._seen.update(dict.fromkeys(keys))
        missing = {
            (m, k): row for m in clients for k, row in zip(keys, points, strict=True) if k not in self._values[m]
        }
        if missing and self.store is not None:
            self._take_stored(missing)
        if missing:
            self._fit(missing)
        return np.array([[self._values[m][k] for k in keys] for m in clients]).reshape(len(clients), len(keys))

    def _take_stored(self, missing: dict[tuple[int, bytes], np.ndarray]) -> None:
        """Take from the store the missing values another process stored since this one loaded it (parallel
        sweep workers, a comparison's workers): removed from ``missing``, they are not fit again."""
        assert self.store is not None
        by_client: dict[int, list[bytes]] = {}
        for m, key in missing:
            by_client.setdefault(m, []).append(key)
        for m, keys in by_client.items():
            field = self.splits[m].field
            stored = self.store.load(self.namespace, [field], REWARD_RANGE, points=keys)[field]
            self._values[m].update(stored)
            for key in stored:
                del missing[(m, key)]

    def _fit(self, missing: dict[tuple[int, bytes], np.ndarray]) -> None:
        """Fit the missing ``(client, point)`` pairs, in worker processes when there are many."""
        by_client: dict[int, list[tuple[bytes, np.ndarray]]] = {}
        for (m, key), row in missing.items():
            by_client.setdefault(m, []).append((key, row))
        chunks = [
            (m, items[i : i + _CHUNK]) for m, items in by_client.items() for i in range(0, len(items), _CHUNK)
        ]
        progress = None
        if len(missing) >= _PROGRESS_FROM:
            from tqdm import tqdm

            progress = tqdm(total=len(missing), desc="landmine SVM fits", unit="fit", file=sys.stderr, leave=False)
        calls = [(self.splits[m], [row for _, row in items]) for m, items in chunks]
        here = in_ray_task()  # a Ray task fits in itself: it never fans out again
        mapper = None if here else fit_mapper()
        if mapper is not None:  # e.g. each chunk a task on a Ray cluster; we keep the values
            results = mapper(_fit_chunk, calls)
            on_error = _nothing
        elif not here and self.workers > 1 and len(missing) >= _PARALLEL_FROM:
            from joblib.externals.loky import get_reusable_executor

            pool = get_reusable_executor(max_workers=self.workers, timeout=_WORKER_IDLE_SECONDS,
                                         initializer=exit_with_parent, initargs=(os.getpid(), 0))
            futures = [pool.submit(_fit_chunk, *call) for call in calls]
            results = (future.result() for future in futures)
            on_error = _stop_workers
        else:
            results = (_fit_chunk(*call) for call in calls)
            on_error = _nothing
        try:
            for (m, items), values in zip(chunks, results, strict=True):
                rows = []
                for (key, _), value in zip(items, values, strict=True):
                    self._values[m][key] = value
                    rows.append((self.splits[m].field, key, value))
                self.fits += len(rows)
                if self.store is not None:
                    self.store.save(self.namespace, rows)  # one transaction per chunk: an interruption loses little
                if progress is not None:
                    progress.update(len(rows))
        except BaseException:
            on_error()  # Ctrl-C or a failed fit: drop the queued fits instead of finishing them
            raise
        finally:
            if progress is not None:
                progress.close()


def _nothing() -> None:
    """Nothing to stop: the fits ran in this process."""


def _stop_workers() -> None:
    """Stop the fitting workers at once, dropping their queued fits (loky starts new ones on next use).

    Terminating the workers (rather than ``shutdown``, which lets a running fit
    finish and races with loky's manager thread) makes Ctrl-C take effect at once.
    """
    for child in multiprocessing.active_children():
        if type(child).__module__.startswith("joblib.externals.loky"):
            child.terminate()


def _fit_chunk(split: FieldSplit, points: list[np.ndarray]) -> list[float]:
    """One field's objective at a few points (runs in a worker process)."""
    return [svm_auc(split, float(row[0]), float(row[1])) for row in points]


@dataclass(eq=False)
class LandmineFederation(Federation):
    """A :class:`Federation` whose optimum is the best of all cell centres to a depth and of every evaluated point."""

    evaluator: SvmEvaluator | None = None
    grid_depth: int = OPTIMUM_GRID_DEPTH
    _estimates: dict[float, tuple[int, Optimum]] = field(default_factory=dict, init=False, repr=False)

    def start_scoring(self) -> None:
        """Forget the points evaluated before this run's scoring (the values stay cached): the estimate is then
        the best of the cell centres and of this run's pulled points, whatever else this process ran before."""
        assert self.evaluator is not None
        self.evaluator.forget_seen()
        self._estimates.clear()

    def optimum(self, alpha: float) -> Optimum:
        """The estimated optimum, recomputed if points were evaluated since it was last computed."""
        evaluator = self.evaluator
        assert evaluator is not None  # landmine_federation always sets it (None: a default the base's fields require)
        key = float(alpha)
        cached = self._estimates.get(key)
        if cached is not None and cached[0] == evaluator.seen_count:
            return cached[1]
        grid = Partition(self.domain).midpoints(np.arange(1, 2 ** (self.grid_depth + 1), dtype=np.int64))
        self.local_values(grid)  # every cell centre down to grid_depth is now among the evaluated points
        points = evaluator.seen_points()
        local = self.local_values(points)
        personalised = key * local + (1.0 - key) * local.mean(axis=0)
        best = personalised.argmax(axis=1)
        result = Optimum(
            values=personalised[np.arange(self.num_clients), best],
            points=points[best],
            estimated=True,
            method=f"estimate: max over the {len(grid)} cell centres of depths 0-{self.grid_depth} "
            f"and every evaluated point ({len(points)} points in all)",
        )
        self._estimates[key] = (evaluator.seen_count, result)
        return result


def landmine_federation(config: ProblemRun, noise: NoiseModel) -> Federation:
    """The federation of ``config.landmine_fields`` (one client per field)."""
    fields_ = landmine_fields(config)
    splits, sha = load_splits(fields_, config.landmine_data)
    namespace = cache_namespace(sha)
    evaluator = SvmEvaluator(splits, namespace, EvaluationStore(), table=load_table(namespace))
    return LandmineFederation(
        objectives=[partial(evaluator.evaluate, m) for m in range(len(splits))],
        domain=DOMAIN,
        noise=noise,
        name="landmine",
        optimum_is_estimate=True,
        refine_optimum=False,
        batch=evaluator.evaluate_all,
        evaluator=evaluator,
        grid_depth=OPTIMUM_GRID_DEPTH,
        value_range=(0.0, 1.0),  # a ROC-AUC (what the server checks means against; Bernstein's span)
    )


def table_points(depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Node ids ``1..2**(depth+1)-1`` and their centres in user units (the exact points runs evaluate)."""
    ids = np.arange(1, 2 ** (depth + 1), dtype=np.int64)
    return ids, Partition(DOMAIN).midpoints(ids)


def generate_table(depth: int, data_path: str | None = None, workers: int = 1) -> RewardTable:
    """Fit all 29 fields at every cell centre of depths ``0..depth``: the table ``pfxab landmine-table`` ships.

    Depth by depth through the on-disk cache, so an interrupted generation resumes where it
    stopped and a shallower table can be written from a deeper partial one.
    """
    import sklearn

    started = time.perf_counter()
    splits, sha = load_splits(tuple(range(NUM_FIELDS)), data_path)
    namespace = cache_namespace(sha)
    evaluator = SvmEvaluator(splits, namespace, EvaluationStore(), workers=workers, table=None)
    partition = Partition(DOMAIN)
    for level in range(depth + 1):  # shallow levels first: a deeper run interrupted still holds every shallower level
        evaluator.evaluate_all(partition.midpoints(nodes_at_depth(level)))
        print(f"landmine-table: depth {level} done ({evaluator.fits} fits so far, "
              f"{time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    _, points = table_points(depth)
    return RewardTable(
        values=evaluator.evaluate_all(points),
        depth=depth,
        namespace=namespace,
        data_sha256=sha,
        split=SPLIT_ID,
        sklearn_version=sklearn.__version__,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        generation_seconds=time.perf_counter() - started,
        fits=evaluator.fits,
    )

