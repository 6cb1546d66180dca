"""Where each algorithm spends its pulls and its regret: the numbers behind ``docs/comparison.md``.

Run ``python docs/comparison_breakdown.py`` (about a minute on 2 cores). For every
problem, alpha and algorithm (M = 10, T = 2e6, uniform noise sigma = 0.1) it replays runs with
the in-process engine's reference loop (``engine.simulate``), scores them exactly, and splits
each client's regret into exploration pulls, exploitation while waiting for the other clients,
and the final exploitation after the last phase (regret is linear inside a pull segment, so the
split is exact). It prints Markdown tables: the split (mean over seeds), and per phase the pulls
behind each estimate, the elimination threshold and the actual standard error of the estimate.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the clone's code: the numbers of its docs
if not Path(sys.path[0], "pfxab_flower", "__init__.py").is_file():
    print(f"{Path(__file__).name}: error: {sys.path[0]} is not a clone of pfxab-flower; allowed: run this script from "
          "the docs/ folder of a clone (it is not installed with the package)", file=sys.stderr)
    raise SystemExit(2)

import numpy as np
import pandas as pd

from pfxab_flower.algorithms import make_policy
from pfxab_flower.algorithms.messages import PhaseInstruction
from pfxab_flower.algorithms.registry import options_of
from pfxab_flower.arms.noise import NoiseModel
from pfxab_flower.problems.synthetic import synthetic_federation
from pfxab_flower.running.accounting import score
from pfxab_flower.running.engine import make_settings, simulate

M, T, SIGMA, EPS = 10, 2_000_000, 0.1, 0.1
ALGORITHMS = ("pf-xab", "fed-pne", "pf-pne")
PULL_SD = SIGMA / math.sqrt(3.0)  # standard deviation of one U[-sigma, sigma] draw


def split(fed, algorithm: str, alpha: float, seed: int) -> tuple[dict, list[dict]]:
    own = {"pf_pne_eps": EPS} if "pf_pne_eps" in options_of(algorithm) else {}  # PF-PNE's own parameter
    settings = make_settings(M, algorithm=algorithm, alpha=alpha, horizon=T, seed=seed, **own)
    sim = simulate(fed, make_policy(algorithm), settings, keep_messages=True)
    ledger = score(fed, alpha, T, [e.log for e in sim.envs])
    phases = [(b, r, u, s) for (b, r), (u, s) in zip(sim.messages[0:-1:2], sim.messages[1::2], strict=False)
              if isinstance(b, PhaseInstruction)]
    explore = wait = 0.0
    rows = []
    start = 0
    for instruction, reports, update, _ in phases:
        p, n_g, n_l = instruction.phase, instruction.global_pulls, instruction.local_pulls
        own_sizes, ses = [], []
        counts = np.stack([r.counts for r in reports])
        for m, client in enumerate(ledger.clients):
            def cum(t: float, c=client) -> float:
                return float(np.interp(t, np.r_[0, c.ends], np.r_[0.0, c.cumulative_regret]))

            explored = int(counts[m].sum())
            explore += cum(start + explored) - cum(start)
            wait += cum(start + update.phase_length) - cum(start + explored)
            own = counts[m] == n_g + n_l if n_l else counts[m] > 0
            own_sizes.append(int(own.sum()))
            # standard error of the estimate the client eliminates with, for one of its own nodes
            j = int(np.flatnonzero(own)[0])
            if algorithm == "pf-xab":
                others = np.delete(counts[:, j], m)
                var = (alpha + (1 - alpha) / M) ** 2 / counts[m, j] + ((1 - alpha) / M) ** 2 * np.sum(1.0 / others)
            elif algorithm == "fed-pne":
                var = 1.0 / counts[:, j].sum()
            else:
                var = 1.0 / counts[m, j]
            ses.append(PULL_SD * math.sqrt(var))
        start += update.phase_length
        h = settings.schedule.smoothness(p)
        threshold = 3 * h if algorithm != "pf-pne" else h + 2 * math.sqrt(2 * math.log(T) / n_l)
        rows.append({"phase": p, "union": len(instruction.node_ids), "mean |A^m|": np.mean(own_sizes),
                     "n_g": n_g, "n_l": n_l, "L_p": update.phase_length,
                     "samples/own node": n_g + n_l, "drop gap": threshold, "se": np.mean(ses)})
    total = ledger.regret
    summary = {"phases": len(phases), "phases end (t)": start, "regret": total,
               "exploration": explore, "waiting": wait, "final": total - explore - wait}
    return summary, rows


def markdown(frame: pd.DataFrame) -> str:
    """A Markdown table (4 significant digits), without the optional ``tabulate`` dependency."""
    def cell(v: object) -> str:
        return f"{v:.4g}" if isinstance(v, float | np.floating) else str(v)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def main() -> None:
    for problem in ("garland", "doublesine"):
        fed = synthetic_federation(problem, M, 0.3, NoiseModel("uniform", SIGMA))
        for alpha in (0.1, 0.5, 0.9):
            fed.optimum(alpha)
            records = []
            for algorithm in ALGORITHMS:
                runs = [split(fed, algorithm, alpha, seed)[0] for seed in range(10)]
                mean = pd.DataFrame(runs).mean()
                records.append({"algorithm": algorithm, **mean.to_dict()})
            frame = pd.DataFrame(records)
            for part in ("exploration", "waiting", "final"):
                frame[f"{part} %"] = 100 * frame[part] / frame["regret"]
            print(f"\n### {problem}, alpha = {alpha} (mean over seeds 0-9)\n")
            print(markdown(frame))
    fed = synthetic_federation("garland", M, 0.3, NoiseModel("uniform", SIGMA))
    for alpha in (0.1, 0.5, 0.9):
        for algorithm in ALGORITHMS:
            print(f"\n#### garland, alpha = {alpha}, {algorithm}, seed 0: per phase\n")
            print(markdown(pd.DataFrame(split(fed, algorithm, alpha, 0)[1])))


if __name__ == "__main__":
    main()
