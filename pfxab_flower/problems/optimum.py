"""Each client's personalised optimum ``max_X alpha mu_m + (1 - alpha) mu``, which regret is measured against.

A grid of partition cell centres plus the problem's kinks (cusps, evaluated exactly), then a local
refinement of the best points, kept in the evaluation cache (:mod:`.optimum_store`). Exact to 1e-6
for the built-in problems, an estimate for a user's. The method: docs/algorithms/index.md ("The
optimum the regret is measured against").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from pfxab_flower.arms.domain import Domain
from pfxab_flower.arms.partition import Partition, nodes_at_depth
from pfxab_flower.problems.optimum_store import RefinementKey, load_refined, save_refined

#: Grid points in all (``2**GRID_BITS``), cell centres of the partition at that depth.
GRID_BITS = 16
#: Best grid cells refined per client.
REFINE_CANDIDATES = 3
_CHUNK = 4096


class Searched(Protocol):
    """What the search reads of a federation (:class:`~pfxab_flower.problems.federation.Federation` is one)."""

    @property
    def domain(self) -> Domain: ...

    @property
    def kinks(self) -> Callable[[], np.ndarray] | None: ...

    @property
    def num_clients(self) -> int: ...

    @property
    def refine_optimum(self) -> bool: ...

    @property
    def optimum_is_estimate(self) -> bool: ...

    def local_values(self, points: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class Optimum:
    """Per-client optimal values and maximisers (user units) of the personalised objective."""

    values: np.ndarray
    points: np.ndarray
    estimated: bool
    method: str


def _grid_depth(ndim: int) -> int:
    """The grid's partition depth: ``2**GRID_BITS`` cells at most, whatever the dimension.

    Up to ``GRID_BITS`` dimensions the depth is a multiple of ``ndim`` (every axis split
    equally often); beyond, only the first ``GRID_BITS`` axes are halved once. It used to
    be ``ndim`` there, so the grid doubled with every dimension (24 dimensions: 3 GiB).
    """
    return ndim * (GRID_BITS // ndim) if ndim <= GRID_BITS else GRID_BITS


def maximise_personalised(federation: Searched, alpha: float) -> Optimum:
    """Maximise every client's personalised objective (grid and kinks, then refinement: docs/algorithms/index.md)."""
    domain = federation.domain
    partition = Partition(domain)
    depth = _grid_depth(domain.ndim)
    unit_grid = partition.unit_midpoints(nodes_at_depth(depth))
    if federation.kinks is not None:
        unit_grid = np.vstack([unit_grid, np.atleast_2d(federation.kinks())])
    spacing = 0.5 ** (depth // domain.ndim)  # only the 1-D refinement uses it

    M = federation.num_clients
    key = RefinementKey(alpha, repr(domain), REFINE_CANDIDATES, M) if federation.refine_optimum else None
    if key is not None:  # hashed only where the refinement it names is done
        key.update(unit_grid)
    chunk_best = []
    chunk_index = []
    for start in range(0, len(unit_grid), _CHUNK):
        block = unit_grid[start : start + _CHUNK]
        personalised = _personalised(federation, alpha, domain.to_user(block))
        if key is not None:
            key.update(personalised)
        arg = personalised.argmax(axis=1)
        chunk_best.append(personalised[np.arange(M), arg])
        chunk_index.append(arg + start)
    best = np.stack(chunk_best, axis=1)  # (M, chunks)
    index = np.stack(chunk_index, axis=1)

    values = best.max(axis=1)
    points = unit_grid[index[np.arange(M), best.argmax(axis=1)]].copy()
    if key is not None:
        values, points = _refined(federation, alpha, key.namespace, unit_grid, best, index, spacing, (values, points))
    return Optimum(
        values=values,
        points=domain.to_user(points),
        estimated=federation.optimum_is_estimate,
        method=f"grid of 2^{depth} cell centres + {'kinks + ' if federation.kinks else ''}"
        + ("local refinement" if federation.refine_optimum else "no refinement"),
    )


def _refined(
    federation: Searched, alpha: float, namespace: str, unit_grid: np.ndarray, best: np.ndarray,
    index: np.ndarray, spacing: float, grid_optimum: tuple[np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """The local refinement of the best grid points, read from the cache when this very refinement was done before."""
    M, ndim = len(best), unit_grid.shape[1]
    stored = load_refined(namespace, M, ndim)
    if stored is not None:
        return stored
    values, points = grid_optimum
    top = np.argsort(-best, axis=1)[:, :REFINE_CANDIDATES]
    clients = [0] if alpha == 0 else range(M)  # with alpha = 0 every client has the same objective
    for m in clients:
        for c in top[m]:
            origin = unit_grid[index[m, c]]
            x, v = _refine(federation, alpha, m, origin, spacing)
            if v > values[m]:
                values[m], points[m] = v, x
    if alpha == 0:
        values[:] = values[0]
        points[:] = points[0]
    save_refined(namespace, values, points)
    return values, points


def _personalised(federation: Searched, alpha: float, points: np.ndarray) -> np.ndarray:
    local = federation.local_values(points)
    personalised: np.ndarray = alpha * local + (1.0 - alpha) * local.mean(axis=0)
    return personalised


def _personalised_one(federation: Searched, alpha: float, client: int, unit: np.ndarray) -> float:
    user = federation.domain.to_user(np.clip(unit, 0.0, 1.0)[None, :])
    return float(_personalised(federation, alpha, user)[client, 0])


def _refine(
    federation: Searched, alpha: float, client: int, start: np.ndarray, spacing: float
) -> tuple[np.ndarray, float]:
    """Local maximum near ``start`` (unit coordinates) of one client's personalised objective."""
    from scipy.optimize import minimize, minimize_scalar  # here: scipy costs ~0.2 s to import, most runs need none

    if len(start) == 1:
        lo, hi = max(0.0, start[0] - spacing), min(1.0, start[0] + spacing)
        res = minimize_scalar(
            lambda x: -_personalised_one(federation, alpha, client, np.array([x])),
            bounds=(lo, hi),
            method="bounded",
            options={"xatol": 1e-12},
        )
        x = np.array([res.x])
    else:
        res = minimize(
            lambda u: -_personalised_one(federation, alpha, client, u),
            start,
            method="Nelder-Mead",
            bounds=[(0.0, 1.0)] * len(start),
            options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 400},
        )
        x = np.clip(res.x, 0.0, 1.0)
    return x, _personalised_one(federation, alpha, client, x)
