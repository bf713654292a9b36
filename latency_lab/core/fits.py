"""Sizes bounded by what the machine can hold: a run's parameters against the memory available now
(``check_fits``, with the models a notebook holds at once, ``catalog.Entry.models_held``), and 08's worker
processes, each its model and its process's own share (``check_workers_fit``)."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

from . import catalog
from .ab_parameters import usable_cores
from .input_errors import ParameterError
from .model_config import DTYPE_BYTES, FLOAT32_BYTES, config_dict, memory_needed, weight_count

if TYPE_CHECKING:
    from .parameters import Params

SIZE_PARAMS = ("layers", "depths", "batch_size", "seq_len", "prompt_lengths", "decode_tokens", "sizes")


def available_ram(meminfo: str = "/proc/meminfo") -> tuple[int, str]:
    """Bytes of host RAM a run can take now, and what they are: ``MemAvailable`` of ``meminfo`` (free
    memory and the caches the kernel can drop); all the RAM where there is no such line (not Linux)."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "RAM available"
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "RAM (its total: no MemAvailable here)"


def machine_memory(device: str) -> tuple[int, str]:
    """Bytes of memory the run's tensors can take now, and what they are: the GPU's free memory
    (``torch.cuda.mem_get_info``), or the host's available RAM (``available_ram``)."""
    if device.startswith("cuda"):
        import torch

        index = int(device[5:]) if ":" in device else 0
        return torch.cuda.mem_get_info(index)[0], f"GPU memory ({device}) available"
    return available_ram()


def _largest_point(p: Params, name: str) -> int:
    if name == "sizes":
        return max((int(s[:-1]) for s in p.sizes if s != "seed"), default=1)
    value = getattr(p, name)
    return max(value) if isinstance(value, tuple) else value


def _with_point(p: Params, name: str, n: int) -> Params:
    """``p`` with the largest point of parameter ``name`` set to ``n`` (the others do not count)."""
    value = (f"{n}x",) if name == "sizes" else (n,) if isinstance(getattr(p, name), tuple) else n
    return replace(p, **{name: value})


def check_fits(p: Params, given: dict, memory: tuple[int, str] | None = None, notebook: str | None = None) -> None:
    """ParameterError for the first size parameter (``SIZE_PARAMS``) whose value makes the run need
    more memory than is available (``model_config.memory_needed`` with the models ``notebook`` holds at once,
    ``catalog.Entry.models_held``, against ``memory``: bytes and what they are, by default
    ``machine_memory``), naming the largest value that fits with the other parameters as they are."""
    memory, kind = memory or machine_memory(p.device)
    models_held = catalog.entry(notebook).models_held

    def need_of(q: Params) -> int:
        return memory_needed(q, models_held(q))

    need = need_of(p)
    if need <= memory:
        return
    held = models_held(p)
    others = f", {len(held) + 1} models held at once" if held else ""
    for name in SIZE_PARAMS:
        lo, hi = 1, _largest_point(p, name)
        if need_of(_with_point(p, name, lo)) > memory:
            continue  # even its smallest value does not fit: another parameter is too large
        while lo < hi:  # the largest point that fits, by bisection (memory_needed grows with each)
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if need_of(_with_point(p, name, mid)) <= memory else (lo, mid - 1)
        what = (
            "'seed' or '<k>x' labels with k"
            if name == "sizes"
            else "integers"
            if isinstance(getattr(p, name), tuple)
            else "an integer"
        )
        raise ParameterError(
            name,
            given.get(name, getattr(p, name)),
            f"{what} up to {lo:,} on this machine: the run would need about {need / 2**30:.3g} GiB "
            f"(the model's build or its largest step{others}, with a margin; estimate), more than its "
            f"{memory / 2**30:.3g} GiB of {kind}",
        )
    name = next((n for n in SIZE_PARAMS if n in given), "preset")  # several too large at once
    raise ParameterError(
        name,
        given.get(name, getattr(p, name)),
        f"smaller sizes: as given, the run would need about {need / 2**30:.3g} GiB, more than this "
        f"machine's {memory / 2**30:.3g} GiB of {kind}, and no one of {', '.join(SIZE_PARAMS)} alone "
        f"brings it within",
    )


