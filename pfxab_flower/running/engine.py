"""The in-process engine: drives one :class:`ServerDriver` and ``M`` :class:`ClientSession` in a plain loop.

It is a transport and nothing more: it hands the driver's broadcasts to every session
and the replies back to the driver, in the same order as the Flower strategies do, and
the driver and sessions are the very objects the Flower adapters use; so every engine
gives the same numbers for the same seed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any

import numpy as np

from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.messages import Message
from pfxab_flower.algorithms.phased import Policy, ServerMachine, Settings
from pfxab_flower.errors import ConfigError, RunStoppedError
from pfxab_flower.faults import DEFAULT_MIN_FRACTION, NO_FAULTS, FaultPlan, InjectedFailureError
from pfxab_flower.limits import MAX_PULLS
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.registry import declared_options as problem_options
from pfxab_flower.problems.sampling import SimulatedEnvironment
from pfxab_flower.running.client_session import ClientSession, LateReplyError, MemoryStore
from pfxab_flower.running.driver import ServerDriver
from pfxab_flower.running.exchanges import Exchange, Failure, Outgoing
from pfxab_flower.running.results import RunResult
from pfxab_flower.schema.catalogue import parse
from pfxab_flower.schema.run_config import RunConfig, check_evaluation_budget
from pfxab_flower.schema.spec import AlgorithmSpec


def make_settings(
    num_clients: int,
    *,
    algorithm: str = "pf-xab",
    min_fraction: float = DEFAULT_MIN_FRACTION,
    reward_range: tuple[float, float] | None = None,
    **parameters: Any,
) -> Settings:
    """The :class:`Settings` every machine of a run shares, from Python keywords (checked once, here).

    ``parameters`` are the spec's keywords (:meth:`AlgorithmSpec.build`): the common ones and
    ``algorithm``'s own (``candidates`` for ``pf-sh``).
    """
    spec = AlgorithmSpec.build(algorithm, num_clients=num_clients, reward_range=reward_range, **parameters)
    return Settings(spec, min_fraction=min_fraction)


def payload_size(message: Message) -> tuple[int, int]:
    """``(values, bytes)`` of a message's payload: array elements and scalars (8 bytes each)."""
    values = 0
    nbytes = 0
    for part in fields(message):
        value = getattr(message, part.name)
        if value is None:  # an optional part that is not sent
            continue
        if isinstance(value, Mapping):  # named statistics: each array counts (none sent: nothing)
            values += sum(int(np.asarray(v).size) for v in value.values())
            nbytes += sum(int(np.asarray(v).nbytes) for v in value.values())
        elif isinstance(value, AlgorithmSpec):  # as sent: one scalar per param-* key
            values += len(value.to_wire())
            nbytes += 8 * len(value.to_wire())
        elif isinstance(value, np.ndarray):
            values += value.size
            nbytes += value.nbytes
        else:
            values += 1
            nbytes += 8
    return values, nbytes


def record_exchange(
    driver: ServerDriver, phase: int, kind: str, broadcast: Message, replies: list[Message], recipients: int
) -> None:
    """Log one exchange: the broadcast reaches ``recipients`` clients, each reply is counted once."""
    values_down, bytes_down = payload_size(broadcast)
    sizes = [payload_size(r) for r in replies]
    driver.record(phase, kind, values_down * recipients, bytes_down * recipients,
                  sum(v for v, _ in sizes), sum(b for _, b in sizes))


@dataclass
class Simulation:
    """The driver, client sessions and their stores of one finished in-process run."""

    driver: ServerDriver
    sessions: list[ClientSession]
    stores: list[MemoryStore]
    federation: Federation
    messages: list[tuple[Message, list[Message]]] = field(default_factory=list)

    @property
    def server(self) -> ServerMachine:
        return self.driver.machine

    @property
    def clients(self) -> list[MemoryStore]:
        """What each client kept: ``.state`` is its :class:`~pfxab_flower.algorithms.phased.ClientState`."""
        return self.stores

    @property
    def envs(self) -> list[SimulatedEnvironment]:
        """Each client's environment as it ended (its pull log)."""
        return [SimulatedEnvironment.restored(self.federation, m, store.environment)
                for m, store in enumerate(self.stores)]


def _no_wait(seconds: float) -> None:
    """The in-process engine has no clock: a straggler's lateness is decided by the fault plan alone."""


#: Told the pulls per client done so far after every exchange (a progress bar's update).
Progress = Callable[[int], None]


def simulate(
    federation: Federation, policy: Policy, settings: Settings, keep_messages: bool = False,
    faults: FaultPlan = NO_FAULTS, report_pulls: bool = True, progress: Progress | None = None,
) -> Simulation:
    """Drive one :class:`ServerDriver` and ``M`` :class:`ClientSession` to the horizon: the reference order of calls.

    With ``keep_messages`` every broadcast and its replies are kept (for tests and debugging);
    ``progress`` is told the pulls per client made so far after each exchange (the horizon at the end).
    ``faults`` drops clients from phases exactly as a Flower client applying the same plan
    does (the sessions apply it): a client that misses a phase sends neither of its replies.
    """
    M = federation.num_clients
    driver = ServerDriver(policy.name, settings, federation if report_pulls else None)
    stores = [MemoryStore() for _ in range(M)]
    sessions = [
        ClientSession(m, stores[m], partial(SimulatedEnvironment.restored, federation, m), faults, sleep=_no_wait)
        for m in range(M)
    ]
    sim = Simulation(driver, sessions, stores, federation)

    def exchange(outgoing: Outgoing) -> Exchange:
        result = Exchange()
        for session in sessions:
            try:
                reply = session.handle(outgoing.message)
            except (InjectedFailureError, LateReplyError) as exc:
                result.failures.append(Failure(str(exc), client=session.client))
                continue
            result.add(reply.report, None, reply.harness)
        record_exchange(driver, outgoing.phase, outgoing.kind, outgoing.message, result.reports, recipients=M)
        if keep_messages:
            sim.messages.append((outgoing.message, result.reports))
        return result

    while (outgoing := driver.next_exchange()) is not None:
        driver.deliver(exchange(outgoing))
        if progress is not None:
            progress(settings.horizon if driver.finished else driver.machine.pulls)
    if driver.stop_reason is not None:
        raise RunStoppedError(driver.stop_reason)
    return sim


