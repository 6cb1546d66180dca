"""Landmine fields as real sites: a Flower app (docs/deployment.md, "Landmine sites")."""
