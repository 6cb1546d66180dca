"""The algorithms, one :class:`~pfxab_flower.algorithms.phased.Policy` per file, registered here (:mod:`.registry`).

By kind: :mod:`.elimination` (pf-xab, pf-xab-adaptive, fed-pne, pf-pne), :mod:`.halving` (pf-sh),
:mod:`.surrogate` (pf-smbo), :mod:`.baselines` (local-only, random-search, optuna-tpe, optuna-tpe-fed; the
optuna ones need the optuna extra). What several use lives at this level (:mod:`.splits`, :mod:`.schedule`,
:mod:`.messages`, :mod:`.run_spec`), never in one algorithm's module.
"""

from pfxab_flower.algorithms.baselines.local_only import LocalOnly
from pfxab_flower.algorithms.baselines.optuna_tpe import OptunaTPE
from pfxab_flower.algorithms.baselines.optuna_tpe_fed import OptunaTPEFed
from pfxab_flower.algorithms.baselines.random_search import RandomSearch
from pfxab_flower.algorithms.baselines.solo import SoloPolicy
from pfxab_flower.algorithms.elimination.fedpne import FedPNE
from pfxab_flower.algorithms.elimination.pfpne import PFPNE
from pfxab_flower.algorithms.elimination.pfxab import PFXAB
from pfxab_flower.algorithms.elimination.pfxab_adaptive import PFXABAdaptive
from pfxab_flower.algorithms.halving.pf_sh import PFSH
from pfxab_flower.algorithms.phased import Policy
from pfxab_flower.algorithms.registry import algorithm_names, make_policy, policy_class, register_algorithm
from pfxab_flower.algorithms.surrogate.pf_smbo import PFSMBO

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
