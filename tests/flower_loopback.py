"""Flower's real ``Server`` loop over in-process client proxies: the Flower adapters without Ray.

Each node keeps one ``Context`` (its ``context.state`` persists across messages,
as in simulation) and gets a fresh client from ``client_fn`` for every message,
as Flower does. Flower's thread pool returns the replies in an arbitrary order, as over a network.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
from flwr.app import Context, RecordDict
from flwr.client import Client
from flwr.common import (
    Code,
    DisconnectRes,
    EvaluateIns,
    EvaluateRes,
    FitIns,
    FitRes,
    Status,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.server import History, Server, SimpleClientManager
from flwr.server.client_proxy import ClientProxy

from pfxab_flower.client_apps import PhasedNumPyClient
from pfxab_flower.client_apps.sessions import SessionFn
from pfxab_flower.running.wire import codec
from pfxab_flower.strategies import LegacyPhasedEliminationStrategy
from tests.patience import patient


class LoopbackProxy(ClientProxy):
    def __init__(self, partition: int, num_partitions: int, client_fn: Callable[[Context], Client]) -> None:
        super().__init__(cid=f"node-{partition:03d}")
        self.node_id = partition + 100  # as Flower's GridClientProxy: the node the messages go to
        self.client_fn = client_fn
        self.context = Context(
            run_id=1,
            node_id=partition + 100,
            node_config={"partition-id": partition, "num-partitions": num_partitions},
            state=RecordDict(),
            run_config={},
        )

    def fit(self, ins: FitIns, timeout: float | None, group_id: int | None) -> FitRes:
        return self.client_fn(self.context).fit(ins)

    def evaluate(self, ins: EvaluateIns, timeout: float | None, group_id: int | None) -> EvaluateRes:
        return self.client_fn(self.context).evaluate(ins)

    def get_properties(self, ins, timeout, group_id):  # pragma: no cover - not used by the strategy
        raise NotImplementedError

    def get_parameters(self, ins, timeout, group_id):  # pragma: no cover - not used by the strategy
        raise NotImplementedError

    def reconnect(self, ins, timeout, group_id) -> DisconnectRes:
        return DisconnectRes(reason="")


def numpy_client_fn(session_fn: SessionFn, secure_aggregation: bool = False) -> Callable[[Context], Client]:
    """The legacy ``client_fn`` of a session function (what ``legacy_client_app`` wraps)."""
    return lambda context: PhasedNumPyClient(session_fn, context, secure_aggregation).to_client()


def run_loopback(
    strategy: LegacyPhasedEliminationStrategy, session_fn: SessionFn, num_nodes: int,
    client_fn: Callable[[Context], Client] | None = None, proxy: type[LoopbackProxy] | None = None,
) -> History:
    """Run ``strategy.num_rounds`` Flower rounds with ``num_nodes`` in-process clients; Flower's ``History``.

    ``client_fn`` replaces the sessions' clients (e.g. by a client that is not ours), ``proxy``
    the proxy class (e.g. one whose node dies).
    """
    client_fn = client_fn or numpy_client_fn(session_fn)
    manager = SimpleClientManager()
    proxies = [(proxy or LoopbackProxy)(m, num_nodes, client_fn) for m in range(num_nodes)]
    random.Random(7).shuffle(proxies)  # registration order (and so the order of results) is arbitrary
    for proxy in proxies:
        manager.register(proxy)
    server = Server(client_manager=manager, strategy=strategy)
    history, _ = server.fit(num_rounds=strategy.num_rounds, timeout=patient(30.0))
    return history


def ok_fit_res(arrays: list[np.ndarray], num_examples: int, metrics: dict[str, Any]) -> FitRes:
    """The ``FitRes`` Flower's NumPyClient wrapper makes of a ``fit`` return."""
    return FitRes(Status(Code.OK, "Success"), ndarrays_to_parameters(arrays), num_examples, metrics)


def legacy_fit_res(arrays: dict[str, np.ndarray], metrics: dict[str, Any], num_examples: int = 1) -> FitRes:
    """The ``FitRes`` of a legacy client replying with these named arrays (tensors in order, names in the metrics)."""
    tensors, config = codec.positional((arrays, metrics))
    return ok_fit_res(tensors, num_examples, config)


def legacy_payload(res: FitRes | EvaluateRes) -> codec.Payload:
    """The named arrays and config of a legacy reply (an evaluate reply's arrays ride in its metrics)."""
    tensors = parameters_to_ndarrays(res.parameters) if isinstance(res, FitRes) else []
    return codec.from_positional(tensors, dict(res.metrics))


def ok_evaluate_res(loss: float, num_examples: int, metrics: dict[str, Any]) -> EvaluateRes:
    """The ``EvaluateRes`` Flower's NumPyClient wrapper makes of an ``evaluate`` return."""
    return EvaluateRes(Status(Code.OK, "Success"), loss, num_examples, metrics)
