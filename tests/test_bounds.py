"""Confidence bounds are components: a new one plugs into the machines and codecs unchanged.

A third bound defined here (Hoeffding widths from the pulls each estimate really rests
on, which its clients report as a per-node statistic) runs whole phases through the
client and server machines, with every message through the wire codec and the SecAgg+
layout, without a line of the skeleton, the policies or the codecs knowing it. And no
code outside the bounds asks which bound a run uses.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.bounds import BOUNDS, ConfidenceBound, Design, Samples
from pfxab_flower.algorithms.messages import FinishInstruction, GlobalUpdate, LocalReport
from pfxab_flower.algorithms.phased import ClientMachine, ClientView, ServerMachine, Settings
from pfxab_flower.algorithms.registry import federated_names
from pfxab_flower.algorithms.schedule import C
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.sampling import SimulatedEnvironment
from pfxab_flower.running import engine
from pfxab_flower.running.wire import codec, summed
from pfxab_flower.schema.catalogue import CONFIDENCES
from pfxab_flower.schema.run_config import RunConfig
from tests.conftest import cheap_horizon

ROOT = Path(__file__).resolve().parents[1]


class Counted(ConfidenceBound):
    """Hoeffding's ``c sqrt(log T / n)`` for the ``n`` pulls behind each estimate, as the clients report them."""

    name = "counted"
    statistics = ("pulls",)

    def samples(self, settings: Settings, phase: int, design: Design) -> float:
        return settings.schedule.f(phase)

    def client_statistics(self, settings: Settings, samples: Samples) -> dict[str, np.ndarray]:
        return {"pulls": samples.counts.astype(float)}

    def check_statistic(self, settings: Settings, name: str, values: np.ndarray, counts: np.ndarray) -> str | None:
        return None if np.array_equal(values, counts) else "pulls are not the counts"

    def global_widths(
        self, settings: Settings, phase: int, pooled: Mapping[str, np.ndarray], holders: np.ndarray, min_count: int
    ) -> np.ndarray:
        return self.width(settings, holders * pooled["pulls"])

    def local_widths(self, settings: Settings, view: ClientView) -> np.ndarray:
        return self.width(settings, view.local_counts)

    def personalised_widths(self, settings: Settings, view: ClientView) -> np.ndarray:
        return self.width(settings, view.holders * view.pooled_statistics["pulls"])

    @staticmethod
    def width(settings: Settings, pulls: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(pulls > 0, C * np.sqrt(math.log(settings.horizon) / pulls), np.inf)


def through_the_wire(message, names):
    """A message after the codec (a broadcast names its statistics from its own parameters, a reply from ``names``)."""
    if isinstance(message, LocalReport):
        return codec.read_reply(*codec.reply_payload(message), LocalReport, names)
    return codec.read_broadcast(*codec.broadcast_payload(message))


@pytest.mark.parametrize("algorithm", federated_names())  # the baselines run no phase
def test_a_new_bound_runs_through_the_machines_and_codecs_unchanged(algorithm, monkeypatch) -> None:
    monkeypatch.setitem(BOUNDS, "counted", Counted())
    horizon = cheap_horizon(algorithm, 4, 100_000)  # optuna-tpe-fed: 20 phases show the bound's travel as 200 do
    federation = build_federation(RunConfig(problem="garland", num_clients=4, horizon=horizon, seed=3))
    settings = engine.make_settings(4, algorithm=algorithm, alpha=0.5, horizon=horizon, seed=3, confidence="counted",
                                    dimensions=federation.domain.ndim)
    policy = make_policy(algorithm)
    server = ServerMachine(policy, settings)
    clients = [ClientMachine(policy, settings, m) for m in range(4)]
    envs = [SimulatedEnvironment(federation, m) for m in range(4)]
    names = settings.bound.statistics
    while not isinstance(instruction := server.next_instruction(), FinishInstruction):
        reports = [through_the_wire(c.explore(through_the_wire(instruction, names), e), names)
                   for c, e in zip(clients, envs, strict=True)]
        for report in reports:  # the statistic travelled by name
            np.testing.assert_array_equal(report.statistics["pulls"], report.counts)
        size = len(instruction.node_ids)
        sums, holders, totals = summed.split_aggregate(
            np.mean([summed.local_vector(r) for r in reports], axis=0), len(reports), size, names)
        np.testing.assert_allclose(sums, np.sum([np.where(r.counts > 0, r.means, 0.0) for r in reports], axis=0))
        np.testing.assert_allclose(totals["pulls"], np.sum([r.counts for r in reports], axis=0))
        update = through_the_wire(server.aggregate(reports), names)
        assert isinstance(update, GlobalUpdate) and list(update.statistics) == ["pulls"]
        np.testing.assert_array_equal(update.holders, holders)
        server.collect([c.eliminate(update, e) for c, e in zip(clients, envs, strict=True)])
    assert server.completed >= 3 and server.rejected == []
    assert sum(row["eliminated"] for row in server.history) > 0  # its widths did eliminate


def test_every_registered_bound_is_a_confidence_choice() -> None:
    assert set(CONFIDENCES) == set(BOUNDS)
    assert all(bound.name == name for name, bound in BOUNDS.items())


def bound_name_lines(source: str) -> list[int]:
    """Lines where ``source`` compares with a bound's name or reads an attribute named after one."""
    names = set(BOUNDS)
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            if any(isinstance(o, ast.Constant) and o.value in names for o in (node.left, *node.comparators)):
                lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr in names:
            lines.append(node.lineno)
    return lines


SCHEMA = ROOT / "pfxab_flower" / "schema"


def test_no_code_outside_the_bounds_asks_which_bound_runs() -> None:
    """``schema/catalogue.py`` validates the name and ``schema/run_config.py``'s reward-range check still names one;
    everything else uses the bound's interface."""
    sources = [p for folder in ("pfxab_flower", "flower_shared", "strategies", "client_apps", "simulations")
               for p in (ROOT / folder).rglob("*.py")
               if "bounds" not in p.parts
               and p not in (SCHEMA / "catalogue.py", SCHEMA / "run_config.py")]
    assert len(sources) > 30
    hits = [f"{p.relative_to(ROOT)}:{line}" for p in sources for line in bound_name_lines(p.read_text("utf-8"))]
    assert hits == []


def test_the_name_check_sees_a_branch() -> None:
    assert bound_name_lines("if settings.confidence == 'bernstein' or settings.hoeffding:\n    pass\n") == [1, 1]
