"""``runner.py compare``: ``command`` (the command and its names), ``rows`` (a notebook's rows read back),
``pair`` (the rule, two runs), ``counted`` (the step's counts of two runs), ``page`` (its report), ``many``
(more than two runs)."""
