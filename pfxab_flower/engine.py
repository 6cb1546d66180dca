"""The in-process engine: drives one server and ``M`` client machines in a plain loop.

It is a transport and nothing more: it moves the messages between the machines
in the same order as the Flower strategy and clients do, so both give the same
numbers for the same seed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pfxab_flower.accounting import CommunicationLog, score
from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.messages import FinishInstruction, Message, payload_size
from pfxab_flower.algorithms.phased import ClientMachine, Policy, ServerMachine, Settings
from pfxab_flower.algorithms.schedule import Schedule
from pfxab_flower.config import RunConfig, validate_algorithm_parameters
from pfxab_flower.faults import DEFAULT_MIN_FRACTION, NO_FAULTS, FaultPlan, parse_min_fraction
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.federation import Federation
from pfxab_flower.results import RunResult, build_result
from pfxab_flower.sampling import PullLog, SimulatedEnvironment


def make_settings(
    num_clients: int,
    *,
    alpha: float,
    horizon: int,
    seed: int,
    nu1: float = 1.0,
    rho: float = 0.5,
    max_depth: int | None = None,
    pf_pne_eps: float = 0.1,
    min_fraction: float = DEFAULT_MIN_FRACTION,
) -> Settings:
    """The :class:`Settings` every machine of a run shares."""
    schedule = Schedule(horizon=horizon, num_clients=num_clients, nu1=nu1, rho=rho, max_depth=max_depth)
    return Settings(schedule=schedule, alpha=alpha, seed=seed, pf_pne_eps=pf_pne_eps, min_fraction=min_fraction)


def record_exchange(
    log: CommunicationLog, phase: int, kind: str, broadcast: Message, replies: list[Message],
    recipients: int | None = None,
) -> None:
    """Log one exchange: the broadcast reaches ``recipients`` clients (default: one per reply), each replies once."""
    values_down, bytes_down = payload_size(broadcast)
    sizes = [payload_size(r) for r in replies]
    sent = len(replies) if recipients is None else recipients
    log.record(
        phase,
        kind,
        values_down * sent,
        bytes_down * sent,
        sum(v for v, _ in sizes),
        sum(b for _, b in sizes),
    )


@dataclass
class Simulation:
    """The machines, environments and communication log of one finished in-process run."""

    server: ServerMachine
    clients: list[ClientMachine]
    envs: list[SimulatedEnvironment]
    communication: CommunicationLog
    messages: list[tuple[Message, list[Message]]] = field(default_factory=list)


def simulate(
    federation: Federation, policy: Policy, settings: Settings, keep_messages: bool = False,
    faults: FaultPlan = NO_FAULTS,
) -> Simulation:
    """Drive one server and ``M`` clients to the horizon: the reference order of calls.

    With ``keep_messages`` every broadcast and its replies are kept (for tests and debugging).
    ``faults`` drops clients from phases as a Flower client injecting the same plan does:
    a client that misses a phase gets neither of its messages (it catches up later).
    """
    M = federation.num_clients
    sim = Simulation(
        server=ServerMachine(policy, settings),
        clients=[ClientMachine(policy, settings, m) for m in range(M)],
        envs=[SimulatedEnvironment(federation, m) for m in range(M)],
        communication=CommunicationLog(),
    )
    pairs = list(zip(sim.clients, sim.envs, strict=True))

    def exchange(phase: int, kind: str, broadcast: Message, replies: list[Message]) -> None:
        record_exchange(sim.communication, phase, kind, broadcast, replies, recipients=M)
        if keep_messages:
            sim.messages.append((broadcast, replies))

    while True:
        instruction = sim.server.next_instruction()
        if isinstance(instruction, FinishInstruction):
            finals = [c.finish(instruction, e) for c, e in pairs]
            exchange(instruction.phases + 1, "finish", instruction, finals)
            sim.server.finish(finals)
            return sim
        present = [(c, e) for c, e in pairs if not faults.misses(c.client, instruction.phase)]
        reports = [c.explore(instruction, e) for c, e in present]
        exchange(instruction.phase, "explore", instruction, reports)
        update = sim.server.aggregate(reports)
        active_sets = [c.eliminate(update, e) for c, e in present]
        exchange(instruction.phase, "eliminate", update, active_sets)
        sim.server.collect(active_sets)


def run(
    federation: Federation,
    algorithm: str = "pf-xab",
    alpha: float = 0.5,
    horizon: int = 2_000_000,
    seed: int = 0,
    nu1: float = 1.0,
    rho: float = 0.5,
    max_depth: int | None = None,
    pf_pne_eps: float = 0.1,
    describe: dict[str, Any] | None = None,
    faults: FaultPlan = NO_FAULTS,
    min_fraction: float = DEFAULT_MIN_FRACTION,
) -> RunResult:
    """Run one algorithm on ``federation`` in this process and score it exactly.

    ``describe`` adds problem-level entries (noise, spread, ...) to the summary; ``faults``
    injects client failures and ``min_fraction`` is the quorum (see :mod:`pfxab_flower.faults`).
    """
    validate_algorithm_parameters(algorithm, alpha, horizon, seed, nu1, rho, max_depth, pf_pne_eps)
    parse_min_fraction(min_fraction)
    started = time.perf_counter()
    M = federation.num_clients
    settings = make_settings(
        M, alpha=alpha, horizon=horizon, seed=seed, nu1=nu1, rho=rho, max_depth=max_depth, pf_pne_eps=pf_pne_eps,
        min_fraction=min_fraction,
    )
    sim = simulate(federation, make_policy(algorithm), settings, faults=faults)
    return scored_result(
        federation, algorithm, "inprocess", sim.server, [e.log for e in sim.envs], sim.communication,
        describe, time.perf_counter() - started,
    )


def scored_result(
    federation: Federation,
    algorithm: str,
    engine: str,
    server: ServerMachine,
    logs: list[PullLog],
    communication: CommunicationLog,
    describe: dict[str, Any] | None,
    wall_seconds: float,
) -> RunResult:
    """Score the clients' pull logs exactly and assemble the result: the last step of every engine."""
    settings = server.settings
    return build_result(
        federation=federation,
        server=server,
        ledger=score(federation, settings.alpha, settings.horizon, logs),
        communication=communication.frame(),
        parameters=run_parameters(algorithm, federation.name, engine, settings, describe),
        wall_seconds=wall_seconds,
    )


