"""Phased elimination on a hierarchical partition: the skeleton of all three algorithms.

PF-XAB, Fed-PNE and PF-PNE share the same phases (depth ``h = p``), the same
schedule ``f(p)``, the same budget rule, the same messages and the same two
sub-phases of exploration followed by exploitation while waiting. They differ
only where the specification says so, which is what a :class:`Policy` holds:

* how often a node is pulled globally (every node of ``A(p)``) and locally
  (every node of the client's own ``A^m(p)``);
* whether the server eliminates nodes itself (Fed-PNE, PF-PNE);
* how a client ranks its nodes and which it keeps.

How wide each estimate's confidence interval is, and so how long a phase must be,
is the run's confidence bound (:mod:`pfxab_flower.algorithms.bounds`), used through
its interface only. :class:`ClientMachine` and :class:`ServerMachine` are pure and
deterministic given their inputs and the run's seed: every transport calls the same
methods in the same order, so every engine gives the same numbers for the same seed.

One job per module: :mod:`.settings` (what a run shares), :mod:`.policy` (where an
algorithm differs), :mod:`.state` (what the machines carry), :mod:`.client` and
:mod:`.server` (the two machines), :mod:`.checks` (the server's checks of every reply),
:mod:`.bounded` (a client's bounds on every server message, by the run it describes),
:mod:`.pooling` (per-node means over the clients' reports).
"""

from pfxab_flower.algorithms.bounds import ClientView
from pfxab_flower.algorithms.phased.client import ClientMachine, min_pulls
from pfxab_flower.algorithms.phased.policy import Policy
from pfxab_flower.algorithms.phased.pooling import holders, observed_mean, pooled_means, pooled_statistics
from pfxab_flower.algorithms.phased.server import ServerMachine
from pfxab_flower.algorithms.phased.settings import Settings
from pfxab_flower.algorithms.phased.state import FIRST_ACTIVE_SET, ROOT, ClientState, PhasePlan, ProtocolError

__all__ = [
    "FIRST_ACTIVE_SET", "ROOT", "ClientMachine", "ClientState", "ClientView", "PhasePlan", "Policy", "ProtocolError",
    "ServerMachine", "Settings", "holders", "min_pulls", "observed_mean", "pooled_means", "pooled_statistics",
]
