import numpy as np
import pytest

from pfxab_flower.arms.domain import Domain
from pfxab_flower.arms.partition import Partition, children, depth_of, nodes_at_depth, parent
from pfxab_flower.errors import ConfigError


def test_depth_of_heap_ids_including_large_ones():
    ids = np.array([1, 2, 3, 4, 7, 8, 15, 16, 2**40 - 1, 2**40, 2**62 - 1, 2**62])
    assert depth_of(ids).tolist() == [0, 1, 1, 2, 2, 3, 3, 4, 39, 40, 61, 62]


def test_children_and_parent_are_inverse():
    ids = np.array([1, 5, 6])
    kids = children(ids)
    assert kids.tolist() == [2, 3, 10, 11, 12, 13]
    assert np.unique(parent(kids)).tolist() == [1, 5, 6]


def test_1d_cells_halve_the_interval():
    part = Partition(Domain.unit_interval())
    lower, upper = part.bounds(np.array([1, 2, 3, 4, 5, 6, 7]))
    assert lower[:, 0].tolist() == [0.0, 0.0, 0.5, 0.0, 0.25, 0.5, 0.75]
    assert upper[:, 0].tolist() == [1.0, 0.5, 1.0, 0.25, 0.5, 0.75, 1.0]
    assert part.midpoints(np.array([5]))[0, 0] == pytest.approx(0.375)


def test_each_depth_tiles_the_box_in_1d_2d_3d():
    for d in (1, 2, 3):
        domain = Domain.from_mapping({f"x{i}": (0.0, 1.0) for i in range(d)})
        part = Partition(domain)
        for depth in range(0, 7):
            lower, upper = part.bounds(nodes_at_depth(depth))
            volumes = np.prod(upper - lower, axis=1)
            assert volumes.sum() == pytest.approx(1.0)
            assert np.allclose(volumes, 2.0**-depth)
            # children's cells are exactly the two halves of the parent's cell
            ids = nodes_at_depth(depth)
            kid_lo, kid_hi = part.bounds(children(ids))
            axis = depth % d
            assert np.allclose(kid_lo[0::2], lower) and np.allclose(kid_hi[1::2], upper)
            assert np.allclose(kid_hi[0::2, axis], (lower[:, axis] + upper[:, axis]) / 2)


def test_2d_splits_alternate_dimensions():
    part = Partition(Domain.from_mapping({"a": (0.0, 1.0), "b": (0.0, 1.0)}))
    # depth 1 splits a, depth 2 splits b
    mid = part.midpoints(np.array([2, 3, 4, 5, 6, 7]))
    assert mid.tolist() == [[0.25, 0.5], [0.75, 0.5], [0.25, 0.25], [0.25, 0.75], [0.75, 0.25], [0.75, 0.75]]


def test_log_dimension_is_halved_in_log10_space():
    domain = Domain.from_mapping({"C": (1e-4, 1e4, "log"), "gamma": (1e-2, 10.0, "log")})
    part = Partition(domain)
    root = part.midpoints(np.array([1]))[0]
    assert root[0] == pytest.approx(1.0)
    assert root[1] == pytest.approx(10**-0.5)
    lower, upper = part.bounds(np.array([2, 3]))
    assert lower[0, 0] == pytest.approx(1e-4) and upper[0, 0] == pytest.approx(1.0)
    assert lower[1, 0] == pytest.approx(1.0) and upper[1, 0] == pytest.approx(1e4)
    unit = domain.to_unit(part.midpoints(np.array([37])))
    assert np.allclose(domain.to_user(unit), part.midpoints(np.array([37])))


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ({"x": (1.0, 0.0)}, "low < high"),
        ({"x": (0.0, 1.0, "cubic")}, "scale='cubic'"),
        ({"x": (0.0, 1.0, "log")}, "low > 0"),
        ({}, r"dimensions=0 is invalid; allowed: an integer in \[1, 32\]"),
    ],
)
def test_bad_domains_are_rejected_with_the_reason(spec, fragment):
    with pytest.raises(ConfigError, match=fragment):
        Domain.from_mapping(spec)


@pytest.mark.parametrize("dimensions", [1, 2, 3, 5])
def test_unit_nodes_finds_the_cell_of_a_depth_that_holds_each_point(dimensions: int) -> None:
    from pfxab_flower.arms.partition import unit_nodes

    domain = Domain.from_mapping({f"x{i}": (0.0, 1.0) for i in range(dimensions)})
    points = np.vstack([np.random.default_rng(dimensions).random((500, dimensions)), np.zeros(dimensions),
                        np.full(dimensions, 0.5), np.ones(dimensions)])
    for depth in (0, 1, 7, 48):
        nodes = unit_nodes(points, depth)
        assert (depth_of(nodes) == depth).all()
        lower, width = Partition(domain).unit_cells(nodes)
        inside = (lower <= points) & ((points < lower + width) | ((points == 1.0) & (lower + width == 1.0)))
        assert inside.all(), depth
