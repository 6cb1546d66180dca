"""Local-only: each client runs PF-XAB's phased elimination alone on its own objective (what federation buys).

Client ``m`` runs a one-client PF-XAB with ``alpha = 1`` and its own seed
(:func:`~pfxab_flower.algorithms.baselines.solo.solo_seed`); nothing leaves the client. Why not PF-XAB with
``alpha = 1``: docs/algorithms/local-only.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pfxab_flower.algorithms.baselines.solo import SoloPolicy, SoloRun, solo_seed
from pfxab_flower.algorithms.messages import PhaseInstruction
from pfxab_flower.algorithms.phased import ClientMachine, ServerMachine, Settings
from pfxab_flower.algorithms.registry import make_policy
from pfxab_flower.algorithms.run_spec import SpecT

if TYPE_CHECKING:
    from pfxab_flower.problems.sampling import Environment


#: The algorithm each client runs alone, looked up in the registry (no algorithm imports another's module).
ALONE = "pf-xab"


class LocalOnly(SoloPolicy):
    name = "local-only"
    label = "Local-Only"
    description = ("baseline: each client runs PF-XAB's phased elimination alone on its local objective "
                   "(alpha=1, no communication)")

    def smoothness_spec(self, spec: SpecT) -> SpecT:
        """Each client's own run: a one-client PF-XAB with ``alpha = 1`` (what ``nu1`` and ``rho`` shape)."""
        return spec.replace(algorithm=ALONE, num_clients=1, alpha=1.0, options={})

    def alone(self, settings: Settings, client: int, env: Environment) -> SoloRun:
        """The one-client PF-XAB run of this client, to the horizon: ``(node it exploited, T, its phases)``."""
        policy, own = make_policy(ALONE), self._one_client(settings, client)
        server, machine = ServerMachine(policy, own), ClientMachine(policy, own, 0)
        while isinstance(instruction := server.next_instruction(), PhaseInstruction):
            update = server.aggregate([machine.explore(instruction, env)])
            server.collect([machine.eliminate(update, env)])
        return SoloRun(machine.finish(instruction, env).node_id, settings.horizon, server.completed)

    def searches(self, settings: Settings) -> bool:
        """Whether the one-client PF-XAB runs a phase within the horizon (else it exploits the domain's centre)."""
        server = ServerMachine(make_policy(ALONE), self._one_client(settings, 0))
        return isinstance(server.next_instruction(), PhaseInstruction)

    def _one_client(self, settings: Settings, client: int) -> Settings:
        """The settings of client ``client``'s one-client PF-XAB (alpha 1, its own seed)."""
        return Settings(self.smoothness_spec(settings.spec).replace(seed=solo_seed(settings.seed, client)))
