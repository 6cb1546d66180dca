"""A user objective that returns NaN, inf, a wrong shape or raises: one clear line through Flower.

The failing client is a failed client (a dropout): one log line names the phase, the
client and the point; with ``min-fraction = 1`` the run stops with that line instead.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

from pfxab_flower.client_apps import from_context, objective_sessions
from pfxab_flower.errors import ClientFailedError, ObjectiveError, RunStoppedError, client_failure_text
from pfxab_flower.faults import InjectedFailureError
from pfxab_flower.problems.federation import Federation
from pfxab_flower.schema.run_config import AppOptions, RunConfig
from pfxab_flower.strategies import PFXABStrategy
from pfxab_flower.strategies.common import failure_reason
from tests.flower_loopback import run_loopback
from tests.patience import patient

DOMAIN = {"x": (0.0, 1.0)}


def good(points: np.ndarray) -> np.ndarray:
    return 1.0 - np.abs(points[:, 0] - 0.3)


def broken(kind: str):
    def objective(points: np.ndarray) -> np.ndarray:
        values = good(points)
        if kind == "raises":
            raise ZeroDivisionError("model diverged")
        if kind == "shape":
            return values[:-1]
        values[0] = {"nan": np.nan, "inf": np.inf}[kind]
        return values

    return objective


EXPECTED = {
    "nan": r"objective of client 1 returned nan at point \{x=",
    "inf": r"objective of client 1 returned inf at point \{x=",
    "shape": r"objective of client 1 returned shape \(\d+,\) for \d+ points",
    "raises": r"objective of client 1 raised ZeroDivisionError",
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_a_broken_objective_is_one_line_naming_the_client_and_the_point(kind: str, caplog) -> None:
    objectives = [good, broken(kind), good, good]
    sessions = objective_sessions(lambda points, m: objectives[m](points), DOMAIN)
    strategy = PFXABStrategy(num_clients=4, horizon=5_000, seed=0)
    with caplog.at_level(logging.WARNING, logger="pfxab_flower"):
        run_loopback(strategy, sessions, 4)
    lines = [r.getMessage() for r in caplog.records if "sent no usable local-means reply" in r.getMessage()]
    assert lines and all("\n" not in line for line in lines)
    assert all(re.search(EXPECTED[kind], line) for line in lines), lines
    # client 1 fails each exploration, then rejoins for the elimination (it has no local means: it keeps all)
    machine = strategy.driver.machine
    assert strategy.driver.finished and [row["failed_local_means"] for row in machine.history] == [1, 1]
    assert machine.failures == machine.completed == 2
    # a quorum of every client turns the same failure into a stop, with the same line
    strategy = PFXABStrategy(num_clients=4, horizon=5_000, seed=0, min_fraction=1.0)
    run_loopback(strategy, sessions, 4)
    assert not strategy.driver.finished and strategy.stop_reason is not None
    assert "only 3 of 4 clients" in strategy.stop_reason
    assert re.search(EXPECTED[kind], strategy.stop_reason)


def test_failure_reason_unwraps_flowers_client_app_exception() -> None:
    wrapped = RuntimeError("<class 'ray.exceptions.RayTaskError(ClientAppException)'>:<'ray::ClientAppActor.run()\n"
                           "Traceback ...\nException ClientAppException occurred. Message: objective of client 2 "
                           "returned nan at point {x=0.5}; allowed: finite values'>). It originated ...")
    assert failure_reason(wrapped) == "objective of client 2 returned nan at point {x=0.5}; allowed: finite values"
    assert failure_reason(ValueError("plain\nmessage")) == "plain message"


@pytest.mark.exhaustive  # default tier: the same over Flower's legacy loop (above), a failure's line on Ray (below)
@pytest.mark.ray
@pytest.mark.timeout(120)
@pytest.mark.usefixtures("shared_ray")
def test_a_broken_objective_on_ray_stops_the_run_with_one_line(capfd) -> None:
    from pfxab_flower.simulations.flower.in_process_simulation import run_flower

    objectives = [good, broken("nan"), good]
    federation = Federation.from_callables(objectives, DOMAIN, noise_sigma=0.1)
    config = RunConfig(num_clients=3, horizon=5_000, seed=0)
    sessions = objective_sessions(lambda points, m: objectives[m](points), DOMAIN)
    with pytest.raises(RunStoppedError, match=r"only 2 of 3 clients.*objective of client 1 returned nan at point"):
        run_flower(federation, config, session_fn=sessions,
                   options=AppOptions(round_timeout=patient(60.0), min_fraction=1.0, api="legacy"))
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert "objective of client 1 returned nan" in err


# -- a failure keeps its exception's type and message, and names the site --------------------------------


def _flower_reason(exc: BaseException) -> str:
    """The reason of Flower's error reply for an exception a ClientApp raised (flwr 1.41's own format)."""
    return str(type(exc)) + ":<'" + str(exc) + "'>"


def test_a_failure_reads_the_same_whatever_flower_wrapped_around_it() -> None:
    from flwr.clientapp.client_app import ClientAppException

    ours = ClientFailedError(client_failure_text(KeyError("data-dir"), 1, "lab-a"))
    line = "client 1 (site 'lab-a'): KeyError: 'data-dir'"
    assert str(ours) == line
    assert failure_reason(_flower_reason(ClientAppException(str(ours)))) == line  # the simulation keeps str() only
    assert failure_reason(_flower_reason(ours)) == line  # a SuperNode adds the class
    assert failure_reason(_flower_reason(KeyError("data-dir"))) == "KeyError: 'data-dir'"  # a ClientApp not ours


def test_the_failure_text_keeps_type_and_message_and_names_client_and_site() -> None:
    assert client_failure_text(KeyError("data-dir"), 2, None) == "client 2: KeyError: 'data-dir'"
    assert client_failure_text(KeyError("data-dir"), None, "lab-a") == "site 'lab-a': KeyError: 'data-dir'"
    assert client_failure_text(RuntimeError(), 0, None) == "client 0: RuntimeError"
    injected = InjectedFailureError("client 0: injected failure in phase 1 (fail-rate=1)")
    assert client_failure_text(injected, 0, "lab-a") == (
        "client 0 (site 'lab-a'): injected failure in phase 1 (fail-rate=1)")
    objective = ObjectiveError("objective of client 1 raised KeyError: 'data-dir' at point {x=0.5}")
    assert client_failure_text(objective, 1, None) == f"client 1: {objective}"  # ours: one line already


def _builder_that_needs_a_data_dir():
    @from_context
    def build(context):
        context.node_config["data-dir"]  # only the site given one has it
        return good

    return build


def test_a_site_whose_objective_raises_is_named_by_its_label_in_the_servers_line(caplog) -> None:
    """A user objective raising ``KeyError('data-dir')`` at one site (Message API, sites labelled)."""
    from pfxab_flower.client_apps import message_client_app
    from pfxab_flower.strategies import PFXAB
    from tests.message_loopback import LoopbackGrid
    from tests.message_loopback import run_loopback as run_message_loopback

    grid = LoopbackGrid(3, message_client_app(objective_sessions(_builder_that_needs_a_data_dir(), DOMAIN)))
    for m, context in enumerate(grid.contexts.values()):
        context.node_config["site"] = f"lab-{'abc'[m]}"
        if m != 1:
            context.node_config["data-dir"] = "/data"
    strategy = PFXAB(num_clients=3, horizon=5_000, seed=0, min_fraction=1.0)
    with caplog.at_level(logging.WARNING, logger="pfxab_flower"), pytest.raises(RunStoppedError) as stopped:
        run_message_loopback(strategy, grid)
    lines = [r.getMessage() for r in caplog.records if "no usable local-means reply" in r.getMessage()]
    assert lines == ["phase 1: client 1 (site 'lab-b', Flower node 101) sent no usable local-means reply: "
                     "KeyError: 'data-dir'"]  # the client named once, with its site and node
    assert str(stopped.value).endswith("from client 1 (site 'lab-b', Flower node 101): KeyError: 'data-dir'")


@pytest.mark.ray
@pytest.mark.timeout(120)
@pytest.mark.usefixtures("shared_ray")
@pytest.mark.parametrize("api", ["message", pytest.param("legacy", marks=pytest.mark.exhaustive)])
def test_a_site_whose_objective_raises_keeps_the_exceptions_type_and_message_on_ray(api: str, capfd) -> None:
    """On Ray (the Message API in the default tier; the legacy API's failure reads the same whatever Flower wraps
    around it, above)."""
    from pfxab_flower.simulations.flower.in_process_simulation import run_flower

    @from_context
    def build(context):
        if context.node_config["partition-id"] == 1:
            context.node_config["data-dir"]
        return good

    federation = Federation.from_callables([good] * 3, DOMAIN, noise_sigma=0.1)
    config = RunConfig(num_clients=3, horizon=5_000, seed=0)
    with pytest.raises(RunStoppedError, match=r"from client 1 \(Flower node \d+\): KeyError: 'data-dir'$"):
        run_flower(federation, config, session_fn=objective_sessions(build, DOMAIN),
                   options=AppOptions(round_timeout=patient(60.0), min_fraction=1.0, api=api))
    err = capfd.readouterr().err
    assert re.search(r"client 1 \(Flower node \d+\) sent no usable local-means reply: KeyError: 'data-dir'\n", err)
    assert "Traceback" not in err  # an expected failure is an error reply, not an exception Flower logs
