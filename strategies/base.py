"""The part of a strategy that is the same on both Flower APIs (:class:`DriverStrategy`).

Each strategy tree derives from its own Flower base and from this class, which holds what does not
depend on the API: the driver built from checked keywords, the run's bounds, stop reason and result.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import numpy as np

from pfxab_flower.algorithms.registry import algorithm_names
from pfxab_flower.errors import ConfigError
from pfxab_flower.faults import DEFAULT_MIN_FRACTION, DEFAULT_ROUND_TIMEOUT
from pfxab_flower.problems.federation import Federation
from pfxab_flower.running.driver import ServerDriver
from pfxab_flower.running.results import RunResult
from pfxab_flower.schema.spec import AlgorithmSpec
from pfxab_flower.strategies.common import log_summary, make_driver

#: The core's logger: one line per phase (``phase 4 (depth 4): 16 active nodes, 6 eliminated, ...``) at INFO.
LOGGER = logging.getLogger("pfxab_flower")


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record is emitted.

    A plain ``StreamHandler(sys.stderr)`` keeps the stream it was given; if ``sys.stderr``
    is replaced later (by a test runner, or a caller capturing output), it would write
    to a closed file.
    """

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def show_phase_log(stream: Any = None) -> None:
    """Make the core's one line per phase (logger ``pfxab_flower``, INFO) visible, once, as ``pfxab: ...``."""
    if not LOGGER.handlers:
        handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
        handler.setFormatter(logging.Formatter("pfxab: %(message)s"))
        LOGGER.addHandler(handler)
        LOGGER.setLevel(logging.INFO)


def chosen_algorithm(strategy: type, given: str | None) -> str:
    """The algorithm a strategy of class ``strategy`` runs: the one its class fixes, else ``given``.

    A one-line :class:`ConfigError` when neither names one, or when ``given`` differs from the class's.
    """
    fixed: str | None = getattr(strategy, "algorithm", None)
    if fixed is not None:
        if given is not None and given != fixed:
            raise ConfigError(f"algorithm={given!r} is invalid; allowed: {fixed!r} (the algorithm of "
                              f"{strategy.__name__}), or the base, {strategy.__mro__[1].__name__}(algorithm=...)")
        return fixed
    if given is None:
        raise ConfigError(f"algorithm is missing; allowed: {', '.join(algorithm_names())}")
    return given


class DriverStrategy:
    """A strategy over one :class:`~pfxab_flower.running.driver.ServerDriver` of the registered ``algorithm``.

    ``algorithm`` is a keyword of the API's base class (``PhasedEliminationStrategy(algorithm="pf-sh", ...)``)
    or fixed by a subclass (``PFSH``, one per registered algorithm: ``strategies/named.py``).
    ``parameters`` are the algorithm's keywords, checked once (:meth:`AlgorithmSpec.build`):
    ``num_clients``, ``horizon``, ``alpha``, ``seed``, ``nu1``, ``rho``, ``max_depth``,
    ``confidence`` (declared defaults for those not given) and the algorithm's own
    (``candidates`` for PF-SH; another algorithm refuses it). Or ``spec``, a checked spec.

    ``num_clients`` nodes take part (Flower's ``partition-id`` 0..M-1; a node beyond them
    stands by). ``min_fraction`` of them must answer every exchange or the run stops.
    ``round_timeout`` is how long a round waits for replies (and a deployment for its
    nodes to connect). ``federation`` (simulation only) is the ground truth: the clients
    then attach their pull logs and the result carries the exact regret. ``reward_range``
    is where a reward can lie: a local mean outside it is rejected, never averaged (default:
    the federation's, else ``[-2e9, 2e9]``). ``confidence="bernstein"`` uses empirical-Bernstein
    widths from the observed variance instead of the paper's (it needs a real ``reward_range``,
    or a ``federation``).
    """

    #: The registered algorithm this strategy runs (a subclass fixes it; the base takes it as a keyword).
    algorithm: str

    def __init__(
        self,
        *,
        algorithm: str | None = None,
        min_fraction: float = DEFAULT_MIN_FRACTION,
        round_timeout: float = DEFAULT_ROUND_TIMEOUT,
        federation: Federation | None = None,
        reward_range: tuple[float, float] | None = None,
        spec: AlgorithmSpec | None = None,
        **parameters: Any,
    ) -> None:
        super().__init__()  # Flower's own Strategy base
        self.algorithm = chosen_algorithm(type(self), algorithm)
        self.driver: ServerDriver = make_driver(
            self.algorithm, min_fraction=min_fraction, round_timeout=round_timeout, federation=federation,
            reward_range=reward_range, spec=spec, **parameters,
        )
        self.round_timeout = float(round_timeout)

    def __repr__(self) -> str:
        named = "" if getattr(type(self), "algorithm", None) else f"algorithm={self.algorithm!r}, "  # the base's
        return (f"{type(self).__name__}({named}num_clients={self.driver.num_clients}, "
                f"horizon={self.driver.settings.horizon})")

    @property
    def num_rounds(self) -> int:
        """Flower rounds the run can take: one per phase (bounded from the horizon) plus one for the final exchange."""
        return self.driver.max_rounds

    @property
    def stop_reason(self) -> str | None:
        """Why the server stopped the run early (too few replies or nodes), or ``None``."""
        return self.driver.stop_reason

    @property
    def lost_clients(self) -> list[dict[str, Any]]:
        """Clients with no final point: ``client``, ``flower_node``, ``phase`` where lost, ``reason``."""
        return self.driver.lost_client_records()

    def final_points(self) -> np.ndarray:
        """Each client's final recommendation, ``(M, d)`` in the user's units."""
        return self.driver.final_points()

    def best_points(self) -> np.ndarray:
        """Each client's best observed point (highest mean of its own rewards), ``(M, d)``; NaN where none."""
        return self.driver.best_points()

    def best_observed(self) -> np.ndarray:
        """Each client's mean of its own rewards at its best observed point and their number, ``(M, 2)``."""
        return self.driver.best_observed()

    def run_result(self, describe: dict[str, Any] | None = None) -> RunResult:
        """The scored result (simulation: a federation was given), as the in-process engine builds it."""
        return self.driver.result("flower", {**(describe or {}), **self.describe()})

    def describe(self) -> dict[str, Any]:
        """What this strategy adds to the run's summary (the legacy one: whether SecAgg+ ran)."""
        return {}

    def log_configuration(self) -> None:
        """The run's parameters in the log, as Flower's own strategies' ``summary()`` writes them.

        At a run's start (both APIs): unless the process configured logging itself, the phase
        lines become visible, so a user's own ServerApp logs what the bundled app logs.
        """
        if not LOGGER.hasHandlers():
            show_phase_log()
        log_summary(self.driver, type(self).__name__)
