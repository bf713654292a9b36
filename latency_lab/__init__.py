"""latency-lab: core (measurement primitives), pages (tables, HTML), studies (one per notebook), run (the batch
run, report, compare) and explorer (notebook 00); each folder imports only those before it in this list."""
