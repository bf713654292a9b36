"""Notebook 05: ``study`` (the step and its parts, in the same rounds), ``rows`` (its tables' row types) and
``findings`` (the seed's hypotheses graded)."""