def run_parameters(
    algorithm: str, problem: str, engine: str, settings: Settings, describe: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The leading entries of a run's summary: what ran, where, with which parameters."""
    schedule = settings.schedule
    return {
        "algorithm": algorithm,
        "problem": problem,
        "engine": engine,
        "alpha": settings.alpha,
        "clients": settings.num_clients,
        "horizon": settings.horizon,
        "seed": settings.seed,
        "nu1": schedule.nu1,
        "rho": schedule.rho,
        "max_depth": schedule.max_depth,
        "pf_pne_eps": settings.pf_pne_eps,
        **(describe or {}),
    }


def settings_of(config: RunConfig) -> Settings:
    """The :class:`Settings` of a run configuration (the same for every engine)."""
    parameters = config.algorithm_parameters()
    del parameters["algorithm"]
    return make_settings(config.clients, **parameters)


def describe_problem(config: RunConfig) -> dict[str, Any]:
    """The problem-level parameters of a run config, for the summary."""
    return {"noise": config.noise, "noise_sigma": config.noise_sigma, "spread": config.spread}


def run_config(config: RunConfig, federation: Federation | None = None) -> RunResult:
    """Run a :class:`RunConfig` in process, on ``federation`` if given (reused, e.g. across seeds)."""
    if federation is None:
        federation = build_federation(config)
    return run(federation, **config.algorithm_parameters(), describe=describe_problem(config))
