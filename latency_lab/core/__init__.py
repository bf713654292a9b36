"""Measurement primitives: parameters, the model, executors, the one timer, the harness and sweeps, and the
vocabulary and files results are recorded in. Reading a config or validating parameters imports no torch."""
