"""Policies over a finite set of candidate points every client shares (:mod:`.candidates`, their base):
successive halving, pf-sh (:mod:`.pf_sh`, its model of a run: :mod:`.pf_sh_model`)."""