# What one worker process of 08 holds besides its weights once built (``worker_bytes``): the CUDA context, cuBLAS's
# and nvFuser's workspaces and kernels, or on a CPU torch and Thunder imported. Measured by tools/worker_memory.py
# on an H100 (seed, thunder, 2026-12-07, expandable segments, the caching allocator emptied after the build):
# 1,340 MiB per process as the driver counts it, 650 of them weights (2,300 without expandable segments); 0.8 GB
# of RSS per worker on the CPU machine (tiny).
PROCESS_BYTES = {"cuda": int(0.72 * 2**30), "cpu": int(0.8 * 2**30)}


def worker_bytes(p: Params) -> int:
    """Memory one built worker process of 08 holds: its weights in their dtype (the tied lm_head once) and
    ``PROCESS_BYTES``."""
    return weight_count(p.preset, p.layers) * DTYPE_BYTES[p.dtype] + PROCESS_BYTES["cuda" if p.is_cuda else "cpu"]


def build_extra_bytes(p: Params) -> int:
    """What a worker holds beyond ``worker_bytes`` while it builds: the untied lm_head and the largest weight
    drawn in float32 (``model_config.memory_needed``'s build; 1,470 MiB measured for the seed on an H100)."""
    c = config_dict(p.preset, p.layers)
    embedding = c["vocab_size"] * c["hidden_size"]
    largest = max(embedding, c["hidden_size"] * c["intermediate_size"])
    return embedding * DTYPE_BYTES[p.dtype] + (0 if p.dtype == "float32" else FLOAT32_BYTES * largest)


def builds_side_by_side(p: Params) -> int:
    """How many of 08's workers build at once: one per core (a build is CPU-bound), at most all of them."""
    return max(1, min(ab_processes(p), usable_cores()))


def builds_at_once(p: Params, memory: tuple[int, str] | None = None) -> int:
    """How many of 08's workers may build at once: ``builds_side_by_side``, fewer where the memory free now less
    what every built worker will hold cannot take that many builds' peaks (``build_extra_bytes``)."""
    free, _ = memory or machine_memory(p.device)
    room = (free - ab_processes(p) * worker_bytes(p)) // build_extra_bytes(p)
    return max(1, min(builds_side_by_side(p), int(room)))


def ab_processes(p: Params) -> int:
    """08's worker processes: ``workers`` per arm (``Params.arms``) and the calibration worker."""
    return p.workers * p.arms + 1


def ab_bytes(p: Params) -> int:
    """What 08's processes need at most: every worker built, and ``builds_side_by_side`` of them at a build's
    peak."""
    return ab_processes(p) * worker_bytes(p) + builds_side_by_side(p) * build_extra_bytes(p)


def workers_that_fit(p: Params, memory: tuple[int, str] | None = None) -> int:
    """The most slots of 08 (a worker of every arm on each) whose processes fit in the memory available."""
    memory, _ = memory or machine_memory(p.device)
    slots = p.workers
    while slots > 1 and ab_bytes(replace(p, workers=slots)) > memory:
        slots -= 1
    while ab_bytes(replace(p, workers=slots + 1)) <= memory and slots < 1000:
        slots += 1
    return slots


def check_workers_fit(p: Params, given: dict, memory: tuple[int, str] | None = None) -> None:
    """ParameterError naming ``workers`` (or the model's size) when 08's worker processes, each ``worker_bytes``,
    need more memory than is available, with the most slots that fit."""
    memory, kind = memory or machine_memory(p.device)
    each = worker_bytes(p)
    if ab_bytes(p) <= memory:
        return
    arms = p.arms
    fit = workers_that_fit(p, (memory, kind))
    if fit < 2:  # not even 2 slots: the model is too large; name the size that fits 2 slots
        share = memory // (2 * arms + 1) - PROCESS_BYTES["cuda" if p.is_cuda else "cpu"]
        check_fits(p, given, (int(share), kind))
    raise ParameterError(
        "workers",
        given.get("workers", p.workers),
        f"at most {fit} slots on this machine: {arms} arms on {p.workers} slots would hold about "
        f"{ab_bytes(p) / 2**30:.3g} GiB ({each / 2**30:.2g} GiB each built, estimate, and "
        f"{builds_side_by_side(p)} builds' peaks), more than its {memory / 2**30:.3g} GiB of {kind}; or fewer "
        "planted sizes",
    )
