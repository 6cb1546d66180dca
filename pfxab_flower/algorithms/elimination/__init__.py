"""Phased elimination over the hierarchical partition (:mod:`pfxab_flower.algorithms.phased`): the paper's PF-XAB
(:mod:`.pfxab`), its adaptive variant (:mod:`.pfxab_adaptive`) and the paper's comparators Fed-PNE (:mod:`.fedpne`)
and PF-PNE (:mod:`.pfpne`)."""
