"""Benchmarks of the engines, Flower and the command line: ``python -m benchmarks`` (docs/performance.md)."""
