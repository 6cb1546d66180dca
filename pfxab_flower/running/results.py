"""The result of one run: a summary, per-client and per-phase tables, the regret curve.

Every engine builds its result here from the same pieces, so a Flower run and an in-process run
with the same seed print the same numbers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pfxab_flower.algorithms.phased import ServerMachine
from pfxab_flower.problems.federation import Federation
from pfxab_flower.problems.optimum import Optimum
from pfxab_flower.problems.sampling import SiteCosts
from pfxab_flower.running.accounting import CommunicationLog, Ledger

if TYPE_CHECKING:
    import pandas as pd

    from pfxab_flower.storage.outputs import PathIdentity

#: The columns of ``phases.csv``, one row per completed phase (the server machine's history).
PHASE_COLUMNS = (
    "phase", "depth", "active_nodes", "eliminated", "global_pulls", "local_pulls", "phase_length", "time",
    "next_active_nodes", "communication_rounds", "failed_local_means", "failed_active_sets", "mean_observed_reward",
)


@dataclass
class RunResult:
    """Everything a run reports. ``summary`` is what ``pfxab run --json`` prints.

    The tables (``clients``, ``curve``, ``phases``, ``communication``) are pandas DataFrames
    made on first use from the columns the run kept: pandas costs ~0.2 s to import, which a
    run that only prints its summary (``pfxab run``) does not pay.
    """

    summary: dict[str, Any]
    ledger: Ledger
    client_columns: dict[str, Any] = field(repr=False)
    phase_rows: list[Mapping[str, Any]] = field(repr=False)
    communication_log: CommunicationLog = field(repr=False)

    @cached_property
    def clients(self) -> pd.DataFrame:
        """One row per client: its site label and Flower node, cumulative and simple regret, final node and point,
        best observed node, point and mean (with its pulls and simple regret), optimum, rewards, ..."""
        import pandas as pd

        frame = pd.DataFrame(self.client_columns)
        for column in ("final_node", "best_node", "best_observed_pulls"):  # null for a lost client (best: or none)
            frame[column] = pd.array(self.client_columns[column], dtype="Int64")
        if "flower_node" in frame:  # Flower's node ids are unsigned 64-bit; null in process
            frame["flower_node"] = pd.array(self.client_columns["flower_node"], dtype="UInt64")
            frame["site"] = pd.Series(self.client_columns["site"], dtype=object)  # None where no label was declared
        return frame

    @cached_property
    def curve(self) -> pd.DataFrame:
        """The total cumulative regret at every client's segment end (and t = 0)."""
        return self.ledger.curve()

    @cached_property
    def phases(self) -> pd.DataFrame:
        """One row per completed phase (:data:`PHASE_COLUMNS`)."""
        import pandas as pd

        return pd.DataFrame(self.phase_rows, columns=list(PHASE_COLUMNS))

    @cached_property
    def communication(self) -> pd.DataFrame:
        """One row per exchange: what crossed the network."""
        return self.communication_log.frame()

    def curve_at(self, times: np.ndarray) -> pd.DataFrame:
        """The cumulative regret (summed over clients) sampled at ``times``."""
        import pandas as pd

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

    def write(self, out_dir: str | os.PathLike[str], replace: bool = False,
              checked: PathIdentity | None = None) -> Path:
        """Write every table and ``summary.json`` as the content of ``out_dir``, as one unit (a result of kind ``run``).

        An older run's result there is kept whole if writing fails and replaced whole
        otherwise (:func:`pfxab_flower.storage.outputs.write_files_atomically`); another kind's result
        (a sweep's, a comparison's) only with ``replace``; a directory that is no longer what was
        ``checked`` before the run (moved, replaced) is refused.
        """
        from pfxab_flower.storage.outputs import write_files_atomically  # here: a run that only prints writes nothing

        return write_files_atomically(out_dir, self.files(), kind="run", replace=replace, checked=checked)


