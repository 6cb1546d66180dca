"""The algorithms: one :class:`~pfxab_flower.algorithms.phased.Policy` per file over a shared skeleton."""

from pfxab_flower.algorithms.fedpne import FedPNE
from pfxab_flower.algorithms.pfpne import PFPNE
from pfxab_flower.algorithms.pfxab import PFXAB
from pfxab_flower.algorithms.phased import Policy

POLICIES: dict[str, type[Policy]] = {cls.name: cls for cls in (PFXAB, FedPNE, PFPNE)}


def make_policy(name: str) -> Policy:
    """The policy of algorithm ``name`` (``pf-xab``, ``fed-pne`` or ``pf-pne``)."""
    return POLICIES[name]()


__all__ = ["PFPNE", "PFXAB", "POLICIES", "FedPNE", "Policy", "make_policy"]
