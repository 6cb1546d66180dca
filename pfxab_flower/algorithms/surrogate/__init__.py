"""What a proposal policy models the objective with: a Gaussian process (:mod:`.gp`) and its candidate points
(:mod:`.pool`)."""
