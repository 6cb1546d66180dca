"""PF-XAB written the plain way: one pull, one reward, one Python step at a time.

The per-pull reference (as single-client libraries such as PyXAB work) that the benchmark compares
the vectorised engine with; with ``sigma = 0`` it makes the engine's decisions (checked by the tests).
"""

from __future__ import annotations

import math

import numpy as np

from pfxab_flower.problems.federation import Federation


def plain_pfxab(
    federation: Federation, alpha: float, horizon: int, seed: int = 0, nu1: float = 1.0, rho: float = 0.5
) -> list[int]:
    """Run PF-XAB pull by pull; return each client's final node."""
    M, T = federation.num_clients, horizon
    noise = federation.noise
    rng = np.random.default_rng(seed)
    partition = federation.partition
    active = [[2, 3] for _ in range(M)]
    choice = [1] * M
    t, phase = 0, 1

    points: dict[int, np.ndarray] = {}  # a node's centre, computed once (PyXAB stores it in the node)

    def pull(m: int, node: int) -> float:
        if node not in points:
            points[node] = partition.midpoints(np.array([node]))
        value = float(federation.objectives[m](points[node])[0])  # one objective call per pull
        return value + (rng.uniform(-noise.sigma, noise.sigma) if noise.sigma else 0.0)

    while True:
        f = 2.0 * math.log(T) / (M * nu1**2 * rho ** (2 * phase))
        bound = math.sqrt(2.0) * math.sqrt(math.log(T) / (M * f))
        union = sorted(set().union(*active))
        n_g, n_l = math.ceil((1 - alpha) * f), math.ceil(M * alpha * f)
        length = len(union) * n_g + max(len(a) for a in active) * n_l
        if length < 1 or t + length > T:
            break
        local_means = []
        for m in range(M):
            sums = dict.fromkeys(union, 0.0)
            counts = dict.fromkeys(union, 0)
            for node in union:
                for _ in range(n_g):
                    sums[node] += pull(m, node)
                    counts[node] += 1
            for node in active[m]:
                for _ in range(n_l):
                    sums[node] += pull(m, node)
                    counts[node] += 1
            means = {k: sums[k] / counts[k] for k in union if counts[k]}
            best_local = max(active[m], key=lambda k, means=means: means[k])
            for _ in range(length - sum(counts.values())):
                pull(m, best_local)
            local_means.append(means)
        global_means = {k: np.mean([lm[k] for lm in local_means if k in lm]) for k in union}
        for m in range(M):
            score = {k: alpha * local_means[m][k] + (1 - alpha) * global_means[k] for k in active[m]}
            top = max(score.values())
            survivors = [k for k in active[m] if score[k] + nu1 * rho**phase > top - 2 * bound]
            choice[m] = max(survivors, key=score.__getitem__)
            active[m] = sorted([2 * k for k in survivors] + [2 * k + 1 for k in survivors])
        t += length
        phase += 1
    for m in range(M):
        for _ in range(T - t):
            pull(m, choice[m])
    return choice
