"""How the server pools the clients' reports per node: means and the bound's statistics alike."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pfxab_flower.algorithms.messages import LocalReport


def observed_mean(reports: list[LocalReport]) -> float:
    """The mean of every reward the reports observed (each local mean weighted by its count)."""
    total = sum(float(np.sum(np.where(r.counts > 0, r.means, 0.0) * r.counts)) for r in reports)
    pulls = sum(int(np.sum(r.counts)) for r in reports)
    return total / pulls if pulls else math.nan


def holders(union: np.ndarray, reports: list[LocalReport]) -> np.ndarray:
    """How many of the reports sampled each node of ``union``."""
    if not reports:
        return np.zeros(union.shape)
    holders: np.ndarray = np.stack([np.asarray(r.counts) > 0 for r in reports]).sum(axis=0).astype(float)
    return holders


def mean_over_holders(union: np.ndarray, reports: list[LocalReport], values: Sequence[np.ndarray]) -> np.ndarray:
    """Mean of each node's ``values`` (one array per report) over the reports that sampled it (NaN if none did)."""
    if not reports:
        return np.full(union.shape, np.nan)
    stacked = np.stack([np.asarray(v, dtype=float) for v in values])
    sampled = np.stack([np.asarray(r.counts) > 0 for r in reports])
    count = sampled.sum(axis=0)
    total = np.where(sampled, stacked, 0.0).sum(axis=0)
    pooled: np.ndarray = np.divide(total, count, out=np.full(union.shape, np.nan), where=count > 0)
    return pooled


def pooled_means(union: np.ndarray, reports: list[LocalReport]) -> np.ndarray:
    """Mean of the local means of each node over the reports that sampled it (NaN if none did)."""
    return mean_over_holders(union, reports, [r.means for r in reports])


def pooled_statistics(union: np.ndarray, reports: list[LocalReport], names: Sequence[str]) -> dict[str, np.ndarray]:
    """Each named statistic's mean over the reports that sampled the node (NaN if none did).

    A client's statistic is about its own rewards (e.g. a variance around its own mean),
    so pooling estimates the within-client value a global mean's width needs, not the
    spread between clients' objectives.
    """
    return {name: mean_over_holders(union, reports, [r.statistics[name] for r in reports]) for name in names}
