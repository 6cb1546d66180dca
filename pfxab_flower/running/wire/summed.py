"""The one vector a client hands to SecAgg+ in an explore exchange, and what the server reads from its sum.

The vector over the union ``A(p)`` holds ``means * sampled``, ``sampled`` and the bound's statistics
scaled into the clipping range, so the server learns only per-node sums and holder counts, from
which ``ServerMachine.aggregate_sums`` pools the means. Clipping and quantisation: docs/deployment.md
("Secure aggregation").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pfxab_flower.algorithms.messages import LocalReport
from pfxab_flower.errors import ObjectiveError

SECURE_CLIP = 8.0  # SecAgg+ clipping range (Flower's default): local means must lie in [-8, 8]
QUANTIZATION_RANGE = 2**22  # Flower's default: the quantisation step is 2 * SECURE_CLIP / 2**22
STATISTIC_SCALE = 2 * SECURE_CLIP  # statistics are sent divided by this (a variance into [0, SECURE_CLIP])


def local_vector(report: LocalReport) -> np.ndarray:
    """The vector a client hands to SecAgg+: its masked local means, its sampled flags, its masked statistics."""
    counts = np.asarray(report.counts)
    sampled = counts > 0
    means = np.where(sampled, np.asarray(report.means, dtype=float), 0.0)
    outside = np.flatnonzero(np.abs(means) > SECURE_CLIP)
    if outside.size:
        k = int(outside[0])
        raise ObjectiveError(
            f"client {report.client}: local mean {means[k]:.6g} of node {int(report.node_ids[k])} is outside "
            f"[-{SECURE_CLIP:g}, {SECURE_CLIP:g}], the range secure aggregation quantises; allowed: rewards "
            f"in that range (rescale the objective) or secure-aggregation=false"
        )
    blocks = [means, sampled.astype(float)]
    blocks += [np.where(sampled, np.asarray(values, dtype=float), 0.0) / STATISTIC_SCALE
               for values in report.statistics.values()]
    return np.concatenate(blocks)


def split_aggregate(
    average: np.ndarray, reporters: int, size: int, statistics: Sequence[str] = ()
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """``(sums, holders, statistic sums by name)`` from SecAgg+'s average over ``reporters`` clients.

    ``statistics`` names the blocks after the holders (the run's ``bound.statistics``).
    Wrong lengths are passed on for the core to reject.
    """
    vector = np.asarray(average, dtype=float).reshape(-1)
    if vector.size != (2 + len(statistics)) * size:
        return vector, np.zeros(0), {name: np.zeros(0) for name in statistics}
    sums, holders = vector[:size] * reporters, np.rint(vector[size:2 * size] * reporters)
    blocks = {name: vector[(2 + i) * size:(3 + i) * size] * reporters * STATISTIC_SCALE
              for i, name in enumerate(statistics)}
    return sums, holders, blocks
