"""How a failure reads in a row: an exception as one short line (``describe``), and whether this process's
CUDA context still works (``cuda_context_error``, ``lost_context``): once a sticky CUDA error has poisoned
it, no executor can run in this process any more.
"""

from __future__ import annotations

import torch


def describe(error: BaseException, limit: int = 400) -> str:
    """The exception's type and message on one line, cut at ``limit`` characters."""
    text = f"{type(error).__name__}: {error}".strip()
    return text if len(text) <= limit else text[:limit] + " ..."


def cuda_context_error(device: str) -> str | None:
    """None while the device works; the error once a sticky CUDA error (an illegal memory access,
    say) has poisoned this process's context, after which no executor can run in it."""
    if not device.startswith("cuda"):
        return None
    try:
        torch.cuda.synchronize(device)
        return None
    except Exception as e:
        return describe(e, 200)


def lost_context(device: str) -> str | None:
    """The reason every later row gives once the CUDA context is lost, else None."""
    error = cuda_context_error(device)
    return error and f"not run: the CUDA context was lost earlier ({error})"
