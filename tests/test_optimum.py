"""The regret reference: personalised optima to 1e-6, against independent checks."""

import numpy as np
import pytest

from pfxab_flower.problems.synthetic import doublesine, garland, shifts, synthetic_federation

GARLAND_MAX = np.pi / 6 * (1 - np.pi / 6) * 4  # 0.99777..., at the cusp x = pi/6


def test_single_client_garland_peak_is_the_cusp_at_pi_over_6():
    optimum = synthetic_federation("garland", 1).optimum(1.0)
    assert pytest.approx(0.997772, abs=1e-6) == GARLAND_MAX
    assert abs(optimum.values[0] - GARLAND_MAX) < 1e-6
    assert abs(optimum.points[0, 0] - np.pi / 6) < 1e-9
    assert not optimum.estimated


def test_a_plain_grid_misses_garland_by_far_more_than_1e_6():
    grid = np.linspace(0, 1, 100_001)
    assert GARLAND_MAX - garland(grid).max() > 1e-5  # why the optimiser needs the cusps


def test_doublesine_peaks_at_one_at_each_clients_shift():
    fed = synthetic_federation("doublesine", 5, spread=0.3)
    optimum = fed.optimum(1.0)
    expected = np.mod(0.5 + shifts(5, 0.3), 1.0)
    assert np.allclose(optimum.values, 1.0, atol=1e-12)
    assert np.allclose(optimum.points[:, 0], expected, atol=1e-12)
    assert doublesine(np.array([0.5]))[0] == 1.0


def _brute_force(name: str, M: int, alpha: float) -> np.ndarray:
    """Independent check: a 4e6-point grid plus every client's cusps/peaks, derived here from the formulas."""
    fed = synthetic_federation(name, M)
    s = shifts(M, 0.3)
    special = (np.arange(0, 20)[None, :] * np.pi / 60 + s[:, None]).ravel() if name == "garland" else 0.5 + s
    x = np.concatenate([np.linspace(0, 1, 4_000_001), np.mod(special, 1.0)])
    best = np.full(M, -np.inf)
    for start in range(0, len(x), 500_000):
        block = x[start : start + 500_000, None]
        local = fed.local_values(block)
        personalised = alpha * local + (1 - alpha) * local.mean(axis=0)
        best = np.maximum(best, personalised.max(axis=1))
    return best


@pytest.mark.parametrize("name", ["garland", "doublesine"])
@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_personalised_optima_match_a_brute_force(name, alpha):
    M = 4
    optimum = synthetic_federation(name, M).optimum(alpha)
    brute = _brute_force(name, M, alpha)
    # never below a point actually evaluated, never more than 1e-6 above the dense check
    assert np.all(optimum.values >= brute - 1e-12)
    assert np.all(optimum.values - brute <= 1e-6)


def test_user_objective_optimum_is_estimated_and_close(tent):
    optimum = tent.optimum(1.0)
    assert optimum.estimated
    assert np.allclose(optimum.values, 1.0, atol=1e-6)
    assert np.allclose(optimum.points[:, 0], [0.2, 0.5, 0.7], atol=1e-6)
    # alpha = 0: every client maximises the mean of the tents, at the median centre 0.5
    global_opt = tent.optimum(0.0)
    assert np.allclose(global_opt.points[:, 0], 0.5, atol=1e-6)
    assert np.allclose(global_opt.values, 1 - (0.3 + 0.2) / 3, atol=1e-6)


def test_a_refined_optimum_is_read_back_exactly_and_only_for_the_same_content(tmp_path, monkeypatch):
    """The cache spares later runs scipy's import; it must never return another federation's optimum."""
    from pfxab_flower.problems import optimum as optimum_module

    monkeypatch.setenv("PFXAB_CACHE_DIR", str(tmp_path))
    refined = []
    real_refine = optimum_module._refine
    monkeypatch.setattr(optimum_module, "_refine", lambda *a: refined.append(a[2]) or real_refine(*a))

    computed = synthetic_federation("garland", 3).optimum(0.5)
    assert len(refined) == 3 * optimum_module.REFINE_CANDIDATES
    read_back = synthetic_federation("garland", 3).optimum(0.5)  # a new federation: its own memo is empty
    assert len(refined) == 3 * optimum_module.REFINE_CANDIDATES  # nothing refined again
    assert np.array_equal(read_back.values, computed.values)
    assert np.array_equal(read_back.points, computed.points)

    refined.clear()
    synthetic_federation("garland", 3, spread=0.2).optimum(0.5)  # other objectives: other grid values
    synthetic_federation("garland", 3).optimum(0.4)  # another alpha
    assert len(refined) == 2 * 3 * optimum_module.REFINE_CANDIDATES
