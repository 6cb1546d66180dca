"""The server side of a run, whatever carries its messages: the order of exchanges, their checks, the result.

Every engine (in-process, legacy Flower ``Strategy``, Message-API strategy) drives one
:class:`ServerDriver`: a transport only encodes what :meth:`ServerDriver.next_exchange` asks for and
hands the decoded replies to :meth:`ServerDriver.deliver`. The driver judges, averages, enforces the
quorum and builds the result (:mod:`pfxab_flower.running.driver_outcome`), so every engine gives the same numbers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.messages import (
    FinishInstruction,
    FinishReport,
    GlobalUpdate,
    PhaseInstruction,
)
from pfxab_flower.algorithms.phased import ServerMachine, Settings
from pfxab_flower.algorithms.phased.state import ProtocolError
from pfxab_flower.errors import ObjectiveError, RunStoppedError
from pfxab_flower.problems.federation import Federation
from pfxab_flower.running.accounting import CommunicationLog
from pfxab_flower.running.client_names import ClientNames
from pfxab_flower.running.driver_outcome import RunOutcome
from pfxab_flower.running.exchanges import Exchange, Failure, Outgoing
from pfxab_flower.running.resolution import first_point_warning, uniform_exploration_warning
from pfxab_flower.running.site_table import site_table
from pfxab_flower.running.trust import NodeBinding, pull_log_problem, pull_log_rewritten

LOGGER = logging.getLogger("pfxab_flower")
#: Why a client whose Flower node the SuperLink stopped listing failed (the reason it is lost with, if it stays gone).
NODE_GONE = "its Flower node is gone (no heartbeat, or unregistered)"


class ServerDriver(RunOutcome, ClientNames):
    """The server of one run of ``algorithm`` with ``settings``; ``federation`` only in simulation."""

    def __init__(self, algorithm: str, settings: Settings, federation: Federation | None = None) -> None:
        self.algorithm = algorithm
        self.federation = federation
        self.machine = ServerMachine(make_policy(algorithm), settings, report_pulls=federation is not None)
        self.communication = CommunicationLog()
        self.stop_reason: str | None = None
        self.finished = False
        self.final_reports: dict[int, FinishReport] = {}
        self.harness: dict[int, Mapping[str, np.ndarray]] = {}  # client -> the harness data of its last used reply
        self.binding = NodeBinding(settings.num_clients)  # which Flower node speaks for which client
        self.sites: dict[int, str] = {}  # client -> the site label its node declares (node config ``site``)
        self.problems: dict[int, tuple[int, str]] = {}  # client -> (phase, why) of its latest failed exchange
        self.failed_at: dict[int, tuple[int | None, str | None]] = {}  # client -> (node, site) its failures named
        self._told: set[tuple[object, int]] = set()  # (client or node, phase) whose failure the log has said
        self.outgoing: Outgoing | None = None  # the exchange whose replies are awaited
        self.global_update: GlobalUpdate | None = None  # a phase's update, between its two exchanges
        self.started = time.perf_counter()
        self.ended: float | None = None  # when the final exchange's replies were in (``run_seconds`` ends there)
        self._centres: dict[int, np.ndarray] = {}  # node id -> its cell's centre, for the final points' check
        try:
            warning = uniform_exploration_warning(settings.spec, federation.truth() if federation is not None else None)
        except ObjectiveError:  # a broken objective is the run's to report, where a client meets it, not the warning's
            warning = None
        if warning is not None:  # once per run, before its first exchange
            LOGGER.warning("%s", warning)
        if (stuck := first_point_warning(settings.spec)) is not None:
            LOGGER.warning("%s", stuck)

    @property
    def nodes(self) -> Mapping[int, int]:
        """Client -> the Flower node that holds it (Flower transports; empty in-process)."""
        return self.binding.holder

    @property
    def settings(self) -> Settings:
        return self.machine.settings

    @property
    def num_clients(self) -> int:
        return self.settings.num_clients

    @property
    def max_rounds(self) -> int:
        """Flower rounds the run can take: one per phase (bounded from the horizon) plus one for the final exchange."""
        return self.machine.max_phases() + 1

    def describe_rounds(self) -> str:
        """The run's bounds in the three units of the log: phases, Flower rounds, exchanges."""
        phases = self.machine.max_phases()
        return (f"at most {phases} phases: {phases + 1} Flower rounds, {2 * phases + 1} exchanges "
                "(fewer if the budget runs out sooner)")

    @property
    def running(self) -> bool:
        return not (self.finished or self.stop_reason is not None)

    # -- the order of exchanges --------------------------------------------------------------
    def next_exchange(self) -> Outgoing | None:
        """The next exchange to run (``None`` once the run is over); its replies go to :meth:`deliver`.

        A phase is two exchanges: the instruction (local means come back), then the global
        update (next active sets come back); the final exchange ends the run.
        """
        if self.outgoing is not None:
            raise ProtocolError(f"the replies of the {self.outgoing.kind} exchange of phase {self.outgoing.phase} "
                                "were not delivered")
        if self.global_update is not None and self.running:
            self.outgoing = Outgoing(self.global_update, self.global_update.phase, "eliminate")
            return self.outgoing
        instruction = self.next_instruction()
        if isinstance(instruction, FinishInstruction):
            self.outgoing = Outgoing(instruction, instruction.phases + 1, "finish")
        elif instruction is not None:
            self.outgoing = Outgoing(instruction, instruction.phase, "explore")
        return self.outgoing

    @property
    def second_exchange_due(self) -> bool:
        """Whether the phase under way still has its elimination exchange (a Flower round's second half)."""
        return self.global_update is not None and self.running

    def deliver(self, exchange: Exchange) -> None:
        """The decoded replies of the exchange :meth:`next_exchange` asked for."""
        outgoing, self.outgoing = self._awaited(), None
        if outgoing.kind == "explore":
            self.global_update = self.local_means(outgoing.message, exchange)  # type: ignore[arg-type]
        elif outgoing.kind == "eliminate":
            self.global_update = None
            self.active_sets(outgoing.message, exchange)  # type: ignore[arg-type]
        else:
            self.final_nodes(outgoing.message, exchange)  # type: ignore[arg-type]

    def deliver_sums(self, sums: np.ndarray, holders: np.ndarray, exchange: Exchange,
                     statistic_sums: Mapping[str, np.ndarray] | None = None) -> None:
        """The exploration's replies as SecAgg+ sums (see :meth:`secure_sums`) instead of one report each."""
        outgoing, self.outgoing = self._awaited(), None
        if outgoing.kind != "explore":
            raise ProtocolError(f"secure sums delivered for a {outgoing.kind} exchange")
        self.global_update = self.secure_sums(outgoing.message, sums, holders, exchange,  # type: ignore[arg-type]
                                              statistic_sums)

    def lose_sums(self, participants: int, reason: str) -> None:
        """The exploration under way delivered nothing (SecAgg+ could not unmask its sum): every local mean is lost.

        The phase goes on without global means (each client decides on its own) if ``participants``, the clients
        still taking part, meet the quorum; else the run stops with one line, as for too few replies.
        """
        outgoing, self.outgoing = self._awaited(), None
        if outgoing.kind != "explore":
            raise ProtocolError(f"secure sums lost for a {outgoing.kind} exchange")
        LOGGER.warning("phase %d: %s; %d of %d clients were taking part", outgoing.phase, reason, participants,
                       self.num_clients)
        try:
            self.global_update = self.machine.lose_sums(participants)
        except RunStoppedError as exc:
            self.global_update = None
            self.stop(str(exc))

    def _awaited(self) -> Outgoing:
        if self.outgoing is None:
            raise ProtocolError("replies delivered, but no exchange is under way")
        return self.outgoing

    def round_metrics(self) -> dict[str, int] | None:
        """The phase whose exploration just closed, as a Flower round's metrics (``None`` if the run stopped)."""
        plan = self.machine.plan
        if self.global_update is None or plan is None:
            return None
        return {"phase": plan.phase, "active_nodes": int(plan.union.size), "pulls_per_client": plan.length,
                "failed_local_means": plan.failed_local_means}

    # -- the exchanges ---------------------------------------------------------------------
    def next_instruction(self) -> PhaseInstruction | FinishInstruction | None:
        """The next broadcast (a phase, or the final exploitation); ``None`` once the run is over."""
        if not self.running or self.machine.done:
            return None
        return self.machine.next_instruction()

    def local_means(self, instruction: PhaseInstruction, exchange: Exchange) -> GlobalUpdate | None:
        """Average the exploration reports; ``None`` if the run stopped (below quorum)."""
        pending = self._take(instruction.phase, "local-means", exchange)
        try:
            return self.machine.aggregate(exchange.reports)
        except RunStoppedError as exc:
            self.stop(str(exc), exchange)
            return None
        finally:
            self._keep_harness(pending)

    def secure_sums(
        self, instruction: PhaseInstruction, sums: np.ndarray, holders: np.ndarray, exchange: Exchange,
        statistic_sums: Mapping[str, np.ndarray] | None = None,
    ) -> GlobalUpdate | None:
        """Average from SecAgg+ sums over ``len(exchange.reports)`` clients; ``None`` if the run stopped.

        The sums hold one contribution per node that replied, whichever client it named: a
        refused claim is counted and logged, but cannot be taken out of the sum.
        """
        reporters = len(exchange.reports)
        pending = self._take(instruction.phase, "local-means", exchange)
        self.machine.used = list(exchange.reports)
        explorers = [m for m in map(_index, map(_claimed, exchange.reports)) if 0 <= m < self.num_clients]
        try:
            return self.machine.aggregate_sums(sums, holders, reporters, statistic_sums, explorers)
        except RunStoppedError as exc:
            self.stop(str(exc), exchange)
            return None
        finally:
            self._keep_harness(pending)

    def active_sets(self, update: GlobalUpdate, exchange: Exchange) -> None:
        """Close the phase with the clients' next active sets (or stop below quorum)."""
        pending = self._take(update.phase, "active-set", exchange)
        try:
            self.machine.collect(exchange.reports)
        except RunStoppedError as exc:
            self.stop(str(exc), exchange)
        finally:
            self._keep_harness(pending)

    def final_nodes(self, instruction: FinishInstruction, exchange: Exchange) -> None:
        """Keep each client's final recommendation; the run is finished (lost clients are named once)."""
        phase = instruction.phases + 1
        pending = self._take(phase, "finish", exchange)
        valid: list[FinishReport] = []
        for report in sorted(exchange.reports, key=lambda r: repr(r.client)):
            reason = self.check_final(report)
            if reason is None:
                valid.append(report)
                self.final_reports[int(report.client)] = report
            else:
                self.machine.reject(report.client, phase, "finish", reason)
        self.machine.finish(valid)
        self._keep_harness(pending)
        if (why := self._final_quorum_missed(phase, len(valid))) is not None:
            self.stop(why, exchange)  # no result: too few final points to speak for the federation
            return
        self.finished, self.ended = True, time.perf_counter()
        LOGGER.info("final exchange: %d of %d clients sent their final point; %d phases, %d exchanges in all",
                    len(self.final_reports), self.num_clients, self.machine.completed,
                    self.machine.communication_rounds)
        for lost in self.lost_client_records():
            LOGGER.warning("%s was lost in %s: %s; its final point is NaN, its regret covers the pulls it reported",
                           self.who(lost["client"], lost["flower_node"]), self._phase_name(lost["phase"]),
                           lost["reason"])
        if LOGGER.isEnabledFor(logging.INFO):  # each site's outcome, one line per row (built only if shown)
            for line in ["each site's final point:", *site_table(self.site_columns()).splitlines()]:
                LOGGER.info("%s", line)

    def _final_quorum_missed(self, phase: int, usable: int) -> str | None:
        """Why the final exchange cannot end the run: fewer usable final replies than the quorum (``min-fraction``
        of the clients, as every exchange), and at least one whatever ``min-fraction`` (a run with no final point
        scored every client lost and reported regret 0.0, exit 0); ``None`` if enough came."""
        try:
            self.machine.require_quorum(phase, "final", usable)
        except RunStoppedError as exc:
            return str(exc)
        if usable == 0:
            return (f"phase {phase}: no client sent a usable final reply (a run without a final point has no result, "
                    "whatever min-fraction); run stopped")
        return None

    def check_final(self, report: FinishReport) -> str | None:
        """Why a final report cannot be used, or ``None`` if it can (the machine's check, and no repeats)."""
        if isinstance(report.client, int | np.integer) and int(report.client) in self.final_reports:
            return f"client {report.client} replied twice"
        return self.machine.check_final(report) or self._check_final_point(report)

    def _check_final_point(self, report: FinishReport) -> str | None:
        """In simulation the server knows the domain: a final (and best observed) point must be its node's cell centre.

        (A deployment's server has no domain; there the points of the length most
        clients sent are kept, see :meth:`final_points`.)
        """
        if self.federation is None:
            return None
        pairs: list[tuple[str, int, object]] = [("final point", report.node_id, report.point)]
        if report.best_node_id is not None:  # complete: the machine's check saw to it
            pairs.append(("best observed point", report.best_node_id, report.best_point))
        for what, node, given in pairs:
            node = int(node)
            if node not in self._centres:  # clients share final cells: one midpoint per distinct cell, not per client
                self._centres[node] = self.federation.partition.midpoints(np.array([node], dtype=np.int64))[0]
            expected = self._centres[node]
            point = np.asarray(given, dtype=float)
            if point.shape != expected.shape:
                return f"{what} has {point.size} values, expected {expected.size} (the domain's dimension)"
            if not np.allclose(point, expected, rtol=1e-12, atol=0.0):
                return f"{what} is not the centre of node {node}'s cell"
        return None

    def record(self, phase: int, kind: str, values_down: int, bytes_down: int, values_up: int, bytes_up: int) -> None:
        """Log what crossed the wire in one exchange (each transport counts its own encoding)."""
        self.communication.record(phase, kind, values_down, bytes_down, values_up, bytes_up)

    def stop(self, reason: str, exchange: Exchange | None = None) -> None:
        """End the run early (too few replies, too few nodes): say why once; nothing more is sent.

        The line names the exchange's first failure, or else its first unreadable reply
        (what it held and what was expected: e.g. a ClientApp that is not pfxab-flower's).
        """
        if self.stop_reason is not None:
            return
        if exchange is not None and exchange.failures:
            first = exchange.failures[0]
            client, what = self._failed(first)
            reason += f"; first client failure{self._sender(client, first.node)}: {what}"
        elif exchange is not None and exchange.unreadable:
            bad = exchange.unreadable[0]
            reason += (f"; first unreadable reply{self._sender(bad.client, bad.node)}: {bad.reason} (is every "
                       "node's ClientApp one of pfxab_flower.client_apps, of this version?)")
        self.stop_reason = reason
        LOGGER.error("run stopped: %s", self.stop_reason)

    def node_gone(self, node: int, phase: int) -> None:
        """A transport saw a node leave the federation: its client fails every exchange from now on."""
        client = self._client_of(Failure("", node))
        LOGGER.warning("phase %d: %s is gone (no heartbeat, or unregistered); it counts as failed from now on",
                       phase, self.who(client, node))
        if client is not None:
            self.problems[client] = (phase, NODE_GONE)

    def node_back(self, node: int, phase: int) -> None:
        """A node that was gone is listed again (the same node id: a SuperNode restarted with its registered key).

        It gets the exchange's messages again; its client counts as lost only if it still
        sends no usable final reply.
        """
        client = self._client_of(Failure("", node))
        LOGGER.warning("phase %d: %s is back; it gets this exchange's message", phase, self.who(client, node))
        if client is not None and self.problems.get(client, (0, ""))[1] == NODE_GONE:
            del self.problems[client]

    def _take(self, phase: int, stage: str, exchange: Exchange) -> list[tuple[Any, Mapping[str, np.ndarray]]]:
        """Log the failures and unreadable replies of an exchange; keep only the reports the server can trust.

        A report is refused (logged, counted) when its node may not speak for the client it
        names (:class:`~pfxab_flower.running.trust.NodeBinding`) or its pull log is not a possible
        history of that client (:func:`~pfxab_flower.running.trust.pull_log_problem`). The harness
        data of the others waits for the machine's verdict (:meth:`_keep_harness`).
        """
        for failure in exchange.failures:  # one line per failing client and phase, however many exchanges it fails
            client, what = self._failed(failure)
            if (client if client is not None else failure.node, phase) not in self._told:
                self._told.add((client if client is not None else failure.node, phase))
                LOGGER.warning("phase %d: %s sent no usable %s reply: %s", phase, self.who(client, failure.node), stage,
                               what)
            if client is not None:
                self.problems[client] = (phase, what)
        for bad in exchange.unreadable:
            reason = bad.reason if bad.client is not None or bad.node is None else \
                f"{bad.reason} (from Flower node {bad.node})"
            self.machine.reject(bad.client, phase, stage, reason)
        sources = exchange.sources()
        refusals = self.binding.screen([(_claimed(report), node) for report, node, _, _ in sources])
        kept, pending = [], []
        for (report, node, harness, site), refusal in zip(sources, refusals, strict=True):
            if refusal is None and self.federation is not None:  # simulation: every reply carries its pull log
                refusal = pull_log_problem(harness or {}, self.settings.horizon, final=stage == "finish") or \
                    pull_log_rewritten(harness or {}, self.harness.get(_index(_claimed(report))))
            if refusal is not None:
                self.machine.reject(_claimed(report), phase, stage, refusal)
                if node is not None and node in self.binding.held:  # the node's own client missed the exchange
                    self.problems[self.binding.held[node]] = (phase, refusal)
                continue
            kept.append(report)
            if site is not None and 0 <= _index(_claimed(report)) < self.num_clients:
                self.sites[_index(_claimed(report))] = site
            if harness is not None:
                pending.append((report, harness))
        exchange.reports = kept
        return pending

    def _keep_harness(self, pending: list[tuple[Any, Mapping[str, np.ndarray]]]) -> None:
        """Keep the harness data of the reports the machine used (a refused reply's pull log is never scored)."""
        used = {id(report) for report in self.machine.used}
        for report, harness in pending:
            if id(report) in used:
                self.harness[_index(_claimed(report))] = harness


def _claimed(report: Any) -> object:
    """The client a report names (a secure-aggregation exchange's reports are the client indices themselves)."""
    return getattr(report, "client", report)


def _index(claimed: object) -> int:
    """``claimed`` as an int when it is one, else -1 (never a client's index)."""
    return int(claimed) if isinstance(claimed, int | np.integer) and not isinstance(claimed, bool) else -1
