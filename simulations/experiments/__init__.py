"""Experiments: an experiment configuration (TOML grid) and its sweep, run resumably into verified tidy tables."""
