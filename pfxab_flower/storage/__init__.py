"""Storing results: output paths checked before work, atomic writes, ownership manifests, the evaluation cache."""
