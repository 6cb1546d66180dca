"""One Flower ``NumPyClient`` for every phased-elimination algorithm: a transport for ``ClientMachine``.

``fit`` runs global and local exploration (``ClientMachine.explore``) or, in the
last round, exploitation until the horizon (``finish``); ``evaluate`` runs
exploitation while waiting and elimination (``eliminate``). Flower builds a new
client object for every message, so everything the machine carries between
messages (``ClientState.to_arrays()``) and the pull log of the simulation
harness live in ``context.state`` and are reloaded and saved around each call.
A call that raises saves nothing (Flower drops the state change too).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from flwr.app import Array, ArrayRecord, RecordDict
from flwr.client import NumPyClient

from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.messages import FinishInstruction
from pfxab_flower.algorithms.phased import ClientMachine, ClientState, Settings
from pfxab_flower.sampling import Environment, PullLog
from strategies import serde

STATE_KEY = "pfxab-client-state"
LOG_KEY = "pfxab-pull-log"

#: Builds the client's environment around its pull log (kept across messages).
EnvironmentFactory = Callable[[PullLog], Environment]


class PhasedClient(NumPyClient):
    """Client ``client`` of algorithm ``algorithm``; ``make_env(log)`` gives its objective and noise.

    With ``send_pull_log`` the final reply carries the pull log (simulation only:
    the server app scores the exact regret from it; it is not part of the algorithm).
    """

    def __init__(
        self,
        algorithm: str,
        settings: Settings,
        client: int,
        make_env: EnvironmentFactory,
        state: RecordDict,
        send_pull_log: bool = True,
    ) -> None:
        self.store = state
        self.log = load_pull_log(state)
        self.machine = ClientMachine(make_policy(algorithm), settings, client, load_client_state(state))
        self.env = make_env(self.log)
        self.send_pull_log = send_pull_log

    def fit(self, parameters: list[np.ndarray], config: dict) -> tuple[list[np.ndarray], int, dict]:
        instruction = serde.fit_ins_to_instruction(parameters, config)
        if isinstance(instruction, FinishInstruction):
            report = self.machine.finish(instruction, self.env)
            harness = [self.log.node_ids, self.log.counts] if self.send_pull_log else []
            reply = serde.report_to_fit_reply(report, harness)
        else:
            reply = serde.report_to_fit_reply(self.machine.explore(instruction, self.env))
        self._save()
        return reply

    def evaluate(self, parameters: list[np.ndarray], config: dict) -> tuple[float, int, dict]:
        report = self.machine.eliminate(serde.evaluate_ins_to_update(parameters, config), self.env)
        self._save()
        return serde.active_set_to_evaluate_reply(report)

    def _save(self) -> None:
        save_client_state(self.store, self.machine.state, self.log)


def load_client_state(state: RecordDict) -> ClientState:
    if STATE_KEY not in state:
        return ClientState()
    record = state[STATE_KEY]
    return ClientState.from_arrays({key: record[key].numpy() for key in record})


def load_pull_log(state: RecordDict) -> PullLog:
    if LOG_KEY not in state:
        return PullLog.empty()
    record = state[LOG_KEY]
    return PullLog(record["node_ids"].numpy().astype(np.int64), record["counts"].numpy().astype(np.int64))


def save_client_state(state: RecordDict, client_state: ClientState, log: PullLog) -> None:
    state[STATE_KEY] = ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in client_state.to_arrays().items()})
    state[LOG_KEY] = ArrayRecord({"node_ids": Array(log.node_ids), "counts": Array(log.counts)})


class _FixedAlgorithmClient(PhasedClient):
    """A :class:`PhasedClient` whose algorithm is fixed by the class."""

    algorithm = "pf-xab"

    def __init__(
        self, settings: Settings, client: int, make_env: EnvironmentFactory, state: RecordDict,
        send_pull_log: bool = True,
    ) -> None:
        super().__init__(self.algorithm, settings, client, make_env, state, send_pull_log)


class PFXABClient(_FixedAlgorithmClient):
    """A PF-XAB client."""

    algorithm = "pf-xab"


class FedPNEClient(_FixedAlgorithmClient):
    """A Fed-PNE client."""

    algorithm = "fed-pne"


class PFPNEClient(_FixedAlgorithmClient):
    """A PF-PNE client."""

    algorithm = "pf-pne"
