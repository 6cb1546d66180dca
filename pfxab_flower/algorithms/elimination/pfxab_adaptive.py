"""PF-XAB-Adaptive: PF-XAB with the cheapest pull split that keeps its widths, and a phase only when it pays.

Each phase uses the global/local split with the fewest pulls per client whose personalised estimate
is worth PF-XAB's (:func:`cheapest_split`), and starts only if the regret bound says it pays
(:func:`worth_a_phase`); all else is PF-XAB's (:mod:`.personalised`). Derivation: docs/algorithms/pf-xab-adaptive.md.
"""

from __future__ import annotations

import math

from pfxab_flower.algorithms.elimination.personalised import PersonalisedElimination
from pfxab_flower.algorithms.phased import Settings
from pfxab_flower.algorithms.splits import cheapest_split


def worth_a_phase(rho: float) -> float:
    """The largest share of the remaining pulls a further phase may take: ``3 (1 - rho) / (7 - 3 rho)``.

    After phase ``p`` (depth ``h``, ``B_p = nu1 rho^h``), on the event that every estimate is
    within its width, PF-XAB's rule keeps only nodes whose centre is within
    ``4 B_p + 2 nu1 rho^h = 6 nu1 rho^h`` of the optimum, so their children (the next phase's
    nodes) within ``7 nu1 rho^h``; the best estimate's node is within ``2 B_p + nu1 rho^h =
    3 nu1 rho^h``. With ``R`` pulls left, exploiting now costs at most ``3 nu1 rho^h R``; a
    phase of ``L`` pulls then exploiting costs at most ``7 nu1 rho^h L + 3 nu1 rho^(h+1) (R - L)``.
    The second bound is the smaller exactly when ``L <= 3 (1 - rho) / (7 - 3 rho) R``
    (0.27 R at ``rho = 0.5``). The paper starts every phase that fits (``L <= R``).
    """
    return 3.0 * (1.0 - rho) / (7.0 - 3.0 * rho)


def whole(pulls: float, f: float) -> int:
    """``pulls`` rounded up; a share below 1e-9 of ``f`` is the root's rounding error, not a pull to make."""
    return math.ceil(pulls) if pulls > 1e-9 * f else 0


class PFXABAdaptive(PersonalisedElimination):
    name = "pf-xab-adaptive"
    label = "PF-XAB-Adaptive"
    description = ("PF-XAB with the cheapest local/global pull split that keeps its widths, and a phase "
                   "started only when its regret bound says it pays")

    def pulls(self, settings: Settings, f: float) -> tuple[int, int]:
        """The split when every client's own set is the union (``r = 1``)."""
        return self.phase_pulls(settings, f, 1, 1)

    def phase_fits(self, settings: Settings, length: int, remaining: int) -> bool:
        """Start the phase only if the regret bound with it is below the bound without it (:func:`worth_a_phase`)."""
        return length <= worth_a_phase(settings.schedule.rho) * remaining

    def phase_pulls(self, settings: Settings, f: float, union_size: int, own_size: int) -> tuple[int, int]:
        ratio = union_size / own_size if own_size > 0 else 1.0
        global_pulls, local_pulls = cheapest_split(settings.alpha, settings.num_clients, f, max(ratio, 1.0))
        return whole(global_pulls, f), whole(local_pulls, f)
