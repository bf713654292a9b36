"""Notebook 03: ``study`` (the rows, key table and findings) and ``tables`` (the tables over the trace rows)."""
