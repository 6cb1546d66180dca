"""PF-XAB (the paper's Algorithms 1-2): personalised federated X-armed bandit.

Each client optimises ``alpha mu_m + (1 - alpha) mu``: it pulls the union of active sets for the
global mean and its own set for its local mean, and eliminates on the personalised estimate; the
server only unions active sets and averages means (:mod:`.personalised`). Details: docs/algorithms/pf-xab.md.
"""

from __future__ import annotations

from pfxab_flower.algorithms.elimination.personalised import PersonalisedElimination


class PFXAB(PersonalisedElimination):
    name = "pf-xab"
    label = "PF-XAB"
    description = ("PF-XAB (Arabzadeh, Grant, Leslie, TMLR 2024): each client optimises "
                   "alpha*local + (1-alpha)*global")
