"""What a run came to, read from the server's state: phase rows, final points, lost clients, the scored result.

The outcome half of :class:`~pfxab_flower.running.driver.ServerDriver` (which inherits it); every engine's
result comes from here, so they agree to the last digit.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from pfxab_flower.algorithms.messages import FinishReport
from pfxab_flower.algorithms.phased import ServerMachine, Settings
from pfxab_flower.errors import IncompleteRunError, RunStoppedError
from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.sampling import PullLog, evaluation_counts, site_costs
from pfxab_flower.running.accounting import CommunicationLog, score
from pfxab_flower.running.client_session import SOLO_PHASES
from pfxab_flower.running.results import RunResult, build_result


class RunOutcome:
    """The outcome of a :class:`~pfxab_flower.running.driver.ServerDriver`'s run, over its state."""

    # the driver state the outcome reads (set by ServerDriver)
    algorithm: str
    federation: Federation | None
    machine: ServerMachine
    communication: CommunicationLog
    final_reports: dict[int, FinishReport]
    harness: dict[int, Mapping[str, np.ndarray]]
    problems: dict[int, tuple[int, str]]
    failed_at: dict[int, tuple[int | None, str | None]]
    stop_reason: str | None
    finished: bool
    ended: float | None
    started: float
    sites: dict[int, str]

    if TYPE_CHECKING:  # read-only: properties of the driver (a plain annotation would declare them writable)
        @property
        def settings(self) -> Settings: ...

        @property
        def num_clients(self) -> int: ...

        @property
        def nodes(self) -> Mapping[int, int]: ...

    def final_node_ids(self) -> np.ndarray:
        """Each client's final node id in client order (0 for a lost client)."""
        return np.array([self.final_reports[m].node_id if m in self.final_reports else 0
                         for m in range(self.num_clients)], dtype=np.int64)

    def phase_metrics(self) -> list[dict[str, int | float]]:
        """One row per completed phase: active and eliminated nodes, pulls per client, failures, ..."""
        return [dict(row) for row in self.machine.history]

    def final_points(self) -> np.ndarray:
        """Every client's final recommendation in the user's units, ``(M, d)`` in client order (NaN if none)."""
        points = [np.asarray(self.final_reports[m].point, dtype=float) if m in self.final_reports else None
                  for m in range(self.num_clients)]
        # the length most clients sent (a point of another length must not erase the others', nor crash the server)
        sizes = Counter(p.size for p in points if p is not None)
        d = sizes.most_common(1)[0][0] if sizes else 0
        return np.array([p if p is not None and p.size == d else np.full(d, np.nan) for p in points]).reshape(
            len(points), d)

    def best_node_ids(self) -> np.ndarray:
        """Each client's best observed node in client order (0 where it reported none, or was lost)."""
        best = self.machine.best_observed
        return np.array([best[m][0] if m in best else 0 for m in range(self.num_clients)], dtype=np.int64)

    def best_points(self) -> np.ndarray:
        """Every client's best observed point in the user's units, ``(M, d)`` in client order (NaN if none).

        As the clients reported them, of the final points' length (:meth:`final_points`)."""
        d = self.final_points().shape[1]
        rows = [np.asarray(self.final_reports[m].best_point, dtype=float).reshape(-1)
                if m in self.final_reports and self.final_reports[m].best_point is not None else None
                for m in range(self.num_clients)]
        return np.array([row if row is not None and row.size == d else np.full(d, np.nan) for row in rows]).reshape(
            self.num_clients, d)

    def best_observed(self) -> np.ndarray:
        """Each client's best observed mean and the pulls it rests on, ``(M, 2)`` in client order (NaN if none)."""
        best = self.machine.best_observed
        return np.array([best[m][1:] if m in best else (np.nan, np.nan) for m in range(self.num_clients)],
                        dtype=float).reshape(self.num_clients, 2)

    def lost_clients(self) -> list[int]:
        """Clients with no usable final report: their node died (or kept failing) before the end."""
        return [m for m in range(self.num_clients) if m not in self.final_reports]

    def lost_client_records(self) -> list[dict[str, Any]]:
        """Each lost client: ``client`` index, ``site`` (its label, ``None`` if unknown), ``flower_node`` (``None``
        if no reply or failure named it), ``phase`` where it was lost and ``reason`` (a failure's exception type
        and message, as the client's line gave them).

        It was lost in the first phase whose active set it did not send (after the last one
        it did); ``phases + 1`` is the final exchange. The reason is the latest failure,
        rejection or departure seen from that phase on.
        """
        records = []
        for m in self.lost_clients():
            phase = self.machine.reported_phase[m] + 1
            seen = [(r["phase"], r["reason"]) for r in self.machine.rejected if r["client"] == m]
            if m in self.problems:
                seen.append(self.problems[m])
            since = [(p, why) for p, why in seen if p >= phase]
            if since:
                reason = max(since, key=lambda item: item[0])[1]
            elif phase > self.machine.completed:
                reason = "no usable final reply"
            else:
                reason = f"no usable reply from phase {phase} on"
            records.append({"client": m, "site": self.client_site(m),
                            "flower_node": self.nodes.get(m, self.failed_at.get(m, (None, None))[0]),
                            "phase": phase, "reason": reason})
        return records

    def client_nodes(self) -> list[int | None]:
        """The Flower node that held each client (``None`` where none did, and in process)."""
        return [self.nodes.get(m) for m in range(self.num_clients)]

    def client_sites(self) -> list[str | None]:
        """The ``site`` label each client's node declared (``None`` where it declared none)."""
        return [self.client_site(m) for m in range(self.num_clients)]

    def client_site(self, client: int) -> str | None:
        """Client ``client``'s site: its node's label (from its replies, else from its failures), else the
        federation's name for it (:attr:`Federation.sites`, in process), else ``None``."""
        named = self.federation.sites if self.federation is not None else None
        return self.sites.get(client) or self.failed_at.get(client, (None, None))[1] or (
            named[client] if named is not None and 0 <= client < len(named) else None)

    def site_columns(self) -> dict[str, Any]:
        """What the server knows of each client at the end, without a scored result: its site, Flower node and
        final point (one column per coordinate, named by the domain if the server knows it)."""
        points = self.final_points()
        names = self.federation.domain.names if self.federation is not None else \
            [f"x{j}" for j in range(points.shape[1])]
        columns: dict[str, Any] = {"client": list(range(self.num_clients)), "site": self.client_sites(),
                                   "flower_node": self.client_nodes()}
        columns.update({f"final_{name}": points[:, j] for j, name in enumerate(names) if j < points.shape[1]})
        return columns

    def _phase_name(self, phase: int) -> str:
        return "the final exchange" if self.machine.done and phase > self.machine.completed else f"phase {phase}"

    def pull_logs(self) -> list[PullLog]:
        """Each client's pull log from the last harness data it sent (simulation only).

        Every reply carries the client's log so far, so a client lost mid-run is scored
        up to its last reply (one that never replied: no pulls).
        """
        logs = []
        for m in range(self.num_clients):
            data = self.harness.get(m)
            if data is None or "pull-nodes" not in data or "pull-counts" not in data:
                logs.append(PullLog.empty())
                continue
            logs.append(PullLog(np.asarray(data["pull-nodes"], dtype=np.int64),
                                np.asarray(data["pull-counts"], dtype=np.int64)))
        return logs

    def result(self, engine: str, describe: Mapping[str, Any] | None = None) -> RunResult:
        """The scored result of a finished simulated run (the same for every engine but ``engine`` and bytes).

        Its ``run_seconds`` is the run up to the last reply, ``scoring_seconds`` what this call's
        scoring took (the optimum of every client, computed once per federation and alpha, and the
        regret: at M = 1000 seconds), and ``wall_seconds`` both.
        """
        if self.federation is None:
            raise IncompleteRunError("the run has no ground truth to score (no federation was given)")
        if self.stop_reason is not None:
            raise RunStoppedError(self.stop_reason)
        if not self.finished:
            raise IncompleteRunError(f"the run stopped after {self.machine.completed} phases, before the final round")
        settings = self.settings
        lost = frozenset(self.lost_clients())
        scoring_started = time.perf_counter()
        run_seconds = (self.ended or scoring_started) - self.started  # the exchanges, up to the last reply
        result = build_result(
            federation=self.federation,
            server=self.machine,
            ledger=score(self.federation, settings.alpha, settings.horizon, self.pull_logs(), lost,
                         points={"final": self.final_node_ids(), "best": self.best_node_ids()}),
            lost_clients=self.lost_client_records(),
            communication=self.communication,
            parameters=run_parameters(self.algorithm, self.federation.name, engine, settings, describe),
            wall_seconds=run_seconds,
            evaluations=evaluation_counts([self.harness.get(m) for m in range(self.num_clients)]),
            costs=site_costs([self.harness.get(m) for m in range(self.num_clients)]),
            flower_nodes=self.client_nodes(),
            sites=self.client_sites(),
        )
        # scoring (each client's optimum, its regret) comes after the last reply, off the exchanges' clock
        scoring_seconds = time.perf_counter() - scoring_started
        result.summary.update(wall_seconds=run_seconds + scoring_seconds, run_seconds=run_seconds,
                              scoring_seconds=scoring_seconds)
        if self.machine.policy.solo:  # its phases are its clients' own (none at the server)
            result.summary["client_phases"] = self.client_phases()
        return result

    def client_phases(self) -> list[int | None]:
        """The phases each client of a solo baseline ran alone (``None`` where its reply did not say)."""
        counts = [np.asarray(self.harness.get(m, {}).get(SOLO_PHASES, ())).reshape(-1) for m in range(self.num_clients)]
        return [int(count[0]) if count.size == 1 else None for count in counts]


def run_parameters(
    algorithm: str, problem: str, engine: str, settings: Settings, describe: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The leading entries of a run's summary: what ran, where, with which parameters."""
    return {"algorithm": algorithm, "problem": problem, "engine": engine, **settings.spec.summary(), **(describe or {})}
