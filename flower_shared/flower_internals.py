"""The Flower internals the adapters use: each where Flower's public API has no hook for what we need.

Every other module uses Flower's public API only (``tests/test_flower_api.py``), so a release that
moves one of these breaks this module alone. Each internal, why it is needed and which Flower
releases pass: docs/flower.md ("Flower versions"). Each is imported where it is used, so a
ClientApp process never loads the SuperLink's modules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from flwr.common.constant import ErrorCode

if TYPE_CHECKING:
    from pathlib import Path

    from flwr.server import ClientManager, LegacyContext
    from flwr.serverapp import Grid

#: The code of an error reply from a ClientApp that raised (``Error(code=..., reason=...)``).
CLIENT_APP_RAISED = ErrorCode.CLIENT_APP_RAISED_EXCEPTION


# -- the legacy round loop (flwr.server.workflow.DefaultWorkflow's parts) ------------------------------------------
@contextmanager
def nodes_registered(grid: Grid, client_manager: ClientManager) -> Iterator[None]:
    """The grid's nodes kept registered in ``client_manager`` (as Flower's legacy client proxies) while inside."""
    from flwr.server.compat.app_utils import start_update_client_manager_thread

    thread, stop, registered = start_update_client_manager_thread(grid, client_manager)
    registered.wait()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def initial_parameters(grid: Grid, context: LegacyContext) -> None:
    """``DefaultWorkflow``'s first step: the strategy's initial parameters, kept where its fit workflows read them."""
    from flwr.server.workflow.default_workflows import default_init_params_workflow

    default_init_params_workflow(grid, context)


def start_rounds(context: LegacyContext, started: float) -> None:
    """Where Flower's fit and evaluate workflows (plain and SecAgg+) read the round: the run's start time kept."""
    from flwr.app import ConfigRecord
    from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, Key

    context.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord({Key.START_TIME: started})


def set_round(context: LegacyContext, flower_round: int) -> None:
    """The Flower round the next fit and evaluate workflows run (:func:`start_rounds` first)."""
    from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, Key

    context.state.config_records[MAIN_CONFIGS_RECORD][Key.CURRENT_ROUND] = flower_round


def centralized_evaluation(grid: Grid, context: LegacyContext) -> None:
    """``DefaultWorkflow``'s centralised evaluation of a round: ``strategy.evaluate``, into the ``History``."""
    from flwr.server.workflow.default_workflows import default_centralized_evaluation_workflow

    default_centralized_evaluation_workflow(grid, context)


def secure_round_state() -> Any:
    """A fresh state of Flower's SecAgg+ protocol (``WorkflowState``): ``SecAggPlusWorkflow.__call__`` makes its own
    and drops it, and when too few clients remain it halts the round without a word to the strategy. Keeping the
    state is the only way to learn how many clients were still taking part (``active_node_ids``)."""
    from flwr.server.workflow.secure_aggregation.secaggplus_workflow import WorkflowState

    return WorkflowState()


def proxy_grid(proxy: Any) -> Grid | None:
    """The grid behind one of Flower's legacy client proxies (``None`` for another proxy)."""
    return getattr(proxy, "grid", None)


# -- the simulation's grid ----------------------------------------------------------------------------------------
def is_simulation(grid: object) -> bool:
    """Whether ``grid`` is a simulation's (``run_simulation``, or ``flwr run`` on a simulation federation)."""
    from flwr.superlink.grid import InMemoryGrid

    return isinstance(grid, InMemoryGrid)


def set_reply_poll_interval(grid: Grid, seconds: float) -> None:
    """How often a simulation's grid polls for replies; any other grid is left as it is."""
    from flwr.superlink.grid import InMemoryGrid

    if isinstance(grid, InMemoryGrid):
        grid.pull_interval = seconds


# -- the flwr CLI -------------------------------------------------------------------------------------------------
def write_flower_config(home: Path) -> Path:
    """Flower's own default ``config.toml`` in a fresh ``FLWR_HOME``; its path.

    ``flwr run`` writes the same file when it is missing, and says so on every run
    ("Flower configuration not found. Created default configuration at ..."): the
    temporary home of ``pfxab simulate`` is new each time, so the note would be noise in every log.
    """
    from flwr.cli.constant import DEFAULT_FLOWER_CONFIG_TOML, FLOWER_CONFIG_FILE

    path = home / FLOWER_CONFIG_FILE
    path.write_text(DEFAULT_FLOWER_CONFIG_TOML, encoding="utf-8")
    return path


# -- the simulation engine's Ray backend ----------------------------------------------------------------------------
@contextmanager
def simulation_engine_wrapped(worker: Callable[[Callable[..., Any]], Callable[..., Any]],
                              terminate: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    """While inside, the simulation engine's message worker (``vce_api.worker``) and its Ray backend's ``terminate``
    are ``worker(original)`` and ``terminate(original)``; where this Flower has neither, nothing changes.

    Flower offers no hook at the moment its engine stops (``run_api``'s ``finally`` calls ``terminate``, and so
    ``ray.shutdown``, while its worker threads may still be in ``ray.get``), nor a way to know those threads.
    """
    try:
        from flwr.server.superlink.fleet.vce import vce_api
        from flwr.server.superlink.fleet.vce.backend.raybackend import RayBackend
    except ImportError:
        yield
        return
    original_worker, original_terminate = getattr(vce_api, "worker", None), getattr(RayBackend, "terminate", None)
    if original_worker is None or original_terminate is None:
        yield
        return
    vce_api.worker, RayBackend.terminate = worker(original_worker), terminate(original_terminate)  # type: ignore[method-assign]
    try:
        yield
    finally:
        vce_api.worker = original_worker
        RayBackend.terminate = original_terminate  # type: ignore[method-assign]


def backend_actors(backend: Any) -> list[Any]:
    """The actors of a Ray backend's pool: the idle ones (``pool.pool``) and those busy (``_future_to_actor``).

    Flower's ``terminate_all_actors`` reaches the idle ones only; its pool has no public list of the others.
    """
    pool = getattr(backend, "pool", None)
    idle, running = list(getattr(pool, "pool", [])), dict(getattr(pool, "_future_to_actor", {}))  # copies: the
    return [*idle, *running.values()]  # worker threads change both meanwhile
