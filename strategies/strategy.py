"""One Flower ``Strategy`` for every phased-elimination algorithm: a transport for ``ServerMachine``.

One Flower round is one phase, in the same order of calls as ``engine.simulate``:

* ``configure_fit``      -> ``ServerMachine.next_instruction`` (a ``PhaseInstruction``, or the
  ``FinishInstruction`` in one last fit round);
* ``aggregate_fit``      -> ``ServerMachine.aggregate`` (or ``finish``);
* ``configure_evaluate`` -> broadcast the ``GlobalUpdate``;
* ``aggregate_evaluate`` -> ``ServerMachine.collect``.

The strategy decides nothing itself: the machine validates replies (bad ones are
logged and skipped), averages, and closes phases. Once the machine is done the
strategy sends no more instructions, and Flower's remaining rounds (``num_rounds``
is an upper bound from the horizon) are empty and end at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
from flwr.common import EvaluateIns, EvaluateRes, FitIns, FitRes, Parameters, Scalar
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy

from pfxab_flower.accounting import CommunicationLog
from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.messages import FinishInstruction, FinishReport, GlobalUpdate, PhaseInstruction
from pfxab_flower.algorithms.phased import ServerMachine, Settings
from pfxab_flower.config import RunConfig, validate_algorithm_parameters
from pfxab_flower.engine import make_settings
from pfxab_flower.errors import RunStoppedError
from pfxab_flower.faults import DEFAULT_MIN_FRACTION
from pfxab_flower.strategies import secure, serde

LOGGER = logging.getLogger("pfxab_flower")

FinishCallback = Callable[["PhasedStrategy"], None]


class PhasedStrategy(Strategy):
    """A Flower strategy running one algorithm (``pf-xab``, ``fed-pne``, ``pf-pne``) over ``num_clients`` nodes.

    ``on_finish(strategy)`` is called once the clients have sent their final
    reports: ``strategy.server`` holds the final nodes and the phase history,
    ``strategy.communication`` what crossed Flower, ``strategy.harness`` any
    simulation-harness tensors per client (the pull logs, in simulation).
    """

    algorithm = "pf-xab"

    def __init__(
        self,
        num_clients: int,
        horizon: int,
        alpha: float = 0.5,
        seed: int = 0,
        *,
        nu1: float = 1.0,
        rho: float = 0.5,
        max_depth: int | None = None,
        pf_pne_eps: float = 0.1,
        algorithm: str | None = None,
        on_finish: FinishCallback | None = None,
        wait_timeout: int = 600,
        min_fraction: float = DEFAULT_MIN_FRACTION,
    ) -> None:
        super().__init__()
        algorithm = algorithm or self.algorithm
        validate_algorithm_parameters(algorithm, alpha, horizon, seed, nu1, rho, max_depth, pf_pne_eps)
        settings = make_settings(
            num_clients, alpha=alpha, horizon=horizon, seed=seed, nu1=nu1, rho=rho, max_depth=max_depth,
            pf_pne_eps=pf_pne_eps, min_fraction=min_fraction,
        )
        self.algorithm = algorithm
        self.settings: Settings = settings
        self.server = ServerMachine(make_policy(algorithm), settings)
        self.communication = CommunicationLog()
        self.harness: dict[int, list[np.ndarray]] = {}
        self.on_finish = on_finish
        self.wait_timeout = wait_timeout
        self.finished = False
        self.stop_reason: str | None = None  # why the server stopped the run early (too few replies)
        self.secure_aggregation = False  # SecAgg+ sums (strategies.secure)
        self._instruction: PhaseInstruction | FinishInstruction | None = None
        self._update: GlobalUpdate | None = None
        self._sent: list[ClientProxy] = []

    @classmethod
    def from_config(
        cls, config: RunConfig, *, on_finish: FinishCallback | None = None, wait_timeout: int = 600,
        min_fraction: float = DEFAULT_MIN_FRACTION,
    ) -> PhasedStrategy:
        """The strategy of a validated :class:`RunConfig` (its ``algorithm`` unless the class fixes one)."""
        return cls(
            config.clients, config.horizon, config.alpha, config.seed, nu1=config.nu1, rho=config.rho,
            max_depth=config.max_depth, pf_pne_eps=config.pf_pne_eps,
            algorithm=config.algorithm if cls is PhasedStrategy else None,
            on_finish=on_finish, wait_timeout=wait_timeout, min_fraction=min_fraction,
        )

    @property
    def num_rounds(self) -> int:
        """Flower rounds the run can take: one per phase (bounded from the horizon) plus the final one."""
        return self.settings.schedule.max_phases() + 1

    def __repr__(self) -> str:
        return f"{type(self).__name__}(algorithm={self.algorithm!r}, clients={self.settings.num_clients})"

    # -- Flower hooks ---------------------------------------------------------------------
    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        """No global model: empty parameters (so Flower does not ask a client for any)."""
        return Parameters(tensors=[], tensor_type="numpy.ndarray")

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        if self.server.done:
            return []
        self._sent = self._clients(client_manager)
        self._instruction = self.server.next_instruction()
        fit_ins = serde.instruction_to_fit_ins(self._instruction)
        return [(client, fit_ins) for client in self._sent]

    def aggregate_fit(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, FitRes]],
        failures: list[tuple[ClientProxy, FitRes] | BaseException],
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        instruction, self._instruction = self._instruction, None
        if instruction is None:
            return None, {}
        finishing = isinstance(instruction, FinishInstruction)
        phase = instruction.phases + 1 if finishing else instruction.phase
        stage = "finish" if finishing else "local-means"
        self._log_failures(phase, stage, failures)
        if self.secure_aggregation:
            return self._aggregate_secure(instruction, phase, results)
        reports, harness = [], {}
        for _, res in _by_partition(results):
            try:
                report, extra = serde.fit_res_to_report(res, finishing)
            except serde.WireError as exc:
                self.server.reject(res.metrics.get(serde.PARTITION_ID), phase, stage, str(exc))
                continue
            reports.append(report)
            harness[report.client] = extra
        fit_ins = serde.instruction_to_fit_ins(instruction)
        self._record(phase, "finish" if finishing else "explore", fit_ins.parameters, fit_ins.config, results,
                     skip_tensors_after=1 if finishing else None)
        close_fit_round(self, reports, harness, finishing)
        return None, {}

    def configure_evaluate(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, EvaluateIns]]:
        if self._update is None:
            return []
        evaluate_ins = serde.update_to_evaluate_ins(self._update)
        return [(client, evaluate_ins) for client in self._sent]

    def aggregate_evaluate(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, EvaluateRes]],
        failures: list[tuple[ClientProxy, EvaluateRes] | BaseException],
    ) -> tuple[float | None, dict[str, Scalar]]:
        update, self._update = self._update, None
        if update is None:
            return None, {}
        self._log_failures(update.phase, "active-set", failures)
        reports = []
        for _, res in _by_partition(results):
            try:
                reports.append(serde.evaluate_res_to_active_set(res))
            except serde.WireError as exc:
                self.server.reject(res.metrics.get(serde.PARTITION_ID), update.phase, "active-set", str(exc))
        evaluate_ins = serde.update_to_evaluate_ins(update)
        self._record(update.phase, "eliminate", evaluate_ins.parameters, evaluate_ins.config, results)
        try:
            self.server.collect(reports)
        except RunStoppedError as exc:
            self._stop(exc)
        return None, {}

    def evaluate(self, server_round: int, parameters: Parameters) -> tuple[float, dict[str, Scalar]] | None:
        """No centralised evaluation: the regret is scored from the clients' pulls."""
        return None

    def _aggregate_secure(
        self, instruction: PhaseInstruction | FinishInstruction, phase: int, results: list[tuple[ClientProxy, FitRes]]
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        """A fit round through SecAgg+: every reply carries the same sum; only metrics are per client."""
        finishing = isinstance(instruction, FinishInstruction)
        stage = "finish" if finishing else "local-means"
        fit_ins = serde.instruction_to_fit_ins(instruction)
        self._record(phase, "finish" if finishing else "explore", fit_ins.parameters, fit_ins.config, results,
                     skip_tensors_after=0 if finishing else None)
        clients: dict[int, FitRes] = {}
        for _, res in _by_partition(results):
            try:
                client = serde._partition_id(res.metrics)
            except serde.WireError as exc:
                self.server.reject(res.metrics.get(serde.PARTITION_ID), phase, stage, str(exc))
                continue
            if client in clients or not 0 <= client < self.settings.num_clients:
                self.server.reject(client, phase, stage, f"client id {client} is repeated or out of range")
                continue
            clients[client] = res
        if finishing:
            reports = []
            for client, res in clients.items():
                try:
                    node, extra = secure.finish_from_metrics(dict(res.metrics))
                except ValueError as exc:
                    self.server.reject(client, phase, stage, str(exc))
                    continue
                reports.append(FinishReport(client, node))
                self.harness[client] = extra
            self.server.finish(reports)
            self.finished = True
            if self.on_finish is not None:
                self.on_finish(self)
            return None, {}
        assert isinstance(instruction, PhaseInstruction)
        try:
            arrays = serde.parameters_to_ndarrays(next(iter(clients.values())).parameters) if clients else []
        except Exception:  # an undecodable sum: nothing can be averaged
            arrays = []
        average = arrays[0] if len(arrays) == 1 else np.zeros(0)
        sums, holders = secure.split_aggregate(average, len(clients), len(instruction.node_ids))
        try:
            self._update = self.server.aggregate_sums(sums, holders, len(clients))
        except RunStoppedError as exc:
            self._stop(exc)
        return None, {}

    # -- helpers ---------------------------------------------------------------------------
    def _stop(self, exc: RunStoppedError) -> None:
        """The machine stopped the run: say why once, send nothing more, and tell ``on_finish``."""
        failed = getattr(self, "_failures", [])
        self.stop_reason = str(exc) + (f"; first client failure: {failed[0]}" if failed else "")
        LOGGER.error("%s", self.stop_reason)
        if self.on_finish is not None:
            self.on_finish(self)

    def _clients(self, client_manager: ClientManager) -> list[ClientProxy]:
        """Every connected node (all ``M`` must take part in every phase), in a fixed order."""
        M = self.settings.num_clients
        if not client_manager.wait_for(M, timeout=self.wait_timeout):
            LOGGER.warning("only %d of %d clients connected; running with them", client_manager.num_available(), M)
        return [client_manager.all()[cid] for cid in sorted(client_manager.all())]

    def _record(
        self, phase: int, kind: str, parameters: Parameters, config: dict[str, Any],
        results: list[tuple[ClientProxy, Any]], skip_tensors_after: int | None = None,
    ) -> None:
        """Log what crossed Flower in one exchange: the broadcast to each node sent, each reply."""
        values_down, bytes_down = serde.wire_size(parameters, config)
        up = [serde.wire_size(getattr(res, "parameters", None), res.metrics, skip_tensors_after) for _, res in results]
        sent = len(self._sent)
        self.communication.record(
            phase, kind, values_down * sent, bytes_down * sent, sum(v for v, _ in up), sum(b for _, b in up)
        )

    def _log_failures(self, phase: int, stage: str, failures: list) -> None:
        """One line per failed client (a dropout: the run goes on if ``min-fraction`` still answered)."""
        self._failures = [failure_reason(f) for f in failures]
        for reason in self._failures:
            LOGGER.warning("phase %d: %s round failed on a client: %s", phase, stage, reason)


def failure_reason(failure: BaseException | tuple[ClientProxy, Any]) -> str:
    """A client failure as one line: the client's own message, without Ray's or Flower's wrapping."""
    text = str(failure if isinstance(failure, BaseException) else failure[1].status.message)
    if "Message: " in text:  # Flower's ClientAppException wraps the original message (and a Ray traceback)
        text = text.rsplit("Message: ", 1)[1].split("'>", 1)[0]
    text = " ".join(text.split()).rstrip("'>")
    return text if len(text) <= 300 else text[:297] + "..."


def _by_partition(results: list[tuple[ClientProxy, Any]]) -> list[tuple[ClientProxy, Any]]:
    """Replies in a fixed order (Flower's arrival order is random): by the partition id they claim."""
    return sorted(results, key=lambda pair: repr(pair[1].metrics.get(serde.PARTITION_ID)))


class PFXABStrategy(PhasedStrategy):
    """PF-XAB (personalised federated X-armed bandit) as a Flower strategy."""

    algorithm = "pf-xab"


class FedPNEStrategy(PhasedStrategy):
    """Fed-PNE (Li et al., AAAI 2024): federated phased node elimination on the global objective."""

    algorithm = "fed-pne"


class PFPNEStrategy(PhasedStrategy):
    """PF-PNE (Li et al., AISTATS 2024): personalised federated phased node elimination."""

    algorithm = "pf-pne"


STRATEGIES: dict[str, type[PhasedStrategy]] = {
    cls.algorithm: cls for cls in (PFXABStrategy, FedPNEStrategy, PFPNEStrategy)
}


def strategy_for(
    config: RunConfig, *, on_finish: FinishCallback | None = None, wait_timeout: int = 600,
    min_fraction: float = DEFAULT_MIN_FRACTION,
) -> PhasedStrategy:
    """The strategy class of ``config.algorithm``, built from the config."""
    return STRATEGIES[config.algorithm].from_config(config, on_finish=on_finish, wait_timeout=wait_timeout,
                                                    min_fraction=min_fraction)


def close_fit_round(strategy: Any, reports: list, harness: dict[int, list[np.ndarray]], finishing: bool) -> None:
    """The end of a fit (train) round, shared by both Flower APIs' strategies.

    The final round hands the clients' reports and harness tensors over and calls
    ``on_finish``; an exploration round averages the reports into the next
    ``GlobalUpdate``, or stops the run when too few clients answered.
    """
    if finishing:
        strategy.server.finish(reports)
        strategy.harness = harness
        strategy.finished = True
        if strategy.on_finish is not None:
            strategy.on_finish(strategy)
        return
    try:
        strategy._update = strategy.server.aggregate(reports)
    except RunStoppedError as exc:
        strategy._stop(exc)
