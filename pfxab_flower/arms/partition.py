"""A deterministic binary partition of a box, numbered as a heap, vectorised over node ids.

Node ``1`` is the box, node ``k``'s children are ``2k`` and ``2k + 1``, and depth ``h`` halves
dimension ``h mod d``. The rule is fixed, so clients and server agree on every cell and only
node ids cross the network.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pfxab_flower.arms.domain import Domain

#: The deepest level an ``int64`` heap id can hold.
MAX_DEPTH = 62
#: The most bits an integer can have and still convert to a float exactly.
_EXACT_INDEX_BITS = 53
#: The depth of the cells whose centres stand for points of the domain (random search's points, successive
#: halving's candidates): a unit-cube resolution of ``2**-48`` in one dimension.
POINT_DEPTH = 48


def point_depth(max_depth: int | None) -> int:
    """The depth of a run's points: :data:`POINT_DEPTH`, or the run's ``max_depth`` if shallower."""
    return POINT_DEPTH if max_depth is None else min(max_depth, POINT_DEPTH)


def depth_of(node_ids: np.ndarray) -> np.ndarray:
    """Depth ``floor(log2 k)`` of each node id, exact for every ``int64`` id."""
    ids = np.asarray(node_ids, dtype=np.int64)
    if ids.size and ids.min() < 1:
        raise ValueError(f"node ids must be >= 1, got {ids.min()}")
    depth = np.floor(np.log2(ids.astype(np.float64))).astype(np.int64)
    # float rounding can be off by one for ids close to a power of two; uint64 holds 2**63
    unsigned = ids.astype(np.uint64)
    one = np.uint64(1)
    depth -= (np.left_shift(one, depth.astype(np.uint64)) > unsigned).astype(np.int64)
    depth += (np.left_shift(one, (depth + 1).astype(np.uint64)) <= unsigned).astype(np.int64)
    return depth


def children(node_ids: np.ndarray) -> np.ndarray:
    """Sorted children ``2k, 2k + 1`` of every node in ``node_ids``."""
    ids = np.asarray(node_ids, dtype=np.int64)
    return np.sort(np.concatenate([2 * ids, 2 * ids + 1]))


def parent(node_ids: np.ndarray) -> np.ndarray:
    """The parent ``k // 2`` of every node."""
    return np.asarray(node_ids, dtype=np.int64) // 2


def containing_nodes(unit_points: np.ndarray, depth: int) -> np.ndarray:
    """The node of ``depth`` whose cell holds each point of the unit cube (``(n, d)``; 1 on an axis: the last cell).

    Level ``h`` halves axis ``h mod d`` for the ``k``-th time (``k = h // d``): its bit is that of
    ``floor(u * 2**(k + 1))``, exact in floating point for every depth an ``int64`` id holds.
    """
    points = np.clip(np.asarray(unit_points, dtype=float), 0.0, 1.0)
    n, d = points.shape
    ids = np.ones(n, dtype=np.int64)
    for level in range(depth):
        scaled = np.floor(points[:, level % d] * float(1 << (level // d + 1)))
        bit = np.minimum(scaled, float((1 << (level // d + 1)) - 1)).astype(np.int64) & 1
        ids = 2 * ids + bit
    return ids


def nodes_at_depth(depth: int) -> np.ndarray:
    """All ``2**depth`` node ids of one depth, in increasing order."""
    return np.arange(1 << depth, 1 << (depth + 1), dtype=np.int64)


def unit_nodes(unit_points: np.ndarray, depth: int) -> np.ndarray:
    """The node of ``depth`` whose cell holds each point of the unit cube (``(n, d)``; 1 counts as in the last cell).

    Depth ``h`` halves axis ``h mod d``, so the node's bits are the points' binary digits, axis by axis in
    turn: what a search that proposes points (a model's argmax, a sampler's trial) pulls at a depth.
    """
    points = np.atleast_2d(np.asarray(unit_points, dtype=float))
    n, d = points.shape
    splits = [len(range(axis, depth, d)) for axis in range(d)]  # halvings of each axis down to depth
    index = [np.minimum(np.floor(points[:, axis] * 2.0 ** splits[axis]).astype(np.int64), (1 << splits[axis]) - 1)
             for axis in range(d)]  # exact: 2**splits <= 2**POINT_DEPTH fits a float's 53 bits
    nodes = np.ones(n, dtype=np.int64)
    for level in range(depth):
        axis, halving = level % d, level // d
        nodes = 2 * nodes + ((index[axis] >> (splits[axis] - 1 - halving)) & 1)
    return nodes


@dataclass(frozen=True)
class Partition:
    """The binary partition of a :class:`~pfxab_flower.arms.domain.Domain`."""

    domain: Domain

    def unit_cells(self, node_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower corners and widths, each ``(n, d)``, of the cells in the unit cube.

        Cells of one depth at a time: every split then halves the same axis for all of them, so
        a level is a shift, a mask and one exact add per cell (the halved width is a power of two).
        In one dimension a cell at depth ``h`` is simply the ``(k - 2^h)``-th of ``2^h``: one
        subtraction and one exact scaling (the same bits, as its index has at most 53 bits).
        """
        ids = np.asarray(node_ids, dtype=np.int64).reshape(-1)
        d = self.domain.ndim
        depth = depth_of(ids)
        lower = np.zeros((ids.size, d))
        width = np.ones((ids.size, d))
        for level_count in np.unique(depth).tolist():
            rows = np.flatnonzero(depth == level_count)
            if d == 1 and level_count <= _EXACT_INDEX_BITS:  # e.g. the optimum grid (2^16 cells): ~7x faster
                side = 0.5**level_count
                lower[rows, 0], width[rows, 0] = (ids[rows] - (1 << level_count)) * side, side
                continue
            group, corner, side = ids[rows], np.zeros((rows.size, d)), np.ones(d)
            for level in range(level_count):
                axis = level % d
                side[axis] *= 0.5
                corner[:, axis] += ((group >> (level_count - 1 - level)) & 1) * side[axis]
            lower[rows], width[rows] = corner, side
        return lower, width

    def unit_midpoints(self, node_ids: np.ndarray) -> np.ndarray:
        """Centres of the cells in the unit cube, shape ``(n, d)``."""
        lower, width = self.unit_cells(node_ids)
        return lower + 0.5 * width

    def midpoints(self, node_ids: np.ndarray) -> np.ndarray:
        """Centres of the cells in user units, shape ``(n, d)``: the points a pull evaluates."""
        return self.domain.to_user(self.unit_midpoints(node_ids))

    def bounds(self, node_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corners of the cells in user units, each ``(n, d)``."""
        lower, width = self.unit_cells(node_ids)
        return self.domain.to_user(lower), self.domain.to_user(lower + width)
