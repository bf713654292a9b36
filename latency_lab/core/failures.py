"""How a failure reads in a row: an exception as one short line (``describe``), and whether this process's
CUDA context still works (``cuda_context_error``, ``lost_context``): once a sticky CUDA error has poisoned
it, no executor can run in this process any more.
"""

from __future__ import annotations

import re

import torch

# Failures whose message says the cause only in Python's words: (pattern in the message, the cause said
# first). The original message follows it.
CAUSES = (
    (
        r"IntegerProxy",
        "Thunder traced a Python int as a symbolic value, and the model indexes a list with it",
    ),
    (
        r"unexpected keyword argument.*cache_position",
        "this transformers' forward refuses the seed's cache_positions (4.45 and older; -p cache_mode=none runs)",
    ),
)


def plain(message: str) -> str:
    """``message`` without Python's object reprs: ``<function A.f at 0x7f..>`` as ``A.f``, ``<class
    'a.b.C'>`` as ``C``."""
    message = re.sub(
        r"<(?:function|bound method|built-in function) ([\w.<>]+?)(?: of .+?)? at 0x[0-9a-f]+>", r"\1", message
    )
    return re.sub(r"<class '(?:[\w]+\.)*(\w+)'>", r"\1", message)


def describe(error: BaseException, limit: int = 400) -> str:
    """The exception on one line, cut at ``limit`` characters: where ``CAUSES`` knows it, its cause in
    the user's words first; then its type and message, Python's object reprs as plain names."""
    text = f"{type(error).__name__}: {plain(str(error))}".strip()
    cause = next((said for pattern, said in CAUSES if re.search(pattern, str(error))), None)
    text = f"{cause} ({text})" if cause else text
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
