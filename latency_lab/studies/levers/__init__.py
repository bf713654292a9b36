"""Notebook 07: ``study`` (the configurations, their rounds and the combination), ``savings`` (what each saves
against the baseline, and the ranking), ``findings`` (the counterfactual and the sentences) and ``rows`` (its
tables' row types)."""
