"""Model-based proposal policies: their base (:mod:`.proposals`: after each phase a client proposes new points),
pf-smbo (:mod:`.pf_smbo`), and what it models the objective with: a Gaussian process (:mod:`.gp`) and its
candidate points (:mod:`.pool`)."""
