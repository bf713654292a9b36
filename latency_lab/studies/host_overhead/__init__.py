"""Notebook 05: ``study`` (the step and its parts, in the same rounds) and ``findings`` (the seed's hypotheses
graded)."""
