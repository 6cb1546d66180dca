"""``pf-sh`` with a client that fails every round, and with one that lies: what the others pay (issue 46).

Run ``python docs/pf_sh_failures.py`` (about a minute on 2 cores). First, client 2 of M misses every round
(``FaultPlan(rate=1.0, clients=(2,))``; ``pfxab simulate --fail-rate 1 --fail-clients 2`` is the same plan
under Flower) on garland and garland-2d, M = 4 and 10, alpha 0.5, T = 1e5, seeds 0-2: the healthy clients'
regret with and without the failure. Then client 1 of 3 replies to every round keeping all it held: the
server's verdict and the honest clients' regret beside it. Prints Markdown tables (docs/algorithms/pf-sh.md).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the clone's code: the numbers of its docs
if not Path(sys.path[0], "pfxab_flower", "__init__.py").is_file():
    print(f"{Path(__file__).name}: error: {sys.path[0]} is not a clone of pfxab-flower; allowed: run this script from "
          "the docs/ folder of a clone (it is not installed with the package)", file=sys.stderr)
    raise SystemExit(2)

import numpy as np

from pfxab_flower import run
from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.messages import ActiveSetReport, Message
from pfxab_flower.faults import FaultPlan
from pfxab_flower.problems import build_federation
from pfxab_flower.problems.sampling import SimulatedEnvironment
from pfxab_flower.running.client_session import ClientSession, MemoryStore
from pfxab_flower.running.driver import ServerDriver
from pfxab_flower.running.engine import make_settings
from pfxab_flower.running.exchanges import Exchange
from pfxab_flower.schema.run_config import RunConfig

SEEDS = (0, 1, 2)


def healthy_regret(problem: str, num_clients: int, faults: FaultPlan | None, seed: int) -> float:
    """The summed regret of every client but client 2 (the one that fails when ``faults`` is given)."""
    fed = build_federation(RunConfig(problem=problem, num_clients=num_clients, seed=seed))
    result = run(fed, "pf-sh", alpha=0.5, horizon=100_000, seed=seed, faults=faults or FaultPlan())
    return float(np.delete(result.clients["regret"].to_numpy(), 2).sum())


def with_a_liar(seed: int, lies: bool) -> tuple[list[float], list[dict]]:
    """Client 1 of 3 keeps every candidate it held after each round (if ``lies``): honest regret, rejections."""
    fed = build_federation(RunConfig(problem="garland", num_clients=3, seed=seed))
    settings = make_settings(3, algorithm="pf-sh", alpha=0.5, horizon=100_000, seed=seed,
                             reward_range=fed.reward_range, dimensions=1)
    held = make_policy("pf-sh").first_active_set(settings)

    def tamper(report: Message) -> Message:
        if lies and isinstance(report, ActiveSetReport) and report.client == 1:
            return dataclasses.replace(report, node_ids=held.copy())
        return report

    driver = ServerDriver("pf-sh", settings, fed)
    sessions = [ClientSession(m, MemoryStore(), partial(SimulatedEnvironment.restored, fed, m)) for m in range(3)]
    while (outgoing := driver.next_exchange()) is not None:
        exchange = Exchange()
        for session in sessions:
            reply = session.handle(outgoing.message)
            exchange.add(tamper(reply.report), None, reply.harness)
        driver.deliver(exchange)
    regret = driver.result("inprocess").clients["regret"].to_numpy()
    return [float(regret[0]), float(regret[2])], driver.machine.rejected


def main() -> None:
    logging.disable(logging.WARNING)
    print("| problem | M | healthy clients' regret, no fault | with client 2 failing every round | ratio |")
    print("|---|---|---|---|---|")
    for problem in ("garland", "garland-2d"):
        for num_clients in (4, 10):
            alone = np.mean([healthy_regret(problem, num_clients, None, s) for s in SEEDS])
            failing = np.mean([healthy_regret(problem, num_clients, FaultPlan(seed=s, rate=1.0, clients=(2,)), s)
                               for s in SEEDS])
            print(f"| {problem} | {num_clients} | {alone:,.0f} | {failing:,.0f} | {failing / alone:.3f} |")
    print()
    print("| seed | honest clients' regret (0, 2), no liar | with client 1 keeping all | replies rejected |")
    print("|---|---|---|---|")
    for seed in SEEDS:
        honest, _ = with_a_liar(seed, lies=False)
        lied, rejected = with_a_liar(seed, lies=True)
        first = rejected[0]["reason"] if rejected else ""
        print(f"| {seed} | {honest[0]:,.0f}, {honest[1]:,.0f} | {lied[0]:,.0f}, {lied[1]:,.0f} | "
              f"{len(rejected)} (\"{first}\") |")


if __name__ == "__main__":
    main()
