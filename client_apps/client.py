"""One Flower ``NumPyClient`` for every phased-elimination algorithm: a transport for ``ClientMachine``.

``fit`` runs global and local exploration (``ClientMachine.explore``) or, in the
last round, exploitation until the horizon (``finish``); ``evaluate`` runs
exploitation while waiting and elimination (``eliminate``). Flower builds a new
client object for every message, so everything the machine carries between
messages (``ClientState.to_arrays()``) and the pull log of the simulation
harness live in ``context.state`` and are reloaded and saved around each call.
A call that raises saves nothing (Flower drops the state change too); an injected
straggler whose reply is too late (``straggle-seconds`` >= ``round-timeout``) still
replies, late, but saves nothing either (see :meth:`FaultPlan.straggle`). Both APIs
go through ``fit``/``evaluate`` here, so they inject the same faults.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from flwr.app import ConfigRecord, RecordDict
from flwr.client import NumPyClient

from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.messages import FinishInstruction
from pfxab_flower.algorithms.phased import ClientMachine, ClientState, Settings
from pfxab_flower.faults import NO_FAULTS, FaultPlan
from pfxab_flower.sampling import Environment, PullLog
from pfxab_flower.strategies import secure, serde

STATE_KEY = "pfxab-client-state"
LOG_KEY = "pfxab-pull-log"

#: Builds the client's environment around its pull log (kept across messages).
EnvironmentFactory = Callable[[PullLog], Environment]


class PhasedClient(NumPyClient):
    """Client ``client`` of algorithm ``algorithm``; ``make_env(log)`` gives its objective and noise.

    With ``send_pull_log`` the final reply carries the pull log (simulation only:
    the server app scores the exact regret from it; it is not part of the algorithm).
    ``faults`` makes it fail (raise, saving nothing) in the phases the plan drops it
    from, as the in-process engine skips it, or answer late (a straggler); it catches
    up from the next message.
    """

    def __init__(
        self,
        algorithm: str,
        settings: Settings,
        client: int,
        make_env: EnvironmentFactory,
        state: RecordDict,
        send_pull_log: bool = True,
        faults: FaultPlan = NO_FAULTS,
        secure_aggregation: bool = False,
    ) -> None:
        self.store = state
        self.faults = faults
        self.secure_aggregation = secure_aggregation  # replies for SecAgg+ (pfxab_flower.strategies.secure)
        self.log = load_pull_log(state)
        self.machine = ClientMachine(make_policy(algorithm), settings, client, load_client_state(state))
        self.env = make_env(self.log)
        self.send_pull_log = send_pull_log

    def fit(self, parameters: list[np.ndarray], config: dict) -> tuple[list[np.ndarray], int, dict]:
        instruction = serde.fit_ins_to_instruction(parameters, config)
        if isinstance(instruction, FinishInstruction):
            report = self.machine.finish(instruction, self.env)
            harness = [self.log.node_ids, self.log.counts] if self.send_pull_log else []
            if self.secure_aggregation:  # SecAgg+ sums every fit reply's tensors: the content goes in metrics
                metrics = {serde.PARTITION_ID: report.client, **secure.finish_metrics(report.node_id, harness)}
                reply = ([np.zeros(1)], 1, metrics)
            else:
                reply = serde.report_to_fit_reply(report, harness)
        else:
            late = self._straggle(instruction.phase)
            local = self.machine.explore(instruction, self.env)
            if self.secure_aggregation:
                reply = ([secure.local_vector(local)], 1, {serde.PARTITION_ID: local.client})
            else:
                reply = serde.report_to_fit_reply(local)
            if late:
                return reply
        self._save()
        return reply

    def evaluate(self, parameters: list[np.ndarray], config: dict) -> tuple[float, int, dict]:
        update = serde.evaluate_ins_to_update(parameters, config)
        late = self._straggle(update.phase)
        report = self.machine.eliminate(update, self.env)
        if not late:
            self._save()
        return serde.active_set_to_evaluate_reply(report)

    def _straggle(self, phase: int) -> bool:
        """The injected faults of a phase message: fail at once, or wait; whether the reply will be too late."""
        self.faults.check(self.machine.client, phase)
        return self.faults.straggle(self.machine.client, phase)

    def _save(self) -> None:
        save_client_state(self.store, self.machine.state, self.log)


def load_client_state(state: RecordDict) -> ClientState:
    if STATE_KEY not in state:
        return ClientState()
    return ClientState.from_arrays(_unpack(state[STATE_KEY]))


def load_pull_log(state: RecordDict) -> PullLog:
    if LOG_KEY not in state:
        return PullLog.empty()
    arrays = _unpack(state[LOG_KEY])
    return PullLog(arrays["node_ids"].astype(np.int64), arrays["counts"].astype(np.int64))


def save_client_state(state: RecordDict, client_state: ClientState, log: PullLog) -> None:
    state[STATE_KEY] = _pack(client_state.to_arrays())
    state[LOG_KEY] = _pack({"node_ids": log.node_ids, "counts": log.counts})


def _pack(arrays: dict[str, np.ndarray]) -> ConfigRecord:
    """1-D arrays as raw bytes plus dtype in a ``ConfigRecord``.

    Measured (docs/performance.md): an ``ArrayRecord`` of ``.npy`` arrays costs ~1.5 ms
    per message to write and read back (``np.save`` headers, ``ast`` parsing), more than
    the client's own work in a phase; raw bytes cost a few microseconds.
    """
    record = ConfigRecord()
    for key, value in arrays.items():
        value = np.ascontiguousarray(value).reshape(-1)
        record[key] = value.tobytes()
        record[f"{key}.dtype"] = value.dtype.str
    return record


def _unpack(record: ConfigRecord) -> dict[str, np.ndarray]:
    return {key: np.frombuffer(value, dtype=record[f"{key}.dtype"]).copy()
            for key, value in record.items() if not key.endswith(".dtype")}


class _FixedAlgorithmClient(PhasedClient):
    """A :class:`PhasedClient` whose algorithm is fixed by the class."""

    algorithm = "pf-xab"

    def __init__(
        self, settings: Settings, client: int, make_env: EnvironmentFactory, state: RecordDict,
        send_pull_log: bool = True, faults: FaultPlan = NO_FAULTS,
    ) -> None:
        super().__init__(self.algorithm, settings, client, make_env, state, send_pull_log, faults)


class PFXABClient(_FixedAlgorithmClient):
    """A PF-XAB client."""

    algorithm = "pf-xab"


class FedPNEClient(_FixedAlgorithmClient):
    """A Fed-PNE client."""

    algorithm = "fed-pne"


class PFPNEClient(_FixedAlgorithmClient):
    """A PF-PNE client."""

    algorithm = "pf-pne"
