"""Planted slowdowns: a pure-Python busy wait of a known number of µs added to a configuration's step
(``delayed``), or more elementwise ops inside the step itself (``with_ops``), each with its Python
dispatch, its launch and its kernel, traced and compiled with the rest: a regression of the kind a real
change makes.

``LATENCY_LAB_PLANTED="thunder=12.5"`` (``NAME=US``, comma-separated) slows every call of that executor's
step by that much host time, wherever a run builds it: a change of known size, which ``compare`` must
call (the positive controls of ``tools/run_pairs.py``). A run records it in its environment.
"""

from __future__ import annotations

import os
import time

VARIABLE = "LATENCY_LAB_PLANTED"


def delayed(fn, delay_us: float):
    """``fn`` behind a pure-Python busy wait of ``delay_us`` µs per call (host time, no GPU work)."""
    delay_s = delay_us / 1e6

    def step(**kwargs):
        until = time.perf_counter() + delay_s
        while time.perf_counter() < until:
            pass
        return fn(**kwargs)

    return step


def parse(text: str) -> dict[str, float]:
    """``"thunder=12.5,eager=3"`` -> ``{"thunder": 12.5, "eager": 3.0}``; a ``ValueError`` naming the
    variable and the form otherwise."""
    from .registry import REGISTRY

    out: dict[str, float] = {}
    for item in filter(None, (i.strip() for i in text.split(","))):
        name, _, us = item.partition("=")
        try:
            value = float(us)
        except ValueError:
            value = float("nan")
        if name.strip() not in REGISTRY or not 0 < value <= 1e6:
            raise ValueError(
                f"invalid {VARIABLE}={text!r}: allowed NAME=US[,NAME=US], NAME an executor "
                f"({', '.join(REGISTRY)}) and US a delay in µs in (0, 1e6]"
            )
        out[name.strip()] = value
    return out


def here() -> dict[str, float]:
    """The delays this process plants (``VARIABLE``), by executor; {} without it."""
    return parse(os.environ.get(VARIABLE, ""))


def wrap(name: str, fn):
    """``fn`` behind its planted delay when ``VARIABLE`` names executor ``name``, else ``fn``."""
    delay = here().get(name)
    return delayed(fn, delay) if delay else fn


def with_ops(model, ops: int):
    """``model`` whose forward first multiplies its ``attention_mask`` by 1, ``ops`` times: the same output,
    ``ops`` more elementwise ops inside whatever traces or compiles the step (Thunder may fuse them)."""
    import torch

    class WithOps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, attention_mask, **kwargs):
            for _ in range(ops):
                attention_mask = attention_mask * 1
            return self.inner(attention_mask=attention_mask, **kwargs)

    return WithOps()
