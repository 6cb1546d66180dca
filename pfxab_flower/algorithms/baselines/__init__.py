"""Baselines beside the federated algorithms: clients that work alone (:mod:`.solo`, their base: local-only,
random-search, optuna-tpe) and Optuna's TPE shared through the server (:mod:`.optuna_tpe_fed`)."""
