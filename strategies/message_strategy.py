"""The phased-elimination algorithms as a Message-API strategy (``flwr.serverapp.strategy.Strategy``).

Same transport as :class:`pfxab_flower.strategies.strategy.PhasedStrategy` (one Flower round is one
phase: ``configure_train`` -> ``ServerMachine.next_instruction``, ``aggregate_train`` ->
``aggregate`` / ``finish``, ``configure_evaluate`` -> the ``GlobalUpdate``,
``aggregate_evaluate`` -> ``collect``), on Flower's Message API, which
``benchmarks/flower.py`` measured several times cheaper per round than the legacy
``Strategy``/``NumPyClient`` path (see ``docs/performance.md``): the ServerApp sends one
message per node and polls for the replies itself, instead of one thread and one
``send_and_receive`` per client.

Every decision is the core's: the strategy is built around the ``ServerMachine`` of a
legacy strategy made from the same run config (:meth:`MessagePhasedStrategy.from_config`),
so both APIs share one validation, one ``Settings`` (quorum included) and one
``on_finish``; replies are decoded by :mod:`pfxab_flower.strategies.serde` / :mod:`pfxab_flower.strategies.records`,
judged, averaged and counted by the machine; a ``RunStoppedError`` from the machine
ends the run as in the legacy strategy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from pfxab_flower.accounting import CommunicationLog
from pfxab_flower.algorithms.messages import FinishInstruction, GlobalUpdate, PhaseInstruction
from pfxab_flower.algorithms.phased import ServerMachine, Settings
from pfxab_flower.config import RunConfig
from pfxab_flower.errors import RunStoppedError
from pfxab_flower.strategies import records, serde
from pfxab_flower.strategies.strategy import PhasedStrategy, close_fit_round, strategy_for

LOGGER = logging.getLogger("pfxab_flower")

MessageFinishCallback = Callable[[Any], None]


class MessagePhasedStrategy(Strategy):
    """One algorithm over the core ``server`` machine; ``on_finish(strategy)`` as in ``PhasedStrategy``."""

    #: SecAgg+ runs on the legacy API only (``secure.py``): this strategy always averages plain means.
    secure_aggregation = False

    def __init__(
        self,
        server: ServerMachine,
        algorithm: str,
        *,
        on_finish: MessageFinishCallback | None = None,
        wait_timeout: float = 600.0,
    ) -> None:
        self.server = server
        self.algorithm = algorithm
        self.settings: Settings = server.settings
        self.communication = CommunicationLog()
        self.harness: dict[int, list[np.ndarray]] = {}
        self.on_finish = on_finish
        self.wait_timeout = wait_timeout
        self.finished = False
        self.stop_reason: str | None = None
        self._instruction: PhaseInstruction | FinishInstruction | None = None
        self._update: GlobalUpdate | None = None
        self._sent: list[int] = []

    @classmethod
    def from_legacy(cls, strategy: PhasedStrategy) -> MessagePhasedStrategy:
        """The Message-API twin of a legacy strategy: its (fresh) machine, algorithm and callbacks."""
        return cls(strategy.server, strategy.algorithm, on_finish=strategy.on_finish,
                   wait_timeout=strategy.wait_timeout)

    @classmethod
    def from_config(cls, config: RunConfig, **legacy_options: Any) -> MessagePhasedStrategy:
        """Built by the legacy ``strategy_for`` (one validation, one ``Settings``), options passed through."""
        return cls.from_legacy(strategy_for(config, **legacy_options))

    @property
    def num_rounds(self) -> int:
        """Flower rounds the run can take: one per phase (bounded from the horizon) plus the final one."""
        return self.settings.schedule.max_phases() + 1

    def summary(self) -> None:
        LOGGER.debug("%s: %s on %d clients, at most %d rounds", type(self).__name__, self.algorithm,
                     self.settings.num_clients, self.num_rounds)

    # -- Flower hooks ---------------------------------------------------------------------
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        if self.server.done:
            return []
        self._sent = self._nodes(grid)
        self._instruction = self.server.next_instruction()
        record = records.to_record(*serde.instruction_payload(self._instruction))
        return self._messages(record, MessageType.TRAIN)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        instruction, self._instruction = self._instruction, None
        if instruction is None:
            return None, None
        finishing = isinstance(instruction, FinishInstruction)
        phase = instruction.phases + 1 if finishing else instruction.phase
        stage = "finish" if finishing else "local-means"
        reports, harness = [], {}
        for payload in self._payloads(replies, phase, stage):
            arrays, metrics = payload
            try:
                report, extra = serde.reply_to_report(arrays, metrics, finishing)
            except serde.WireError as exc:
                self.server.reject(metrics.get(serde.PARTITION_ID), phase, stage, str(exc))
                continue
            reports.append(report)
            harness[report.client] = extra
        close_fit_round(self, reports, harness, finishing)
        return None, None

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        if self._update is None:
            return []
        return self._messages(records.to_record(*serde.update_payload(self._update)), MessageType.EVALUATE)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        update, self._update = self._update, None
        if update is None:
            return None
        reports = []
        for _, metrics in self._payloads(replies, update.phase, "active-set"):
            try:
                reports.append(serde.metrics_to_active_set(metrics))
            except serde.WireError as exc:
                self.server.reject(metrics.get(serde.PARTITION_ID), update.phase, "active-set", str(exc))
        try:
            self.server.collect(reports)
        except RunStoppedError as exc:
            self._stop(exc)
        return None

    # -- helpers ---------------------------------------------------------------------------
    def _nodes(self, grid: Grid) -> list[int]:
        """Every connected node (all ``M`` take part in every phase), in a fixed order."""
        M = self.settings.num_clients
        deadline = time.monotonic() + self.wait_timeout
        while len(nodes := sorted(grid.get_node_ids())) < M and time.monotonic() < deadline:
            time.sleep(0.1)
        if len(nodes) < M:
            LOGGER.warning("only %d of %d clients connected; running with them", len(nodes), M)
        return nodes

    def _messages(self, record: RecordDict, message_type: str) -> list[Message]:
        self._broadcast = record
        return [Message(content=record, message_type=message_type, dst_node_id=node) for node in self._sent]

    def _payloads(self, replies: Iterable[Message], phase: int, stage: str) -> list[tuple[list, dict]]:
        """The readable replies' payloads, ordered by the partition id they claim; the exchange is logged.

        Arrival order and node ids are random in Flower: sorting makes every number
        reproducible. Error replies and unreadable contents are logged (and rejected
        by the machine, for the latter); missing replies are the machine's to count.
        """
        payloads, up_values, up_bytes = [], 0, 0
        finishing = stage == "finish"
        for reply in replies:
            if reply.has_error():
                LOGGER.warning("phase %d: %s round failed on a client: %s", phase, stage, reply.error.reason)
                continue
            values, nbytes = records.record_size(reply.content, 1 if finishing else None)
            up_values, up_bytes = up_values + values, up_bytes + nbytes
            try:
                payloads.append(records.from_record(reply.content))
            except serde.WireError as exc:
                self.server.reject(None, phase, stage, str(exc))
        down_values, down_bytes = records.record_size(self._broadcast)
        kind = {"finish": "finish", "local-means": "explore", "active-set": "eliminate"}[stage]
        sent = len(self._sent)
        self.communication.record(phase, kind, down_values * sent, down_bytes * sent, up_values, up_bytes)
        return sorted(payloads, key=lambda payload: repr(payload[1].get(serde.PARTITION_ID)))

    def _stop(self, exc: RunStoppedError) -> None:
        """The machine stopped the run: say why once, send nothing more, and tell ``on_finish``."""
        self.stop_reason = str(exc)
        LOGGER.error("%s", exc)
        if self.on_finish is not None:
            self.on_finish(self)
