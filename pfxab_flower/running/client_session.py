"""One client's side of a run, whatever carries its messages: load state, apply faults, run, save.

Every engine (in-process, legacy ``NumPyClient``, Message-API ``ClientApp``) hands each message to
a :class:`ClientSession`, so the same code runs between a message and its reply on every engine.
A session needs its client index, a place for its state and its environment.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.messages import (
    ActiveSetReport,
    FinishInstruction,
    FinishReport,
    GlobalUpdate,
    LocalReport,
    PhaseInstruction,
)
from pfxab_flower.algorithms.phased import ClientMachine, ClientState, Settings
from pfxab_flower.algorithms.run_spec import RunSpec
from pfxab_flower.faults import NO_FAULTS, FaultPlan
from pfxab_flower.problems.sampling import Environment

#: What a session keeps of its environment between messages (e.g. the pull log): named arrays.
EnvironmentState = dict[str, np.ndarray]
#: Builds the client's environment from what it kept (``None`` before its first message).
EnvironmentFactory = Callable[[Mapping[str, np.ndarray] | None], Environment]

#: The harness key of the phases a solo baseline's client ran alone (local-only's own PF-XAB).
SOLO_PHASES = "solo-phases"

Instruction = PhaseInstruction | GlobalUpdate | FinishInstruction
Report = LocalReport | ActiveSetReport | FinishReport


class LateReplyError(RuntimeError):
    """An injected straggler answered after the round timeout: its reply is lost, its work not kept."""


class ClientStore(Protocol):
    """Where a client keeps its machine state and its environment's state between messages."""

    def load(self) -> tuple[ClientState, EnvironmentState | None]: ...

    def save(self, state: ClientState, environment: EnvironmentState) -> None: ...


@dataclass
class MemoryStore:
    """A :class:`ClientStore` in this process's memory (the in-process engine)."""

    state: ClientState = field(default_factory=ClientState)
    environment: EnvironmentState | None = None

    def load(self) -> tuple[ClientState, EnvironmentState | None]:
        return self.state, self.environment

    def save(self, state: ClientState, environment: EnvironmentState) -> None:
        self.state, self.environment = state, environment


@dataclass(frozen=True)
class SessionReply:
    """A client's reply and, when the server asked for it, its harness data (simulation only)."""

    report: Report
    harness: EnvironmentState | None = None


class ClientSession:
    """Client ``client``: turns each server message into its reply through a :class:`ClientMachine`.

    ``faults`` injects the run's dropouts and stragglers (:mod:`pfxab_flower.faults`), drawn
    with the run's seed as the server sends it (a client need not know the seed);
    ``sleep`` is how a straggler waits (the in-process engine has no clock and passes a
    no-op). A message the client fails or answers too late changes nothing it keeps.
    """

    def __init__(
        self,
        client: int,
        store: ClientStore,
        make_environment: EnvironmentFactory,
        faults: FaultPlan = NO_FAULTS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.store = store
        self.make_environment = make_environment
        self.faults = faults
        self.sleep = sleep

    def stands_by(self, parameters: RunSpec) -> bool:
        """Whether this node is not one of the run's clients (its index is ``>= num_clients``)."""
        return not 0 <= self.client < parameters.num_clients

    def handle(self, message: Instruction) -> SessionReply:
        """Run the machine on ``message`` and keep the new state; raise if the client fails.

        ``message.parameters`` is trusted: a Flower client checked it when it decoded the message
        (:meth:`AlgorithmSpec.from_wire`); the in-process engine's server built it checked.
        """
        parameters = message.parameters
        if not isinstance(message, FinishInstruction):
            faults = replace(self.faults, seed=parameters.seed)  # the run's seed is the server's
            faults.check(self.client, message.phase)  # InjectedFailureError: nothing kept
            if faults.straggle(self.client, message.phase, self.sleep):
                raise LateReplyError(f"client {self.client}: reply to phase {message.phase} came after the "
                                     f"round timeout ({faults.round_timeout:g} s)")
        state, saved = self.store.load()
        machine = ClientMachine(make_policy(parameters.algorithm), Settings(parameters), self.client, state)
        environment = self.make_environment(saved)
        if isinstance(message, PhaseInstruction):
            report: Report = machine.explore(message, environment)
        elif isinstance(message, GlobalUpdate):
            report = machine.eliminate(message, environment)
        else:
            report = machine.finish(message, environment)
        kept = environment.export()
        self.store.save(machine.state, kept)
        if not parameters.report_pulls:
            return SessionReply(report)
        # a solo baseline's phases happen inside its client: the harness tells the server how many it ran
        solo = {SOLO_PHASES: np.array([machine.state.solo_phases], dtype=np.int64)} if machine.policy.solo else {}
        return SessionReply(report, {**kept, **solo})
