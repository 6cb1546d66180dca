"""Flower's Ray simulation engine gives the in-process engine's numbers, for every algorithm and both APIs.

Ray starts once for the module: Flower's Ray backend shuts Ray down after each
run, so the three runs share a Ray started here (its ``terminate`` only stops
the run's actors while the fixture is active).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from pfxab_flower.running.engine import run_config
from pfxab_flower.running.results import RECOMMENDATION_KEYS
from pfxab_flower.schema.catalogue import ALGORITHMS
from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.simulations.environment import ray_environment
from pfxab_flower.simulations.processes import processes_with_marker
from pfxab_flower.simulations.run_flower import run_flower_simulation
from tests.patience import patient

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]

SAME_KEYS = (
    "algorithm", "problem", "regret", "regret_per_client", "final_nodes", "final_points", "phases",
    "communication_rounds", "values_down", "values_up", "rejected_replies",
    *RECOMMENDATION_KEYS,
)


@pytest.fixture(scope="module")
def shared_ray():
    ray = pytest.importorskip("ray")
    from flwr.server.superlink.fleet.vce.backend.raybackend import RayBackend

    original = RayBackend.terminate

    def terminate_actors_only(self: RayBackend) -> None:
        if self.pool:
            self.pool.terminate_all_actors()

    with ray_environment() as ray_dir:
        ray.init(num_cpus=os.cpu_count(), num_gpus=0, include_dashboard=False, _temp_dir=str(ray_dir),
                 logging_level="WARNING", log_to_driver=False)
        RayBackend.terminate = terminate_actors_only
        try:
            yield ray_dir
        finally:
            RayBackend.terminate = original
            ray.shutdown()
    assert processes_with_marker(str(ray_dir)) == []  # no Ray process left behind


@pytest.mark.parametrize(("algorithm", "api"), [*((a, "message") for a in ALGORITHMS), ("pf-xab", "legacy")])
def test_ray_simulation_matches_inprocess(shared_ray, algorithm: str, api: str) -> None:
    config = RunConfig(problem="garland", algorithm=algorithm, clients=3, alpha=0.5, horizon=10_000, seed=0)
    flower = run_flower_simulation(config, options=AppOptions(round_timeout=patient(60.0), api=api))
    inprocess = run_config(config)
    for key in SAME_KEYS:
        assert flower.summary[key] == inprocess.summary[key], key
    assert flower.summary["engine"] == "flower"
    assert flower.phases.equals(inprocess.phases)


def test_a_federation_passed_as_itself_travels_once_through_rays_object_store(shared_ray) -> None:
    """Flower's Ray engine pickles the ClientApp with every message: a federation in its closure must not ride
    along (issue 24: O(M) bytes per message). While Ray runs it pickles as a reference, and a worker gets it back."""
    import cloudpickle
    import ray

    from pfxab_flower.client_apps.sent_once import SentOnce
    from pfxab_flower.client_apps.sessions import federation_sessions
    from pfxab_flower.problems.synthetic import synthetic_federation
    from pfxab_flower.simulations.apps import client_app

    federation = synthetic_federation("garland", 1000)
    whole = len(cloudpickle.dumps(federation))
    app = len(cloudpickle.dumps(client_app(federation_sessions(federation))))
    assert app < whole / 5, (app, whole)

    @ray.remote
    def values_in_a_worker(shared: SentOnce) -> np.ndarray:  # Ray pickles its arguments as Flower's engine does
        return shared.value.local_values(np.array([[0.25], [0.5]]))

    np.testing.assert_array_equal(ray.get(values_in_a_worker.remote(SentOnce(federation)), timeout=patient(60)),
                                  federation.local_values(np.array([[0.25], [0.5]])))
