"""Where a proposal may go: the unit-cube centres of the history's cells, and the candidate points a draw is
maximised over (uniform ones, and ones near the best points so far at the model's own length scales)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from pfxab_flower.arms.domain import Dimension, Domain
from pfxab_flower.arms.partition import Partition, containing_nodes

#: Uniform candidates per dimension, and local ones: around each of the best points, at each scale.
UNIFORM_PER_DIMENSION, LOCAL_CENTRES, LOCAL_PER_SCALE = 256, 5, 32
#: The local candidates' spread, in units of the model's length scale on each axis.
LOCAL_SCALES = (1.0, 0.25, 0.0625)


@lru_cache(maxsize=8)
def _unit_partition(dimensions: int) -> Partition:
    return Partition(Domain(tuple(Dimension(f"x{i + 1}", 0.0, 1.0) for i in range(dimensions))))


def unit_centres(node_ids: np.ndarray, dimensions: int) -> np.ndarray:
    """The centres of the nodes' cells in the unit cube of the partition's coordinates, ``(n, d)``."""
    return _unit_partition(dimensions).unit_midpoints(np.asarray(node_ids, dtype=np.int64))


def nodes_of(points: np.ndarray, depth: int) -> np.ndarray:
    """The cells of ``depth`` holding ``points`` (unit cube)."""
    return containing_nodes(points, depth)


def candidates(rng: np.random.Generator, dimensions: int, best: np.ndarray, lengths: np.ndarray,
               uniform: bool = True) -> np.ndarray:
    """Uniform points of the unit cube (unless ``uniform`` is false), and Gaussian steps around each of ``best``
    (rows) at the length scales."""
    spread = rng.random((UNIFORM_PER_DIMENSION * dimensions if uniform else 0, dimensions))
    steps = [centre + scale * lengths * rng.standard_normal((LOCAL_PER_SCALE, dimensions))
             for centre in best for scale in LOCAL_SCALES]
    points: np.ndarray = np.clip(np.concatenate([spread, *steps]), 0.0, 1.0)
    return points
