"""Notebook 04: ``study`` (the grid of ops, sizes and executors in the same rounds), ``ops`` (the ops and
their inputs) and ``rows`` (the table of shapes per size)."""
