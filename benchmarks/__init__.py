"""Benchmarks, each a module run from the repository root with `python -m benchmarks.NAME` (benchmarks/README.md)."""
