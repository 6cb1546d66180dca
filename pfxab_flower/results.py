"""The result of one run: a summary, per-client and per-phase tables, the regret curve.

Both engines build their result here from the same pieces (the server machine,
the clients' pull logs scored by :mod:`.accounting`, the communication log), so
a Flower run and an in-process run with the same seed print the same numbers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pfxab_flower.accounting import Ledger
from pfxab_flower.algorithms.phased import ServerMachine
from pfxab_flower.outputs import write_files_atomically
from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.optimum import Optimum
from pfxab_flower.sampling import SiteCosts


@dataclass
class RunResult:
    """Everything a run reports. ``summary`` is what ``pfxab run --json`` prints."""

    summary: dict[str, Any]
    clients: pd.DataFrame
    curve: pd.DataFrame
    phases: pd.DataFrame
    communication: pd.DataFrame
    ledger: Ledger

    def curve_at(self, times: np.ndarray) -> pd.DataFrame:
        """The cumulative regret (summed over clients) sampled at ``times``."""
        times = np.asarray(times)
        return pd.DataFrame({"t": times, "regret": self.ledger.curve_at(times)})

    def to_json(self) -> str:
        return json.dumps(self.summary, sort_keys=False)

    def files(self) -> dict[str, str]:
        """The result as files (name -> text), ``summary.json`` last: it marks a complete result."""
        frames = {
            "clients.csv": self.clients,
            "curve.csv": self.curve,
            "phases.csv": self.phases,
            "communication.csv": self.communication,
        }
        texts = {name: frame.to_csv(index=False) for name, frame in frames.items()}
        texts["summary.json"] = json.dumps(self.summary, indent=2) + "\n"
        return texts

    def write(self, out_dir: str | os.PathLike[str]) -> Path:
        """Write every table and ``summary.json`` as the content of ``out_dir``, as one unit.

        An older result there is kept whole if writing fails and replaced whole
        otherwise (:func:`pfxab_flower.outputs.write_files_atomically`).
        """
        return write_files_atomically(out_dir, self.files())


def time_grid(horizon: int, points: int = 200) -> np.ndarray:
    """The time grid of a sweep's and a comparison's curves: ``points`` log-spaced times from 1 to T, plus 0.

    Log spacing keeps the early phases visible on a log axis; the grid is made
    denser with ``points // 2`` evenly spaced times so that a linear axis (the
    paper's) is drawn faithfully too. Times are integers, where the exact curve is known.
    """
    log = np.geomspace(1, horizon, points)
    linear = np.linspace(0, horizon, points // 2 + 1)
    return np.unique(np.rint(np.concatenate([[0], log, linear])).astype(np.int64))


#: The files of a written result (``pfxab run --out``, the ServerApp's ``out-dir``).
RESULT_FILES = ("clients.csv", "curve.csv", "phases.csv", "communication.csv", "summary.json")


def _unknown_optimum(num_clients: int, ndim: int) -> Optimum:
    """The optimum of an unscored run: NaN (its objectives are not evaluated beyond the pulls)."""
    return Optimum(np.full(num_clients, np.nan), np.full((num_clients, ndim), np.nan), True, "not computed")


def _observed_means(federation: Federation, ledger: Ledger, costs: SiteCosts | None) -> list[float] | None:
    """Each client's mean observed reward per pull, in a real mode (a simulated exploitation draws no reward)."""
    if costs is None or federation.evaluation == "simulated":
        return None
    return [total / max(c.pulls, 1) for total, c in zip(costs.observed, ledger.clients, strict=True)]


