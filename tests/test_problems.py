"""Federations, user objectives, noise and the run configuration."""

import numpy as np
import pytest

from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.errors import ConfigError, ObjectiveError
from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.synthetic import shifts, synthetic_federation
from pfxab_flower.running.engine import run
from pfxab_flower.schema.run_config import RunConfig


def test_synthetic_clients_are_shifted_copies_continuous_across_the_wrap():
    fed = synthetic_federation("garland", 10, spread=0.3)
    s = shifts(10, 0.3)
    assert s[0] == pytest.approx(-0.15) and s[-1] == pytest.approx(0.15)
    assert shifts(1, 0.3).tolist() == [0.0]
    x = np.array([[0.0], [1.0 - 1e-12], [1e-12]])
    values = fed.local_values(x)
    assert np.allclose(values[:, 0], values[:, 1], atol=1e-5)
    # the batch path and the per-client objectives agree
    grid = np.linspace(0, 1, 101)[:, None]
    assert np.allclose(fed.local_values(grid), np.stack([fed.evaluate(m, grid) for m in range(10)]))


def test_global_optimum_is_suboptimal_for_every_client():
    fed = synthetic_federation("garland", 10)
    local_best = fed.optimum(1.0).values
    global_point = fed.optimum(0.0).points
    assert np.all(fed.local_values(global_point)[:, 0] < local_best - 1e-3)


def test_from_callables_with_a_named_log_domain():
    objectives = [lambda p, k=k: np.exp(-((np.log10(p[:, 0]) - k) ** 2)) * 0.5 + 0.25 for k in (-1.0, 1.0)]
    fed = Federation.from_callables(objectives, {"C": (1e-4, 1e4, "log")}, noise_sigma=0.05)
    assert fed.domain.names == ["C"] and fed.num_clients == 2
    optimum = fed.optimum(1.0)
    assert optimum.estimated
    assert np.allclose(optimum.points[:, 0], [0.1, 10.0], rtol=1e-4)
    result = run(fed, alpha=1.0, horizon=200_000, seed=0)
    assert result.summary["optimum_estimated"] is True
    finals = np.log10(np.array(result.summary["final_points"])[:, 0])
    assert np.allclose(finals, [-1.0, 1.0], atol=0.5)


@pytest.mark.parametrize(
    "bad, fragment",
    [
        (lambda p: np.full(len(p), np.nan), "client 1 returned nan at point {x="),
        (lambda p: np.where(p[:, 0] > 0.7, np.inf, 0.5), "client 1 returned inf at point {x=0.75"),
        (lambda p: np.zeros((len(p), 2)), "client 1 returned shape"),
        (lambda p: 1 / 0, "client 1 raised ZeroDivisionError"),
    ],
)
def test_bad_user_objectives_are_named_with_client_and_point(bad, fragment):
    fed = Federation.from_callables([lambda p: 0.5 + 0 * p[:, 0], bad], {"x": (0.0, 1.0)})
    with pytest.raises(ObjectiveError, match=fragment.replace("{", r"\{").replace("(", r"\(")):
        run(fed, alpha=0.5, horizon=1000, seed=0)


def test_noise_models_draw_exact_sums():
    rng = np.random.default_rng(0)
    means = np.array([0.2, 0.7])
    counts = np.array([100, 400])
    for kind in ("uniform", "gaussian", "bernoulli"):
        model = NoiseModel(kind, 0.1)
        draws = np.stack([model.sample_sums(means, counts, rng) for _ in range(2000)])
        assert np.allclose(draws.mean(axis=0) / counts, means, atol=2e-3)
    # sigma = 0 is noiseless; bernoulli sums are integers
    assert NoiseModel("uniform", 0.0).sample_sums(means, counts, rng).tolist() == [20.0, 280.0]
    b = NoiseModel("bernoulli").sample_sums(means, counts, rng)
    assert np.all(b == np.round(b))
    # the uniform sum's variance is n sigma^2 / 3
    u = np.stack([NoiseModel("uniform", 0.3).sample_sums(means, counts, rng) for _ in range(4000)])
    assert np.allclose(u.var(axis=0), counts * 0.09 / 3, rtol=0.1)


def test_run_config_from_flower_style_mapping():
    config = RunConfig.from_mapping({"alpha": "0.9", "problem": "doublesine", "noise-sigma": 0, "max-depth": "4"})
    assert config.alpha == 0.9 and config.noise_sigma == 0 and config.max_depth == 4
    with pytest.raises(ConfigError, match="unknown parameter 'alhpa'"):
        RunConfig.from_mapping({"alhpa": 0.1})
    with pytest.raises(ConfigError, match="num_clients=True is invalid"):
        RunConfig(num_clients=True)
