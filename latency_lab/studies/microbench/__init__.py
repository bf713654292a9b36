"""Notebook 04: ``study`` (the grid of ops, sizes and executors in the same rounds) and ``ops`` (the ops and
their inputs)."""
