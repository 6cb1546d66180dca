"""The algorithms: one :class:`~pfxab_flower.algorithms.phased.Policy` per file over a shared skeleton.

Ten are registered here (:mod:`.registry`, from which every list of algorithms is derived): seven
federated ones (pf-xab, fed-pne, pf-pne, pf-xab-adaptive, pf-sh, and the model-based pf-smbo and
optuna-tpe-fed: :mod:`.proposals`) and three baselines whose clients work alone (local-only,
random-search, optuna-tpe: :mod:`.solo`). optuna-tpe and optuna-tpe-fed need the optuna extra.
"""

from pfxab_flower.algorithms.fedpne import FedPNE
from pfxab_flower.algorithms.local_only import LocalOnly
from pfxab_flower.algorithms.optuna_tpe import OptunaTPE
from pfxab_flower.algorithms.optuna_tpe_fed import OptunaTPEFed
from pfxab_flower.algorithms.pf_sh import PFSH
from pfxab_flower.algorithms.pf_smbo import PFSMBO
from pfxab_flower.algorithms.pfpne import PFPNE
from pfxab_flower.algorithms.pfxab import PFXAB
from pfxab_flower.algorithms.pfxab_adaptive import PFXABAdaptive
from pfxab_flower.algorithms.phased import Policy
from pfxab_flower.algorithms.random_search import RandomSearch
from pfxab_flower.algorithms.registry import algorithm_names, make_policy, policy_class, register_algorithm
from pfxab_flower.algorithms.solo import SoloPolicy

for _policy in (PFXAB, FedPNE, PFPNE, LocalOnly, RandomSearch, PFXABAdaptive, PFSH, OptunaTPE, PFSMBO, OptunaTPEFed):
    register_algorithm(_policy)

__all__ = [
    "PFPNE",
    "PFSH",
    "PFSMBO",
    "PFXAB",
    "FedPNE",
    "LocalOnly",
    "OptunaTPE",
    "OptunaTPEFed",
    "PFXABAdaptive",
    "Policy",
    "RandomSearch",
    "SoloPolicy",
    "algorithm_names",
    "make_policy",
    "policy_class",
    "register_algorithm",
]
