"""The strategy class of every algorithm the package registers, on both Flower APIs: ``class PFXAB`` & co.

Generated from the algorithm registry by ``python -m pfxab_flower.strategies.generate``: do not edit; run it after
registering, renaming or re-describing an algorithm (a test fails until then). Each class fixes ``algorithm``
only: the round loop is its base's (:mod:`.message`, :mod:`.legacy`), the algorithm its registered policy's.
"""

from __future__ import annotations

from pfxab_flower.strategies.legacy import LegacyPhasedEliminationStrategy
from pfxab_flower.strategies.message import PhasedEliminationStrategy


class PFXAB(PhasedEliminationStrategy):
    """PF-XAB (Arabzadeh, Grant, Leslie, TMLR 2024): each client optimises alpha*local + (1-alpha)*global.

    The Message API's strategy of ``pf-xab``.
    """

    algorithm = "pf-xab"


class PFXABStrategy(LegacyPhasedEliminationStrategy):
    """PF-XAB (Arabzadeh, Grant, Leslie, TMLR 2024): each client optimises alpha*local + (1-alpha)*global.

    The legacy API's strategy of ``pf-xab``.
    """

    algorithm = "pf-xab"


class FedPNE(PhasedEliminationStrategy):
    """Fed-PNE (Li et al., AAAI 2024): federated phased node elimination on the global objective.

    The Message API's strategy of ``fed-pne``.
    """

    algorithm = "fed-pne"


class FedPNEStrategy(LegacyPhasedEliminationStrategy):
    """Fed-PNE (Li et al., AAAI 2024): federated phased node elimination on the global objective.

    The legacy API's strategy of ``fed-pne``.
    """

    algorithm = "fed-pne"


class PFPNE(PhasedEliminationStrategy):
    """PF-PNE (Li et al., AISTATS 2024): personalised phased node elimination, heterogeneity slack pf_pne_eps.

    The Message API's strategy of ``pf-pne``.
    """

    algorithm = "pf-pne"


class PFPNEStrategy(LegacyPhasedEliminationStrategy):
    """PF-PNE (Li et al., AISTATS 2024): personalised phased node elimination, heterogeneity slack pf_pne_eps.

    The legacy API's strategy of ``pf-pne``.
    """

    algorithm = "pf-pne"


class LocalOnly(PhasedEliminationStrategy):
    """baseline: each client runs PF-XAB's phased elimination alone on its local objective (alpha=1, no
    communication).

    The Message API's strategy of ``local-only``.
    """

    algorithm = "local-only"


class LocalOnlyStrategy(LegacyPhasedEliminationStrategy):
    """baseline: each client runs PF-XAB's phased elimination alone on its local objective (alpha=1, no
    communication).

    The legacy API's strategy of ``local-only``.
    """

    algorithm = "local-only"


class RandomSearch(PhasedEliminationStrategy):
    """baseline: each client pulls random_fraction of its horizon at uniformly random points (once each), then
    exploits the best observed.

    The Message API's strategy of ``random-search``.
    """

    algorithm = "random-search"


class RandomSearchStrategy(LegacyPhasedEliminationStrategy):
    """baseline: each client pulls random_fraction of its horizon at uniformly random points (once each), then
    exploits the best observed.

    The legacy API's strategy of ``random-search``.
    """

    algorithm = "random-search"


class PFXABAdaptive(PhasedEliminationStrategy):
    """PF-XAB with the cheapest local/global pull split that keeps its widths, and a phase started only when its
    regret bound says it pays.

    The Message API's strategy of ``pf-xab-adaptive``.
    """

    algorithm = "pf-xab-adaptive"


class PFXABAdaptiveStrategy(LegacyPhasedEliminationStrategy):
    """PF-XAB with the cheapest local/global pull split that keeps its widths, and a phase started only when its
    regret bound says it pays.

    The legacy API's strategy of ``pf-xab-adaptive``.
    """

    algorithm = "pf-xab-adaptive"


class PFSH(PhasedEliminationStrategy):
    """personalised successive halving: shared random candidates, halved each round on alpha*local +
    (1-alpha)*global.

    The Message API's strategy of ``pf-sh``.
    """

    algorithm = "pf-sh"


class PFSHStrategy(LegacyPhasedEliminationStrategy):
    """personalised successive halving: shared random candidates, halved each round on alpha*local +
    (1-alpha)*global.

    The legacy API's strategy of ``pf-sh``.
    """

    algorithm = "pf-sh"


class OptunaTPE(PhasedEliminationStrategy):
    """baseline: each site runs its own Optuna TPE study (one evaluation per trial) for tpe_trials of its horizon,
    then exploits its best observed point (needs the optuna extra).

    The Message API's strategy of ``optuna-tpe``.
    """

    algorithm = "optuna-tpe"


class OptunaTPEStrategy(LegacyPhasedEliminationStrategy):
    """baseline: each site runs its own Optuna TPE study (one evaluation per trial) for tpe_trials of its horizon,
    then exploits its best observed point (needs the optuna extra).

    The legacy API's strategy of ``optuna-tpe``.
    """

    algorithm = "optuna-tpe"


class PFSMBO(PhasedEliminationStrategy):
    """personalised federated model-based optimisation: a Gaussian process per client on the personalised estimates,
    Thompson-sampled proposals, then the posterior's best point.

    The Message API's strategy of ``pf-smbo``.
    """

    algorithm = "pf-smbo"


class PFSMBOStrategy(LegacyPhasedEliminationStrategy):
    """personalised federated model-based optimisation: a Gaussian process per client on the personalised estimates,
    Thompson-sampled proposals, then the posterior's best point.

    The legacy API's strategy of ``pf-smbo``.
    """

    algorithm = "pf-smbo"


class OptunaTPEFed(PhasedEliminationStrategy):
    """baseline (optuna extra): federated personalised TPE, every site pulls every site's proposal; study m is told
    alpha*y_m + (1-alpha)*mean_j y_j.

    The Message API's strategy of ``optuna-tpe-fed``.
    """

    algorithm = "optuna-tpe-fed"


class OptunaTPEFedStrategy(LegacyPhasedEliminationStrategy):
    """baseline (optuna extra): federated personalised TPE, every site pulls every site's proposal; study m is told
    alpha*y_m + (1-alpha)*mean_j y_j.

    The legacy API's strategy of ``optuna-tpe-fed``.
    """

    algorithm = "optuna-tpe-fed"

#: The Message API's strategy class of each algorithm above, by name.
MESSAGE_API: dict[str, type[PhasedEliminationStrategy]] = {
    "pf-xab": PFXAB,
    "fed-pne": FedPNE,
    "pf-pne": PFPNE,
    "local-only": LocalOnly,
    "random-search": RandomSearch,
    "pf-xab-adaptive": PFXABAdaptive,
    "pf-sh": PFSH,
    "optuna-tpe": OptunaTPE,
    "pf-smbo": PFSMBO,
    "optuna-tpe-fed": OptunaTPEFed,
}

#: The legacy API's strategy class of each algorithm above, by name.
LEGACY_API: dict[str, type[LegacyPhasedEliminationStrategy]] = {
    "pf-xab": PFXABStrategy,
    "fed-pne": FedPNEStrategy,
    "pf-pne": PFPNEStrategy,
    "local-only": LocalOnlyStrategy,
    "random-search": RandomSearchStrategy,
    "pf-xab-adaptive": PFXABAdaptiveStrategy,
    "pf-sh": PFSHStrategy,
    "optuna-tpe": OptunaTPEStrategy,
    "pf-smbo": PFSMBOStrategy,
    "optuna-tpe-fed": OptunaTPEFedStrategy,
}
