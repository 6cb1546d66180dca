"""Flower's Ray simulation engine gives the in-process engine's numbers, for every algorithm and both APIs.

The runs share the worker's one Ray (``shared_ray``, tests/conftest.py). The default tier runs one
federated algorithm (PF-XAB) and one solo algorithm (local-only) on Ray, Message API; every other
algorithm and the legacy API are the slow tier (``exhaustive``): the same strategies and client apps
give the in-process numbers for every algorithm and both APIs without Ray, through the loopback
harness (tests/test_flower_message.py, tests/test_flower_strategy.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from pfxab_flower.running.engine import run_config
from pfxab_flower.running.results import RECOMMENDATION_KEYS
from pfxab_flower.schema.catalogue import ALGORITHMS
from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.simulations.flower.in_process_simulation import run_flower_simulation
from tests.conftest import cheap_horizon, cheap_options, shared_ray  # noqa: F401  (tests/conftest.py's; still importable from here)
from tests.patience import patient

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]

SAME_KEYS = (
    "algorithm", "problem", "regret", "regret_per_client", "final_nodes", "final_points", "phases",
    "communication_rounds", "values_down", "values_up", "rejected_replies",
    *RECOMMENDATION_KEYS,
)
#: On Ray in the default tier: one federated and one solo algorithm.
ON_RAY_BY_DEFAULT = ("pf-xab", "local-only")


@pytest.mark.parametrize(("algorithm", "api"), [
    *(pytest.param(a, "message", marks=() if a in ON_RAY_BY_DEFAULT else pytest.mark.exhaustive) for a in ALGORITHMS),
    pytest.param("pf-xab", "legacy", marks=pytest.mark.exhaustive),
])
@pytest.mark.usefixtures("shared_ray")
def test_ray_simulation_matches_inprocess(algorithm: str, api: str) -> None:
    # optuna-tpe's 1,000 default trials a site took longer than a round's timeout beside two busy loops, and
    # optuna-tpe-fed's 200 phases (400 Flower rounds at T = 10,000) outlasted the test's timeout there (806 s); what
    # is tested is the engines' equality, which tests/conftest.py's cheap trials and horizons show as well
    config = RunConfig(problem="garland", algorithm=algorithm, num_clients=3, alpha=0.5,
                       horizon=cheap_horizon(algorithm, 3, 10_000), seed=0,
                       **cheap_options(algorithm))
    flower = run_flower_simulation(config, options=AppOptions(round_timeout=patient(60.0), api=api))
    inprocess = run_config(config)
    for key in SAME_KEYS:
        assert flower.summary[key] == inprocess.summary[key], key
    assert flower.summary["engine"] == "flower"
    assert flower.phases.equals(inprocess.phases)


@pytest.mark.usefixtures("shared_ray")
def test_a_federation_passed_as_itself_travels_once_through_rays_object_store() -> None:
    """Flower's Ray engine pickles the ClientApp with every message: a federation in its closure must not ride
    along (issue 24: O(M) bytes per message). While Ray runs it pickles as a reference, and a worker gets it back."""
    import cloudpickle
    import ray

    from pfxab_flower.client_apps.sent_once import SentOnce
    from pfxab_flower.client_apps.sessions import federation_sessions
    from pfxab_flower.problems.synthetic import synthetic_federation
    from pfxab_flower.simulations.flower.app_builders import client_app

    federation = synthetic_federation("garland", 1000)
    whole = len(cloudpickle.dumps(federation))
    app = len(cloudpickle.dumps(client_app(federation_sessions(federation))))
    assert app < whole / 5, (app, whole)

    @ray.remote
    def values_in_a_worker(shared: SentOnce) -> np.ndarray:  # Ray pickles its arguments as Flower's engine does
        return shared.value.local_values(np.array([[0.25], [0.5]]))

    np.testing.assert_array_equal(ray.get(values_in_a_worker.remote(SentOnce(federation)), timeout=patient(60)),
                                  federation.local_values(np.array([[0.25], [0.5]])))
