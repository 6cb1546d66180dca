"""Local-only: each client runs PF-XAB's phased elimination alone on its own objective (what federation buys).

Client ``m`` runs a one-client PF-XAB with ``alpha = 1`` on its local objective ``mu_m``
with its own seed (:func:`~pfxab_flower.algorithms.solo.solo_seed`): phase ``p`` pulls every
node of its active set ``ceil(f_1(p))`` times, ``f_1`` being the schedule of one client
(``M f(p)`` of an ``M``-client run, so a local mean is as precise as PF-XAB's pooled
estimate), and drops ``k`` if ``local_k + nu1 rho^h <= max_j local_j - 2 B_p``; then it
exploits its best node until ``T``. Nothing is averaged and no mean leaves the client.

Why not PF-XAB with ``alpha = 1`` inside the federation: that run still sends every local
mean to the server, and its phases are synchronised, each as long as the largest active
set of any client needs, so a client with fewer nodes exploits while it waits and fits
fewer phases than it would alone. Local-only is each client exactly as it would be alone.
Its regret is scored on the run's personalised objective ``alpha mu_m + (1 - alpha) mu``
like every algorithm's: a client alone cannot see the global term.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pfxab_flower.algorithms.messages import PhaseInstruction
from pfxab_flower.algorithms.pfxab import PFXAB
from pfxab_flower.algorithms.phased import ClientMachine, ServerMachine, Settings
from pfxab_flower.algorithms.solo import SoloPolicy, solo_seed

if TYPE_CHECKING:
    from pfxab_flower.sampling import Environment


class LocalOnly(SoloPolicy):
    name = "local-only"
    label = "Local-Only"
    description = ("baseline: each client runs PF-XAB's phased elimination alone on its local objective "
                   "(alpha=1, no communication)")

    def alone(self, settings: Settings, client: int, env: Environment) -> tuple[int, int]:
        """The one-client PF-XAB run of this client, to the horizon: ``(node it exploited, T)``."""
        policy = PFXAB()
        own = Settings(settings.spec.replace(algorithm=policy.name, num_clients=1, alpha=1.0, options={},
                                             seed=solo_seed(settings.seed, client)))
        server, machine = ServerMachine(policy, own), ClientMachine(policy, own, 0)
        while isinstance(instruction := server.next_instruction(), PhaseInstruction):
            update = server.aggregate([machine.explore(instruction, env)])
            server.collect([machine.eliminate(update, env)])
        return machine.finish(instruction, env).node_id, settings.horizon