def run(
    federation: Federation,
    algorithm: str = "pf-xab",
    *,
    describe: dict[str, Any] | None = None,
    faults: FaultPlan = NO_FAULTS,
    min_fraction: float = DEFAULT_MIN_FRACTION,
    **parameters: Any,
) -> RunResult:
    """Run one algorithm on ``federation`` in this process and score it exactly.

    ``parameters`` are the algorithm's keywords, checked once here (:func:`run_spec`):
    ``alpha``, ``horizon``, ``seed``, ``nu1``, ``rho``, ``max_depth``, ``confidence`` (the
    declared defaults for those not given) and the algorithm's own (``candidates`` for
    ``pf-sh``; another algorithm refuses it). ``describe`` adds problem-level entries
    (noise, spread, ...) to the summary; ``faults`` injects client failures and
    ``min_fraction`` is the quorum (see :mod:`pfxab_flower.faults`).
    """
    spec = run_spec(federation, algorithm, **parameters)
    min_fraction = parse("min_fraction", min_fraction)
    return run_checked(federation, spec, describe=describe, faults=faults, min_fraction=min_fraction)


def run_spec(federation: Federation, algorithm: str = "pf-xab", **parameters: Any) -> AlgorithmSpec:
    """The checked spec of :func:`run`'s keywords on ``federation``; nothing runs.

    One :class:`ConfigError` line naming the Python keyword, so a caller with many runs
    (:func:`pfxab_flower.studies.comparison.compare`) can check them all before the first starts.
    """
    if not isinstance(federation, Federation):  # run(None), run(config): one line, not an AttributeError
        raise ConfigError(f"federation={federation!r} is invalid; allowed: a Federation (Federation.from_callables, "
                          "build_federation(config)); run_config(config) runs a RunConfig")
    spec = AlgorithmSpec.build(algorithm, num_clients=federation.num_clients, reward_range=federation.reward_range,
                               dimensions=federation.domain.ndim, **parameters)
    check_evaluation_budget(federation.evaluation, spec.max_evaluations, spec.horizon)
    if federation.num_clients * spec.horizon > MAX_PULLS:  # each limit alone allowed hours of work
        raise ConfigError(f"horizon={spec.horizon!r} is invalid; allowed: an integer in "
                          f"[1, {MAX_PULLS // federation.num_clients:,}] with {federation.num_clients} clients "
                          f"(clients x horizon at most {MAX_PULLS:,}; see docs/scaling.md)")
    return spec


def run_checked(
    federation: Federation, spec: AlgorithmSpec, *, describe: dict[str, Any] | None = None,
    faults: FaultPlan = NO_FAULTS, min_fraction: float = DEFAULT_MIN_FRACTION, progress: Progress | None = None,
) -> RunResult:
    """Run a checked spec (:func:`run_spec`, :meth:`AlgorithmSpec.from_config`) as it is: no check is repeated."""
    sim = simulate(federation, make_policy(spec.algorithm), Settings(spec, min_fraction=min_fraction), faults=faults,
                   progress=progress)
    return sim.driver.result("inprocess", describe)


def describe_problem(config: RunConfig) -> dict[str, Any]:
    """The problem-level parameters of a run config, for the summary: the noise, and the problems' own that
    always hold a value (``spread``; not the optional ones, e.g. landmine's data file)."""
    own = {p.name: config.options[p.name] for p in problem_options().values() if not p.optional}
    return {"noise": config.noise, "noise_sigma": config.noise_sigma, **own}


def run_config(config: RunConfig, federation: Federation | None = None, progress: Progress | None = None) -> RunResult:
    """Run a :class:`RunConfig` in process, on ``federation`` if given (reused, e.g. across seeds); ``progress`` as
    :func:`simulate`'s.

    ``wall_seconds`` is the whole call, building the federation included (loading
    data, reading tables): ``setup_seconds`` is that part, ``scoring_seconds`` the scoring
    after the last exchange, ``run_seconds`` the rest.
    """
    started = time.perf_counter()
    if federation is None:
        federation = build_federation(config)
    setup_seconds = time.perf_counter() - started
    spec = AlgorithmSpec.from_config(config, federation.reward_range, federation.domain.ndim)
    result = run_checked(federation, spec, describe=describe_problem(config), progress=progress)
    wall_seconds = time.perf_counter() - started
    scoring_seconds = result.summary["scoring_seconds"]
    result.summary.update(wall_seconds=wall_seconds, setup_seconds=setup_seconds,
                          run_seconds=wall_seconds - setup_seconds - scoring_seconds)
    return result
