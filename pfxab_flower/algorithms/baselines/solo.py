"""Baselines whose clients work alone (:class:`SoloPolicy`): what a federated algorithm is measured against.

The run is the final exchange only, in which each client spends its whole horizon by itself and
reports the node it exploits; so the baselines go through the same driver, sessions and transports
as every algorithm. Each client's randomness comes from the run's seed and its index (:func:`solo_seed`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, NamedTuple

import numpy as np

from pfxab_flower.algorithms.phased import Policy, Settings

if TYPE_CHECKING:
    from pfxab_flower.algorithms.phased import ClientView
    from pfxab_flower.problems.sampling import Environment


def solo_seed(seed: int, client: int) -> int:
    """The seed client ``client`` of a run with ``seed`` searches with: its own stream, in ``[0, 2**63)``.

    A one-client run of the same search with this seed makes exactly the same pulls
    (``tests/test_baselines.py``), which is what "the client alone" means. It is internal,
    never a user's seed (those are below ``2**32``: :data:`pfxab_flower.limits.MAX_SEED`), and
    set on the spec as is, so every baseline keeps the numbers it always had.
    """
    state = np.random.SeedSequence([seed, client]).generate_state(1, dtype=np.uint64)[0]
    return int(state >> np.uint64(1))


class SoloRun(NamedTuple):
    """What a solo client's own search did: the node it exploits, the pulls it made, and the phases it ran alone."""

    node: int
    pulls: int
    phases: int = 0


class SoloPolicy(Policy):
    """A baseline's policy: no phases, no messages but the final one; :meth:`alone` is the client's search."""

    solo: ClassVar[bool] = True

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        """No federated phase (the server never asks: :attr:`solo`)."""
        return 0, 0

    def score(self, settings: Settings, view: ClientView) -> np.ndarray:
        raise NotImplementedError(f"{self.name} runs no federated phase")

    def keep(self, settings: Settings, view: ClientView) -> np.ndarray:
        raise NotImplementedError(f"{self.name} runs no federated phase")

    def alone(self, settings: Settings, client: int, env: Environment) -> SoloRun:
        raise NotImplementedError

    def searches(self, settings: Settings) -> bool:
        """Whether a client's search pulls anything but its first point, the domain's centre, within the horizon
        (a baseline that always draws points: yes)."""
        return True
