"""Phased elimination on a hierarchical partition: the skeleton shared by every algorithm.

The federated algorithms share phases, schedule, budget rule and messages, and differ only in their
:class:`Policy`; the baselines run the same machines with no phase (:mod:`pfxab_flower.algorithms.baselines.solo`).
:class:`ClientMachine` and :class:`ServerMachine` are pure and deterministic given their inputs and
the seed, so every engine gives the same numbers. Widths come from :mod:`pfxab_flower.algorithms.bounds`.
"""

from pfxab_flower.algorithms.bounds import ClientView
from pfxab_flower.algorithms.phased.client import ClientMachine, min_pulls
from pfxab_flower.algorithms.phased.policy import Policy, Proposal, RoundEstimates
from pfxab_flower.algorithms.phased.pooling import holders, observed_mean, pooled_means, pooled_statistics
from pfxab_flower.algorithms.phased.server import ServerMachine
from pfxab_flower.algorithms.phased.settings import Settings
from pfxab_flower.algorithms.phased.state import FIRST_ACTIVE_SET, ROOT, ClientState, PhasePlan, ProtocolError

__all__ = [
    "FIRST_ACTIVE_SET", "ROOT", "ClientMachine", "ClientState", "ClientView", "PhasePlan", "Policy", "Proposal",
    "ProtocolError", "RoundEstimates", "ServerMachine", "Settings", "holders", "min_pulls", "observed_mean",
    "pooled_means", "pooled_statistics",
]
