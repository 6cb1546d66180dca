"""The result of one run: a summary, per-client and per-phase tables, the regret curve.

Both engines build their result here from the same pieces (the server machine,
the clients' pull logs scored by :mod:`.accounting`, the communication log), so
a Flower run and an in-process run with the same seed print the same numbers.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pfxab_flower.accounting import Ledger
from pfxab_flower.algorithms.phased import ServerMachine
from pfxab_flower.problems.federation import Federation


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

    def write(self, out_dir: str | os.PathLike) -> Path:
        """Write every table and ``summary.json`` into ``out_dir``, each file atomically."""
        frames = {
            "clients.csv": self.clients,
            "curve.csv": self.curve,
            "phases.csv": self.phases,
            "communication.csv": self.communication,
        }
        texts = {name: frame.to_csv(index=False) for name, frame in frames.items()}
        texts["summary.json"] = json.dumps(self.summary, indent=2) + "\n"
        return write_files_atomically(out_dir, texts)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_files_atomically(out_dir: str | os.PathLike, texts: Mapping[str, str | bytes]) -> Path:
    """Write each file to a temporary name in ``out_dir`` then rename it, in the given order.

    A crash never leaves a half-written file under a final name; files are renamed
    in order, so the last one (``summary.json``) exists only if all the others do.
    A ``bytes`` value (e.g. Parquet) is written as is, a ``str`` as UTF-8 text.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(text if isinstance(text, bytes) else text.encode("utf-8"))
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600: give the file the usual mode
            os.replace(tmp, out / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return out


def build_result(
    *,
    federation: Federation,
    server: ServerMachine,
    ledger: Ledger,
    communication: pd.DataFrame,
    parameters: Mapping[str, Any],
    wall_seconds: float,
) -> RunResult:
    """Assemble the result of a finished run (``parameters`` describe the run: algorithm, seed, ...)."""
    settings = server.settings
    M, T = settings.num_clients, settings.horizon
    final_nodes = np.array([server.final_nodes[m] for m in range(M)], dtype=np.int64)
    final_points = federation.partition.midpoints(final_nodes)
    optimum = federation.optimum(settings.alpha)
    names = federation.domain.names

    clients = pd.DataFrame({"client": np.arange(M)})
    clients["regret"] = [c.regret for c in ledger.clients]
    clients["final_node"] = final_nodes
    for j, name in enumerate(names):
        clients[f"final_{name}"] = final_points[:, j]
    clients["optimum_personalised"] = optimum.values
    for j, name in enumerate(names):
        clients[f"optimum_{name}"] = optimum.points[:, j]
    clients["mean_reward_personalised"] = [c.reward_personalised / T for c in ledger.clients]
    clients["mean_reward_global"] = [c.reward_global / T for c in ledger.clients]
    clients["mean_reward_local"] = [c.reward_local / T for c in ledger.clients]

    summary: dict[str, Any] = dict(parameters)
    summary.update(
        regret=ledger.regret,
        regret_per_client=clients["regret"].tolist(),
        phases=server.completed,
        communication_rounds=server.communication_rounds,
        values_down=int(communication["values_down"].sum()),
        values_up=int(communication["values_up"].sum()),
        bytes_down=int(communication["bytes_down"].sum()),
        bytes_up=int(communication["bytes_up"].sum()),
        rejected_replies=len(server.rejected),
        failures=server.failures,
        final_nodes=final_nodes.tolist(),
        final_points=final_points.tolist(),
        dimensions=names,
        mean_reward_personalised=float(clients["mean_reward_personalised"].mean()),
        mean_reward_global=float(clients["mean_reward_global"].mean()),
        mean_reward_local=float(clients["mean_reward_local"].mean()),
        optimum_personalised=optimum.values.tolist(),
        optimum_estimated=bool(optimum.estimated),
        optimum_method=optimum.method,
        wall_seconds=float(wall_seconds),
    )
    phases = pd.DataFrame(
        server.history,
        columns=[
            "phase", "depth", "active_nodes", "eliminated", "global_pulls", "local_pulls",
            "phase_length", "time", "next_active_nodes", "rounds", "failed_local_means", "failed_active_sets",
        ],
    )
    return RunResult(summary, clients, ledger.curve(), phases, communication, ledger)
