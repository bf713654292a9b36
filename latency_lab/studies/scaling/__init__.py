"""Notebook 06: ``study`` (the sweeps in the same rounds), ``decode`` (the decode step), ``fits`` (lines and
their standard errors), ``rows`` (the depth fits' row type), ``findings``."""
