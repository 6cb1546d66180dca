"""Every registered algorithm as a legacy Flower strategy (``flwr.server.strategy.Strategy``), for existing deployments.

The same driver and rounds as the Message-API strategies (:mod:`.message`), on the
``Strategy``/``NumPyClient`` API: fit carries the explore exchange, evaluate the global update.
What reaches Flower's ``History``: docs/flower.md. SecAgg+ runs through :mod:`.secure`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np
from flwr.app import Error
from flwr.common import (
    EvaluateIns,
    EvaluateRes,
    FitIns,
    FitRes,
    Parameters,
    Scalar,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.server import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy

from pfxab_flower.algorithms.messages import (
    FinishReport,
    PhaseInstruction,
)
from pfxab_flower.flower_shared import flower_internals
from pfxab_flower.running.client_session import Instruction
from pfxab_flower.running.exchanges import Exchange, Failure, Outgoing, Unreadable
from pfxab_flower.running.wire import codec, summed
from pfxab_flower.strategies.base import DriverStrategy
from pfxab_flower.strategies.common import (
    Reply,
    decode_replies,
    explain_silence,
    failure_reason,
    score_metrics,
    stop_on_foreign_ray,
    too_few_nodes,
)

LOGGER = logging.getLogger("pfxab_flower")


class LegacyPhasedEliminationStrategy(DriverStrategy, Strategy):
    """A phased-elimination algorithm on the legacy API (:data:`LEGACY_STRATEGIES`); the arguments are
    :class:`.base.DriverStrategy`'s, and ``secure_aggregation``."""

    def __init__(self, *, secure_aggregation: bool = False, **keywords: Any) -> None:
        super().__init__(**keywords)
        self.secure_aggregation = bool(secure_aggregation)
        self._sent: list[ClientProxy] = []
        self._standby: set[int] = set()
        self._down: tuple[int, int] = (0, 0)  # (values, bytes) of the broadcast under way, counted as it was sent
        self._score: tuple[float, dict[str, Scalar]] | None = None
        self._assigned = False  # whether the node list went out (with the run's first message)

    @property
    def running(self) -> bool:
        """Whether another Flower round has work to do (:class:`.workflow.PhasedWorkflow` ends its loop when not)."""
        return self.driver.running

    def describe(self) -> dict[str, Any]:
        return {"secure_aggregation": self.secure_aggregation}

    # -- Flower hooks -----------------------------------------------------------------------------
    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        """No global model: empty parameters (so Flower does not ask a client for any)."""
        self.log_configuration()
        return Parameters(tensors=[], tensor_type="numpy.ndarray")

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        if not self._sent:
            self._sent = self._clients(client_manager)
            stop_on_foreign_ray(self.driver, flower_internals.proxy_grid(self._sent[0]) if self._sent else None)
        outgoing = self.driver.next_exchange()
        if outgoing is None:
            return []
        addressing: dict[str, Any] = {}
        if not self._assigned:  # the run's first message: a node without a partition-id learns its index
            nodes = [_node(client) or 0 for client in self._sent]  # 0: a proxy without a node (tests) keeps its place
            addressing, self._assigned = codec.assignment(nodes), True
        fit_ins = FitIns(*self._broadcast(outgoing.message, addressing))
        return [(client, fit_ins) for client in self._sent]

    def aggregate_fit(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, FitRes]],
        failures: list[tuple[ClientProxy, FitRes] | BaseException],
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        outgoing = self.driver.outgoing
        if outgoing is None:
            return None, {}
        if self.secure_aggregation and outgoing.kind == "explore":  # one sum for all, not a report each
            self._aggregate_secure(outgoing, results, failures)
        else:
            exchange = self._exchange(outgoing, results, failures)
            if outgoing.first:
                explain_silence(self.driver, outgoing.phase, exchange)
            self.driver.deliver(exchange)
        if self.driver.finished:
            return ndarrays_to_parameters([self.driver.final_points()]), {
                "final-reports": len(self.driver.final_reports), "lost-clients": json.dumps(self.lost_clients),
                "client-nodes": json.dumps(self.driver.client_nodes()), "sites": json.dumps(self.driver.client_sites())}
        metrics: dict[str, Scalar] = {**(self.driver.round_metrics() or {})}
        return None, metrics

    def fit_round_ended(self, participants: int | None) -> None:
        """After a fit round's workflow: if SecAgg+ halted it (too few clients to unmask the sum, so
        ``aggregate_fit`` never ran), the phase's exploration is lost; ``participants`` clients were still in it."""
        outgoing = self.driver.outgoing
        if outgoing is not None and outgoing.kind == "explore" and participants is not None:
            self.driver.lose_sums(participants, "secure aggregation could not unmask the sum of the local means (fewer "
                                  "clients than its reconstruction threshold took part)")

    def configure_evaluate(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, EvaluateIns]]:
        if not self.driver.second_exchange_due or (outgoing := self.driver.next_exchange()) is None:
            return []
        evaluate_ins = EvaluateIns(*self._broadcast(outgoing.message))
        return [(client, evaluate_ins) for client in self._sent]

    def aggregate_evaluate(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, EvaluateRes]],
        failures: list[tuple[ClientProxy, EvaluateRes] | BaseException],
    ) -> tuple[float | None, dict[str, Scalar]]:
        outgoing = self.driver.outgoing
        if outgoing is None or outgoing.kind != "eliminate":
            return None, {}
        self.driver.deliver(self._exchange(outgoing, results, failures))
        rows = self.driver.phase_metrics()
        if not rows or rows[-1]["phase"] != outgoing.phase:
            return None, {}
        # Flower's History keeps evaluate metrics only with a loss: the phase's mean observed reward, negated
        return -float(rows[-1]["mean_observed_reward"]), dict(rows[-1])

    def evaluate(self, server_round: int, parameters: Parameters) -> tuple[float, dict[str, Scalar]] | None:
        """Flower's centralised evaluation: once a run with a known federation is finished, its regret (the
        loss) and mean rewards, scored from the clients' pulls; else nothing."""
        if not self.driver.finished or self.driver.federation is None:
            return None
        if self._score is None:  # Flower's own Server loop asks again in every round it has left
            summary = self.run_result().summary
            regret = summary["regret"]  # None: an unscored run (real evaluations, no reference), loss NaN
            scores: dict[str, Scalar] = {**score_metrics(summary)}
            self._score = float("nan" if regret is None else regret), scores
        return self._score

    # -- helpers ----------------------------------------------------------------------------------
    def _clients(self, client_manager: ClientManager) -> list[ClientProxy]:
        """Every connected node in order of node id (the Message API's order: a node without a
        ``partition-id`` is the client of its place); stops the run if fewer than ``num_clients`` connect."""
        M = self.driver.num_clients
        if not client_manager.wait_for(M, timeout=int(self.round_timeout)):
            self.driver.stop(too_few_nodes(self.driver, client_manager.num_available(), self.round_timeout))
            return []
        proxies = client_manager.all()
        return [proxies[cid] for cid in sorted(proxies, key=lambda cid: (_node(proxies[cid]) is None,
                                                                        _node(proxies[cid]) or 0, cid))]

    def _exchange(self, outgoing: Outgoing, results: list[tuple[ClientProxy, Any]], failures: list[Any]) -> Exchange:
        """Decode the replies of the driver's exchange under way and log what crossed the wire."""
        expected = outgoing.expects
        payloads: list[Any] = self._failures(results, failures)
        up_values = up_bytes = 0
        for proxy, res in results:
            node = _node(proxy)
            tensors = list(res.parameters.tensors) if isinstance(res, FitRes) else []
            values, nbytes = codec.wire_size(tensors, res.metrics)
            up_values, up_bytes = up_values + values, up_bytes + nbytes
            secure_final = self.secure_aggregation and expected is FinishReport  # its arrays travel in the metrics
            try:
                arrays = [] if secure_final or not isinstance(res, FitRes) else parameters_to_ndarrays(res.parameters)
                payloads.append(Reply(*codec.from_positional(arrays, dict(res.metrics)), node))
            except Exception as exc:  # any decoding failure of foreign bytes is the peer's fault
                reason = str(exc) if isinstance(exc, codec.WireError) else f"tensors cannot be decoded: {exc!r}"
                payloads.append(Unreadable(res.metrics.get(codec.PARTITION_ID), reason, node))
        exchange = decode_replies(self.driver, payloads, expected, self._standby)
        down_values, down_bytes = self._down
        sent = len(self._sent)
        self.driver.record(outgoing.phase, outgoing.kind, down_values * sent, down_bytes * sent, up_values, up_bytes)
        return exchange

    def _aggregate_secure(
        self, outgoing: Outgoing, results: list[tuple[ClientProxy, FitRes]], failures: list[Any]
    ) -> None:
        """A fit round through SecAgg+: every reply carries the same sum; only metrics are per client."""
        instruction = outgoing.message
        assert isinstance(instruction, PhaseInstruction)
        exchange = Exchange(failures=self._failures(results, failures))
        clients: dict[int, FitRes] = {}
        for proxy, res in sorted(results, key=lambda pair: repr(pair[1].metrics.get(codec.PARTITION_ID))):
            try:
                client = codec.partition_id(res.metrics)
            except codec.WireError as exc:
                exchange.unreadable.append(Unreadable(res.metrics.get(codec.PARTITION_ID), str(exc), _node(proxy)))
                continue
            if client in clients or not 0 <= client < self.driver.num_clients:
                exchange.unreadable.append(Unreadable(client, f"client id {client} is repeated or out of range"))
                continue
            clients[client] = res
            exchange.add(client, _node(proxy))  # the driver counts the reporters
        down_values, down_bytes = self._down
        up = [codec.wire_size(list(res.parameters.tensors), res.metrics) for res in clients.values()]
        sent = len(self._sent)
        self.driver.record(outgoing.phase, outgoing.kind, down_values * sent, down_bytes * sent,
                           sum(v for v, _ in up), sum(b for _, b in up))
        try:
            vectors = parameters_to_ndarrays(next(iter(clients.values())).parameters) if clients else []
        except Exception:  # an undecodable sum: nothing can be averaged
            vectors = []
        average = vectors[0] if len(vectors) == 1 else np.zeros(0)
        names = self.driver.settings.bound.statistics
        sums, holders, statistic_sums = summed.split_aggregate(average, len(clients), len(instruction.node_ids), names)
        self.driver.deliver_sums(sums, holders, exchange, statistic_sums)

    def _broadcast(
        self, message: Instruction, addressing: dict[str, Any] | None = None
    ) -> tuple[Parameters, dict[str, Any]]:
        """A server message as the legacy API sends it (with ``addressing``, e.g. the first message's node list in
        its config); its size is kept for the exchange's accounting."""
        tensors, config = codec.positional(codec.broadcast_payload(message))
        config = {**config, **(addressing or {})}
        parameters = ndarrays_to_parameters(tensors)
        self._down = codec.wire_size(list(parameters.tensors), config)
        return parameters, config

    def _failures(self, results: list[tuple[ClientProxy, Any]], failures: list[Any]) -> list[Failure]:
        """Flower's failures with their nodes: a non-OK reply names its proxy; an exception does not, unless
        it is the exchange's only one and exactly one node sent nothing else (then it is that node's)."""
        answered = {id(proxy) for proxy, _ in results} | {id(f[0]) for f in failures if isinstance(f, tuple)}
        silent = [proxy for proxy in self._sent if id(proxy) not in answered]
        exceptions = [f for f in failures if isinstance(f, BaseException)]
        alone = _node(silent[0]) if len(silent) == 1 and len(exceptions) == 1 else None
        return [Failure(failure_reason(_exception_text(f)), alone) if isinstance(f, BaseException) else
                Failure(failure_reason(f[1].status.message), _node(f[0])) for f in failures]


def _exception_text(failure: BaseException) -> str:
    """An exception's text; Flower's legacy workflow wraps an error reply's ``Error`` in a bare ``Exception``."""
    error = failure.args[0] if len(failure.args) == 1 else None
    return (error.reason or f"error code {error.code}") if isinstance(error, Error) else str(failure)


def _node(proxy: ClientProxy) -> int | None:
    """The Flower node behind a proxy (``None`` for proxies without one, e.g. in tests)."""
    node = getattr(proxy, "node_id", None)
    return node if isinstance(node, int) else None

