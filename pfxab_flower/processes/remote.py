"""Hooks by which the layers above the core send work elsewhere (a Ray cluster), without the core importing Ray.

:mod:`pfxab_flower.simulations.flower.ray_cluster` plugs in a job runner (:data:`JobRunner`; default the local
pool) and a fit mapper (:func:`fits_with`; default this process or a loky pool). Inside a Ray task
(:data:`TASK_ENV` set) the evaluation cache is read, never written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

#: Set (to "1") in every Ray task the cluster module starts.
TASK_ENV = "PFXAB_RAY_TASK"

#: ``runner(fn, jobs, on_done)``: call ``fn(*job)`` for every job, ``on_done(index, result, error)`` in this process.
JobRunner = Callable[[Callable[..., Any], Sequence[tuple[Any, ...]], Callable[[int, Any, BaseException | None], None]],
                     None]
#: ``mapper(fn, calls)``: ``fn(*call)`` for every call, as an iterator of results in order.
FitMapper = Callable[[Callable[..., Any], Sequence[tuple[Any, ...]]], Iterator[Any]]

_current: list[FitMapper | None] = [None]  # process-wide: a Flower ServerApp evaluates in a thread of its own


def in_ray_task() -> bool:
    """Whether this process is a Ray task started for a sweep, a comparison or fits (its caches are read-only)."""
    return os.environ.get(TASK_ENV) == "1"


@contextmanager
def fits_with(mapper: FitMapper | None) -> Iterator[None]:
    """Within the block, this process's landmine SVM fits go through ``mapper`` (``None``: locally)."""
    previous = _current[0]
    _current[0] = mapper
    try:
        yield
    finally:
        _current[0] = previous


def fit_mapper() -> FitMapper | None:
    """The mapper set by :func:`fits_with`, or ``None`` for local fits."""
    return _current[0]
