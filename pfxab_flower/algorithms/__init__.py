"""The algorithms: one :class:`~pfxab_flower.algorithms.phased.Policy` per file over a shared skeleton.

Each is registered once (:mod:`.registry`); every list of algorithms is derived from there.
"""

from pfxab_flower.algorithms.fedpne import FedPNE
from pfxab_flower.algorithms.pfpne import PFPNE
from pfxab_flower.algorithms.pfxab import PFXAB
from pfxab_flower.algorithms.phased import Policy
from pfxab_flower.algorithms.registry import algorithm_names, make_policy, policy_class, register_algorithm

for _policy in (PFXAB, FedPNE, PFPNE):
    register_algorithm(_policy)

__all__ = ["PFPNE", "PFXAB", "FedPNE", "Policy", "algorithm_names", "make_policy", "policy_class",
           "register_algorithm"]
