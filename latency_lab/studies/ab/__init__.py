"""Notebook 08: ``study`` (the session and run), ``remote`` (the workers from the coordinator's side), ``worker``
(each build's process), ``tables``, and ``rows``, their row types."""
