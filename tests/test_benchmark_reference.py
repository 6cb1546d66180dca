"""The benchmark's per-pull reference is the same algorithm as the engine."""

from benchmarks.reference import plain_pfxab
from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.problems.synthetic import synthetic_federation
from pfxab_flower.running.engine import run


def test_plain_reference_makes_the_engines_decisions_without_noise():
    fed = synthetic_federation("garland", 3, noise=NoiseModel("uniform", 0.0))
    for alpha in (0.0, 0.5, 1.0):
        result = run(fed, alpha=alpha, horizon=4_000, seed=0)
        assert result.summary["phases"] >= 2
        assert plain_pfxab(fed, alpha, 4_000) == result.summary["final_nodes"]
