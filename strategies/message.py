"""Every registered algorithm as a Message-API strategy (``flwr.serverapp.strategy.Strategy``), used like ``FedAvg``.

``strategy.start(grid=grid)`` runs one Flower round per phase (train: explore, evaluate: global
update) plus one for the final exchange, until the run is over; every decision is the
:class:`~pfxab_flower.running.driver.ServerDriver`'s, this module only encodes and decodes.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterable, Mapping
from logging import INFO
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.common import log
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy

from pfxab_flower.algorithms.messages import FinishInstruction
from pfxab_flower.errors import RunStoppedError
from pfxab_flower.flower_shared import flower_internals, records
from pfxab_flower.running.exchanges import Exchange, Failure, Outgoing, Unreadable
from pfxab_flower.running.wire import codec
from pfxab_flower.strategies.base import DriverStrategy
from pfxab_flower.strategies.common import (
    NO_REPLY,
    Reply,
    decode_replies,
    explain_silence,
    failure_reason,
    score_metrics,
    stop_on_foreign_ray,
    too_few_nodes,
)

#: Seconds between two polls for replies of the simulation's in-memory grid, per message awaited
#: (Flower: 0.1 s whatever the number). A poll scans every message awaited, in the process and
#: under the GIL that Flower's simulation threads need: 10 ms saved ~0.05 s per phase at M = 10,
#: but at M = 1000 polling every 10 ms cost ~4 s per phase (docs/performance.md). So the interval
#: grows with the exchange, from PULL_INTERVAL_MIN to Flower's own 0.1 s at 1000 messages.
PULL_INTERVAL_PER_MESSAGE = 1e-4
PULL_INTERVAL_MIN = 0.01
PULL_INTERVAL_MAX = 0.1
#: Seconds a simulation's node count must hold before the strategy concludes no more nodes will come.
SIMULATION_SETTLE = 3.0


class PhasedEliminationStrategy(DriverStrategy, Strategy):
    """A phased-elimination algorithm on the Message API (:data:`STRATEGIES`); the arguments are
    :class:`.base.DriverStrategy`'s."""

    def __init__(self, **keywords: Any) -> None:
        super().__init__(**keywords)
        self._nodes: list[int] | None = None  # the run's nodes, fixed at the first round
        self._sent: list[int] = []  # the nodes the current broadcast went to
        self._gone: set[int] = set()  # nodes the SuperLink stopped listing (a dead SuperNode)
        self._standby: set[int] = set()
        self._broadcast: RecordDict | None = None
        self._assigned = False  # whether the node list went out (with the run's first message)
        self._timeout = float(self.round_timeout)  # of the exchange under way (``start``'s ``timeout``)

    def summary(self) -> None:
        self.log_configuration()

    # -- the run ------------------------------------------------------------------------------
    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord | None = None,
        num_rounds: int | None = None,
        timeout: float | None = None,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    ) -> Result:
        """Flower's round loop (``Strategy.start``) until the run is over; the outcome in the ``Result``.

        One Flower round per phase and one for the final exchange, at most ``num_rounds``
        (default: the bound from the horizon); the loop ends as soon as the run is over,
        so no empty round is run or logged. ``result.arrays`` holds ``final-points``
        (``(M, d)``, the user's units, client order; a lost client's row is NaN),
        ``final-nodes`` (their cells; 0 for a lost client), ``lost-clients`` (one row
        per lost client: client index, Flower node id (0 if unknown), phase; see
        :attr:`lost_clients` for the reasons), ``client-nodes`` (the Flower node that held
        each client, 0 if none did: see ``docs/reliability.md``), ``client-sites`` (the ``site``
        label each client's node declared, ``""`` if none), ``best-points`` (``(M, d)``: each client's best
        observed point, NaN if none) and ``best-observed`` (``(M, 2)``: the mean of its own rewards there and
        their number); ``train_metrics_clientapp[p]`` phase ``p``'s
        metrics; with a known federation, ``evaluate_metrics_serverapp`` the regret and mean
        rewards at the last Flower round. Raises :class:`RunStoppedError` (one line: why) if
        the server stopped the run: too few nodes, or fewer than ``min_fraction`` of the
        clients answered an exchange.
        """
        arrays = initial_arrays if initial_arrays is not None else ArrayRecord()
        limit = num_rounds or self.num_rounds
        self._timeout = float(timeout or self.round_timeout)
        log(INFO, "Starting %s strategy: at most %d Flower rounds (one per phase, one for the final exchange)",
            type(self).__name__, limit)
        self.summary()
        result, started = Result(), time.time()
        if evaluate_fn is not None:
            _evaluate_serverapp(evaluate_fn, 0, arrays, result)
        flower_round = 0
        while flower_round < limit:
            messages = list(self.configure_train(flower_round + 1, arrays, train_config or ConfigRecord(), grid))
            if self.driver.outgoing is None:  # the run is over (finished or stopped): no more Flower rounds
                break
            flower_round += 1
            log(INFO, "")
            log(INFO, "[ROUND %d] %s", flower_round, _round_name(self.driver.outgoing.message))
            final, _ = self.aggregate_train(flower_round, self._send(grid, messages))
            if final is not None:
                result.arrays = arrays = final
            if self.driver.second_exchange_due:
                messages = list(self.configure_evaluate(flower_round, arrays, evaluate_config or ConfigRecord(), grid))
                self.aggregate_evaluate(flower_round, self._send(grid, messages))
            if evaluate_fn is not None:
                _evaluate_serverapp(evaluate_fn, flower_round, arrays, result)
        if self.driver.stop_reason is not None:
            raise RunStoppedError(self.driver.stop_reason)
        self._fill(result, flower_round)
        log(INFO, "")
        log(INFO, "Strategy execution finished in %.2fs: %d Flower rounds", time.time() - started, flower_round)
        log(INFO, "")
        log(INFO, "Final results:")
        for line in io.StringIO(str(result)):
            log(INFO, "\t%s", line.strip("\n"))
        return result

    def _send(self, grid: Grid, messages: list[Message]) -> Iterable[Message]:
        flower_internals.set_reply_poll_interval(grid, pull_interval(len(messages)))  # see PULL_INTERVAL_PER_MESSAGE
        return grid.send_and_receive(messages, timeout=self._timeout) if messages else []

    def _fill(self, result: Result, last_round: int) -> None:
        """The run's outcome in Flower's ``Result``: one metrics row per phase, and the score if known."""
        for row in self.driver.phase_metrics():
            result.train_metrics_clientapp[int(row["phase"])] = MetricRecord(_metric_values(row))
        if self.driver.finished and self.driver.federation is not None:
            summary = self.run_result().summary
            scores = score_metrics(summary)
            earlier = result.evaluate_metrics_serverapp.get(last_round)
            result.evaluate_metrics_serverapp[last_round] = MetricRecord({**(earlier or {}), **scores})

    # -- Flower hooks -------------------------------------------------------------------------
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        if self._nodes is None:
            self._nodes = self._connected_nodes(grid)
            stop_on_foreign_ray(self.driver, grid)
        outgoing = self.driver.next_exchange()
        return [] if outgoing is None else self._messages(outgoing, MessageType.TRAIN, grid)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        if self.driver.outgoing is None:
            return None, None
        self._deliver(replies)
        if self.driver.finished:
            nodes = self.driver.final_node_ids()
            lost = np.array([[r["client"], r["flower_node"] or 0, r["phase"]] for r in self.lost_clients],
                            dtype=np.uint64).reshape(-1, 3)
            holders = np.array([node or 0 for node in self.driver.client_nodes()], dtype=np.uint64)
            sites = np.array([site or "" for site in self.driver.client_sites()], dtype=str)
            final = ArrayRecord({"final-points": Array(self.driver.final_points()), "final-nodes": Array(nodes),
                                 "lost-clients": Array(lost), "client-nodes": Array(holders),
                                 "client-sites": Array(sites), "best-points": Array(self.driver.best_points()),
                                 "best-observed": Array(self.driver.best_observed())})
            return final, None  # train_metrics_clientapp keeps one row per phase
        metrics = self.driver.round_metrics()
        return None, None if metrics is None else MetricRecord(_metric_values(metrics))

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        if not self.driver.second_exchange_due:
            return []
        outgoing = self.driver.next_exchange()
        return [] if outgoing is None else self._messages(outgoing, MessageType.EVALUATE, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        if self.driver.outgoing is not None:
            self._deliver(replies)
        return None

    # -- helpers --------------------------------------------------------------------------------
    def _connected_nodes(self, grid: Grid) -> list[int]:
        """The nodes of the run, in a fixed order; stops the run if fewer than ``num_clients`` connect.

        A deployment's SuperNodes may still be connecting: wait for them, up to
        ``round_timeout``. A simulation registers all its nodes together, just after the
        ServerApp starts: once some are there and their number holds for
        :data:`SIMULATION_SETTLE` seconds, no more will come, so a short federation fails
        within seconds.
        """
        M = self.driver.num_clients
        started = time.monotonic()
        simulated = flower_internals.is_simulation(grid)
        seen, since = -1, started
        while len(nodes := sorted(grid.get_node_ids())) < M:
            now = time.monotonic()
            if len(nodes) != seen:
                seen, since = len(nodes), now
            settled = simulated and seen > 0 and now - since >= SIMULATION_SETTLE
            if settled or now - started >= self.round_timeout:
                self.driver.stop(too_few_nodes(self.driver, len(nodes), now - started))
                break
            time.sleep(0.1)
        return nodes

    def _messages(self, outgoing: Outgoing, message_type: str, grid: Grid) -> list[Message]:
        """One message per node of the run that is still online.

        A node the SuperLink no longer lists (its SuperNode died and missed its heartbeats)
        is not waited for: its client counts as failed in every exchange, like a dropout.
        A node listed again under the same id (an authenticated SuperNode restarted with its
        key) gets the next messages again, and its client catches up if its state survived
        (a ``state-dir``, :mod:`pfxab_flower.client_apps.site_state`).
        """
        online = set(grid.get_node_ids())
        for node in self._nodes or []:
            if node not in online and node not in self._gone:
                self._gone.add(node)
                self.driver.node_gone(node, outgoing.phase)
            elif node in online and node in self._gone:  # the same node id again: a restarted, authenticated node
                self._gone.discard(node)
                self.driver.node_back(node, outgoing.phase)
        self._sent = [node for node in self._nodes or [] if node in online]
        arrays, config = codec.broadcast_payload(outgoing.message)
        if not self._assigned:  # the run's first message: a node without a partition-id learns its index
            config, self._assigned = {**config, **codec.assignment(self._nodes or [])}, True
        self._broadcast = records.to_record(arrays, config)
        return [Message(content=self._broadcast, message_type=message_type, dst_node_id=node) for node in self._sent]

    def _deliver(self, replies: Iterable[Message]) -> None:
        """Decode the replies of the driver's exchange under way, log what crossed the wire, and deliver them."""
        outgoing = self.driver.outgoing
        assert outgoing is not None
        exchange = self._exchange(outgoing.phase, outgoing.kind, replies, outgoing.expects)
        if outgoing.first:
            explain_silence(self.driver, outgoing.phase, exchange)
        self.driver.deliver(exchange)

    def _exchange(self, phase: int, kind: str, replies: Iterable[Message], expected: type) -> Exchange:
        """Decode an exchange's replies and log what crossed the wire."""
        payloads: list[Any] = []
        up_values = up_bytes = 0
        answered = set()
        for reply in replies:
            node = reply.metadata.src_node_id
            answered.add(node)
            if reply.has_error():
                payloads.append(Failure(failure_reason(reply.error.reason or f"error code {reply.error.code}"), node))
                continue
            values, nbytes = records.record_size(reply.content)
            up_values, up_bytes = up_values + values, up_bytes + nbytes
            try:
                payloads.append(Reply(*records.from_record(reply.content), node))
            except codec.WireError as exc:
                payloads.append(Unreadable(None, str(exc), node))
        payloads += [Failure(f"{NO_REPLY[1]} ({self._timeout:g} s)", node)
                     for node in self._sent if node not in answered]
        exchange = decode_replies(self.driver, payloads, expected, self._standby)
        assert self._broadcast is not None
        down_values, down_bytes = records.record_size(self._broadcast)
        sent = len(self._sent)
        self.driver.record(phase, kind, down_values * sent, down_bytes * sent, up_values, up_bytes)
        return exchange


def pull_interval(awaited: int) -> float:
    """Seconds between two polls for the replies to ``awaited`` messages (see :data:`PULL_INTERVAL_PER_MESSAGE`)."""
    return min(PULL_INTERVAL_MAX, max(PULL_INTERVAL_MIN, PULL_INTERVAL_PER_MESSAGE * awaited))


def _round_name(instruction: Any) -> str:
    """What a Flower round does, in the log's words."""
    if isinstance(instruction, FinishInstruction):
        return f"final exchange (after {instruction.phases} phases)"
    return f"phase {instruction.phase}: explore and eliminate exchanges"


def _evaluate_serverapp(
    evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None], flower_round: int, arrays: ArrayRecord,
    result: Result,
) -> None:
    """Flower's centralised evaluation hook, as ``Strategy.start`` calls it."""
    metrics = evaluate_fn(flower_round, arrays)
    log(INFO, "Global evaluation: %s", metrics)
    if metrics is not None:
        result.evaluate_metrics_serverapp[flower_round] = metrics


def _metric_values(row: Mapping[str, Any]) -> dict[str, int | float | list[int] | list[float]]:
    return {key: (float(value) if isinstance(value, float) else int(value)) for key, value in row.items()}