def build_result(
    *,
    federation: Federation,
    server: ServerMachine,
    ledger: Ledger,
    communication: pd.DataFrame,
    parameters: Mapping[str, Any],
    wall_seconds: float,
    evaluations: list[int] | None = None,
    lost_clients: Sequence[Mapping[str, Any]] = (),
    costs: SiteCosts | None = None,
    flower_nodes: Sequence[int | None] | None = None,
    sites: Sequence[str | None] | None = None,
) -> RunResult:
    """Assemble the result of a finished run (``parameters`` describe the run: algorithm, seed, ...).

    ``evaluations`` are each client's objective calls (distinct points for a
    deterministic reward): what the run cost a practitioner, next to its pulls.
    ``None`` when the engine did not count them (reported as null). ``lost_clients``
    describe the clients with no final report (``client``, ``flower_node``, ``phase``,
    ``reason``: :meth:`ServerDriver.lost_client_records`); their final point is NaN
    (``null`` in the summary). ``costs`` are each client's objective wall seconds and observed
    rewards (:func:`pfxab_flower.sampling.site_costs`). An unscored ledger (real evaluations, no
    reference) gives ``null`` regret, optimum and true mean rewards, and never evaluates the optimum.
    ``flower_nodes`` are the Flower nodes that held the clients (``None`` where none did, and in process),
    ``sites`` the ``site`` labels their node configs declare (``None`` where none did).
    """
    settings = server.settings
    M = settings.num_clients
    lost = [m for m in range(M) if m not in server.final_nodes]  # nodes that died before the end
    final_nodes = np.array([server.final_nodes.get(m, 1) for m in range(M)], dtype=np.int64)
    final_points = federation.partition.midpoints(final_nodes)
    final_points[lost] = np.nan
    truth = federation.truth() if ledger.scored else None
    optimum = truth.optimum(settings.alpha) if truth is not None else _unknown_optimum(M, federation.domain.ndim)
    names = federation.domain.names

    clients = pd.DataFrame({"client": np.arange(M)})
    clients["regret"] = [c.regret for c in ledger.clients]
    clients["final_node"] = pd.array([None if m in lost else int(n) for m, n in enumerate(final_nodes)], dtype="Int64")
    clients["pulls_scored"] = [c.pulls for c in ledger.clients]
    for j, name in enumerate(names):
        clients[f"final_{name}"] = final_points[:, j]
    clients["optimum_personalised"] = optimum.values
    for j, name in enumerate(names):
        clients[f"optimum_{name}"] = optimum.points[:, j]
    clients["mean_reward_personalised"] = [c.reward_personalised / max(c.pulls, 1) for c in ledger.clients]
    clients["mean_reward_global"] = [c.reward_global / max(c.pulls, 1) for c in ledger.clients]
    clients["mean_reward_local"] = [c.reward_local / max(c.pulls, 1) for c in ledger.clients]
    if evaluations is not None:
        clients["evaluations"] = [int(e) for e in evaluations]
    observed = _observed_means(federation, ledger, costs)
    if costs is not None:
        clients["objective_seconds"] = costs.seconds
    if observed is not None:
        clients["mean_observed_reward"] = observed

    def known(value: Any) -> Any:
        """A value that needs the ground truth: itself if the run is scored, else ``None`` (null)."""
        return value if ledger.scored else None

    summary: dict[str, Any] = dict(parameters)
    summary.update(
        regret=known(ledger.regret),
        regret_per_client=known(clients["regret"].tolist()),
        phases=server.completed,
        communication_rounds=server.communication_rounds,
        values_down=int(communication["values_down"].sum()),
        values_up=int(communication["values_up"].sum()),
        bytes_down=int(communication["bytes_down"].sum()),
        bytes_up=int(communication["bytes_up"].sum()),
        rejected_replies=len(server.rejected),
        failures=server.failures,
        final_nodes=[None if m in lost else int(n) for m, n in enumerate(final_nodes)],
        lost_clients=[dict(record) for record in lost_clients],
        flower_nodes=list(flower_nodes) if flower_nodes is not None else [None] * M,
        sites=list(sites) if sites is not None else [None] * M,
        pulls_scored=[c.pulls for c in ledger.clients],
        final_points=[None if m in lost else row for m, row in enumerate(final_points.tolist())],
        dimensions=names,
        mean_reward_personalised=known(float(clients["mean_reward_personalised"].mean())),
        mean_reward_global=known(float(clients["mean_reward_global"].mean())),
        mean_reward_local=known(float(clients["mean_reward_local"].mean())),
        optimum_personalised=known(optimum.values.tolist()),
        optimum_estimated=known(bool(optimum.estimated)),
        optimum_method=known(optimum.method),
        evaluations=None if evaluations is None else int(sum(evaluations)),
        evaluations_per_client=None if evaluations is None else [int(e) for e in evaluations],
        wall_seconds=float(wall_seconds),
        evaluation=federation.evaluation,
        objective_seconds=None if costs is None else float(sum(costs.seconds)),
        objective_seconds_per_client=None if costs is None else list(costs.seconds),
        mean_observed_reward=None if observed is None else float(np.mean(observed)),
        mean_observed_reward_per_client=observed,
    )
    phases = pd.DataFrame(
        server.history,
        columns=[
            "phase", "depth", "active_nodes", "eliminated", "global_pulls", "local_pulls",
            "phase_length", "time", "next_active_nodes", "communication_rounds", "failed_local_means",
            "failed_active_sets", "mean_observed_reward",
        ],
    )
    return RunResult(summary, clients, ledger.curve(), phases, communication, ledger)
