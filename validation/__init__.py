"""Validation: scripts that check brrrtui against ground truth, and `python -m validation.run`, their device runner."""