def time_grid(horizon: int, points: int = 200) -> np.ndarray:
    """The time grid of a sweep's and a comparison's curves: ``points`` log-spaced times from 1 to T, plus 0.

    Log spacing keeps the early phases visible on a log axis; the grid is made
    denser with ``points // 2`` evenly spaced times so that a linear axis (the
    paper's) is drawn faithfully too. Times are integers, where the exact curve is known.
    """
    log = np.geomspace(1, horizon, points)
    linear = np.linspace(0, horizon, points // 2 + 1)
    return np.unique(np.rint(np.concatenate([[0], log, linear])).astype(np.int64))


#: The summary's recommendation entries (docs/algorithms/index.md, "What a run recommends"): each client's simple
#: regret at its final point (and their mean), its best observed node, point, mean and pulls, and that point's
#: simple regret. Every engine gives the same values (the engine-equality tests compare them).
RECOMMENDATION_KEYS = (
    "simple_regret", "simple_regret_per_client", "best_nodes", "best_points", "best_observed_mean_per_client",
    "best_observed_pulls_per_client", "best_simple_regret", "best_simple_regret_per_client",
)
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


@dataclass(frozen=True)
class _Best:
    """Each client's best observed node (``None``: none), its point (NaN), mean (NaN) and pulls (``None``)."""

    nodes: list[int | None]
    points: np.ndarray
    means: np.ndarray
    pulls: list[int | None]


def _best_observed(federation: Federation, server: ServerMachine, num_clients: int) -> _Best:
    """The best observed points the clients reported (:attr:`ServerMachine.best_observed`), as columns."""
    reported = [server.best_observed.get(m) for m in range(num_clients)]
    nodes = [None if best is None else best[0] for best in reported]
    points = federation.partition.midpoints(np.array([node or 1 for node in nodes], dtype=np.int64))
    points[[node is None for node in nodes]] = np.nan
    means = np.array([np.nan if best is None else best[1] for best in reported], dtype=float)
    return _Best(nodes, points, means, [None if best is None else best[2] for best in reported])


def _mean(values: np.ndarray) -> float | None:
    """The mean of the finite values (``None`` if there is none: every client lost, or none scored)."""
    finite = np.asarray(values, dtype=float)[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None


def _listed(values: np.ndarray) -> list[float | None]:
    """Per-client values for the summary: a float each, ``None`` (null) where there is none."""
    return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=float)]


def build_result(
    *,
    federation: Federation,
    server: ServerMachine,
    ledger: Ledger,
    communication: CommunicationLog,
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
    rewards (:func:`pfxab_flower.problems.sampling.site_costs`). An unscored ledger (real evaluations, no
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

    final_node = [None if m in lost else int(n) for m, n in enumerate(final_nodes)]
    flower_nodes = list(flower_nodes) if flower_nodes is not None else [None] * M
    sites = list(sites) if sites is not None else [None] * M
    # which site each row is: its declared label and Flower node (None in process), next to the client index
    clients: dict[str, Any] = {"client": np.arange(M), "site": sites, "flower_node": flower_nodes}
    clients["regret"] = [c.regret for c in ledger.clients]
    clients["simple_regret"] = ledger.simple.get("final", np.full(M, np.nan))
    clients["final_node"] = final_node
    clients["pulls_scored"] = [c.pulls for c in ledger.clients]
    for j, name in enumerate(names):
        clients[f"final_{name}"] = final_points[:, j]
    best = _best_observed(federation, server, M)
    clients["best_node"] = best.nodes
    for j, name in enumerate(names):
        clients[f"best_{name}"] = best.points[:, j]
    clients["best_observed_mean"] = best.means
    clients["best_observed_pulls"] = best.pulls
    clients["best_simple_regret"] = ledger.simple.get("best", np.full(M, np.nan))
    clients["optimum_personalised"] = optimum.values
    for j, name in enumerate(names):
        clients[f"optimum_{name}"] = optimum.points[:, j]
    for kind in ("personalised", "global", "local"):
        clients[f"mean_reward_{kind}"] = np.array([getattr(c, f"reward_{kind}") / max(c.pulls, 1)
                                                   for c in ledger.clients], dtype=float)
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
        regret_per_client=known(list(clients["regret"])),
        simple_regret=known(_mean(clients["simple_regret"])),
        simple_regret_per_client=known(_listed(clients["simple_regret"])),
        phases=server.completed,
        communication_rounds=server.communication_rounds,
        values_down=communication.total("values_down"),
        values_up=communication.total("values_up"),
        bytes_down=communication.total("bytes_down"),
        bytes_up=communication.total("bytes_up"),
        rejected_replies=len(server.rejected),
        failures=server.failures,
        final_nodes=list(final_node),
        lost_clients=[dict(record) for record in lost_clients],
        flower_nodes=flower_nodes,
        sites=sites,
        pulls_scored=[c.pulls for c in ledger.clients],
        pulls_unscored=settings.horizon * M - sum(c.pulls for c in ledger.clients),  # lost clients' unreported pulls
        final_points=[None if m in lost else row for m, row in enumerate(final_points.tolist())],
        best_nodes=best.nodes,
        best_points=[None if node is None else row for node, row in zip(best.nodes, best.points.tolist(), strict=True)],
        best_observed_mean_per_client=_listed(best.means),
        best_observed_pulls_per_client=best.pulls,
        best_simple_regret=known(_mean(clients["best_simple_regret"])),
        best_simple_regret_per_client=known(_listed(clients["best_simple_regret"])),
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
    return RunResult(summary, ledger, clients, [dict(row) for row in server.history], communication)
