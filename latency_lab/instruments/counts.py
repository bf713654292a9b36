"""The step's work counted, not timed: exact counts that do not move with the machine's state.

``count_step`` runs one step uncounted, then counts steps n and n + 1 apart, in a pass of its own (never
inside a timed block), and returns ``Counts``: per counter its value per step and whether the two steps agree.

- Python: function starts per code object (``file:qualname``), calls into C, and optionally bytecode
  instructions, with ``sys.monitoring`` (Python 3.12+) or ``sys.setprofile`` (3.11: starts and C calls, no
  instructions); the net change of the interpreter's allocated memory blocks (``sys.getallocatedblocks``);
- CUDA: the caching allocator's allocations and bytes (``torch.cuda.memory_stats``), and from the profiler the
  kernels launched and the CUDA runtime calls (``cudaLaunchKernel``, ``cudaMemcpyAsync``, ...).

A counter that cannot be read here (no GPU; instructions on 3.11) is ``unavailable`` with its reason.
``difference`` sets two ``Counts`` side by side: each counter's change, and the functions whose starts changed,
largest first.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from typing import Callable

from ..core.run_to_run import count_move, per_step

TOOL_ID = 4  # sys.monitoring's tool slot for this instrument (0-5; 0-2 and 5 are named for debuggers/profilers)
PYTHON = ("python_function_starts", "python_c_calls")
COLUMNS = (*PYTHON, "kernel_launches", "cuda_runtime_calls", "device_allocations")  # ``table``'s, per step
# the counters a count verdict reads: exact and the same from step to step (the net blocks are neither)
JUDGED = (*PYTHON, "python_instructions", "kernel_launches", "cuda_runtime_calls", "device_allocations")
TOP = 15  # functions kept per count (most starts first)


@dataclass
class Counts:
    """One executor's counts per step: ``counters`` (name -> count of step n), the counters whose step n + 1
    differed (``unsteady``: name -> [step n, step n + 1]), the function starts per code object (``functions``,
    the ``TOP`` most, and all of them in ``all_functions``), what could not be counted and why
    (``unavailable``), and how (``method``)."""

    counters: dict[str, float] = field(default_factory=dict)
    unsteady: dict[str, list[float]] = field(default_factory=dict)
    functions: dict[str, int] = field(default_factory=dict)
    all_functions: dict[str, int] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    method: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict:
        """Every field, as a results file or a worker's answer holds it."""
        return asdict(self)

    @classmethod
    def from_dict(cls, record: dict) -> Counts:
        """A record ``to_dict`` wrote, read back; one written before every function was kept has no
        ``all_functions`` (so no function's change can be told)."""
        return cls(**{f.name: record[f.name] for f in fields(cls) if f.name in record})


def where(code) -> str:
    """A code object as ``file:qualname``, the file relative to its package's folder where it lies in one
    (``thunder/executors/nvfuserex_impl.py:FusionDefinitionWrapper.__call__``)."""
    path = code.co_filename
    for root in sorted((p for p in sys.path if p and path.startswith(p)), key=len, reverse=True):
        path = os.path.relpath(path, root)
        break
    return f"{path}:{getattr(code, 'co_qualname', code.co_name)}"


class _Monitor:
    """Python function starts per code object and calls into C during ``with``: ``sys.monitoring`` where the
    interpreter has it, else ``sys.setprofile``."""

    def __init__(self, instructions: bool = False):
        self.starts: Counter = Counter()
        self.c_calls = 0
        self.instructions = 0
        self.count_instructions = instructions and hasattr(sys, "monitoring")

    @property
    def method(self) -> str:
        return "sys.monitoring" if hasattr(sys, "monitoring") else "sys.setprofile"

    def __enter__(self) -> _Monitor:
        if hasattr(sys, "monitoring") and sys.monitoring.get_tool(TOOL_ID) is not None:
            raise RuntimeError(f"sys.monitoring's tool {TOOL_ID} is taken by {sys.monitoring.get_tool(TOOL_ID)}")
        if hasattr(sys, "monitoring"):
            m = sys.monitoring
            m.use_tool_id(TOOL_ID, "latency-lab counts")
            events = m.events.PY_START | m.events.CALL | (m.events.INSTRUCTION if self.count_instructions else 0)
            m.register_callback(TOOL_ID, m.events.PY_START, self._start)
            m.register_callback(TOOL_ID, m.events.CALL, self._call)
            if self.count_instructions:
                m.register_callback(TOOL_ID, m.events.INSTRUCTION, self._instruction)
            m.set_events(TOOL_ID, events)
        else:
            sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc) -> None:
        if hasattr(sys, "monitoring"):
            m = sys.monitoring
            m.set_events(TOOL_ID, 0)
            for event in (m.events.PY_START, m.events.CALL, m.events.INSTRUCTION):
                m.register_callback(TOOL_ID, event, None)
            m.free_tool_id(TOOL_ID)
        else:
            sys.setprofile(None)

    def _start(self, code, offset) -> None:
        self.starts[code] += 1

    def _call(self, code, offset, callable_, arg0) -> None:
        if not hasattr(callable_, "__code__"):  # a builtin, a method of a C type, a C extension's function
            self.c_calls += 1

    def _instruction(self, code, offset) -> None:
        self.instructions += 1

    def _profile(self, frame, event, arg) -> None:
        if event == "call":
            self.starts[frame.f_code] += 1
        elif event == "c_call":
            self.c_calls += 1


def _one_step(call: Callable[[], object], device: str, instructions: bool) -> tuple[dict, Counter, dict, str]:
    """One step's counters, its starts per code object, what was unavailable, and the Python method."""
    import torch

    cuda = device.startswith("cuda")
    out, unavailable = {}, {}
    before_mem = torch.cuda.memory_stats(device) if cuda else None
    blocks = sys.getallocatedblocks()
    with _Monitor(instructions) as mon:
        call()
    out["python_net_blocks"] = sys.getallocatedblocks() - blocks
    out["python_function_starts"] = sum(mon.starts.values())
    out["python_c_calls"] = mon.c_calls
    if instructions:
        if mon.count_instructions:
            out["python_instructions"] = mon.instructions
        else:
            here = sys.version.split()[0]
            unavailable["python_instructions"] = f"needs sys.monitoring (Python 3.12+), this is {here}"
    if cuda:
        torch.cuda.synchronize(device)
        after = torch.cuda.memory_stats(device)
        out["device_allocations"] = after["allocation.all.allocated"] - before_mem["allocation.all.allocated"]
        out["device_bytes_allocated"] = (
            after["allocated_bytes.all.allocated"] - before_mem["allocated_bytes.all.allocated"]
        )
    else:
        for name in ("device_allocations", "device_bytes_allocated"):
            unavailable[name] = "no CUDA device: the caching allocator counts nothing on a CPU"
    return out, mon.starts, unavailable, mon.method


def _profiled_step(call: Callable[[], object], device: str) -> tuple[dict, dict]:
    """Kernels launched and CUDA runtime calls in one step (the profiler), or why not."""
    if not device.startswith("cuda"):
        why = "no CUDA device: no kernels or runtime calls on a CPU"
        return {}, {"kernel_launches": why, "cuda_runtime_calls": why}
    import torch
    from torch.profiler import ProfilerActivity, profile

    from ..core.timing import device_event_kind

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize(device)
    events = prof.key_averages()
    kernels = sum(e.count for e in events if device_event_kind(e) == "kernel")
    runtime = sum(e.count for e in events if e.key.startswith("cuda") and device_event_kind(e) is None)
    return {"kernel_launches": kernels, "cuda_runtime_calls": runtime}, {}


def count_step(fn: Callable, kwargs: dict, device: str, instructions: bool = False) -> Counts:
    """Exact counts of one steady-state step of ``fn(**kwargs)`` (module docstring): one step uncounted, then
    steps n and n + 1 counted apart; a counter whose two steps differ is named in ``unsteady``. A count that
    fails is ``unavailable`` with its error: it never fails the step's row."""
    try:
        return _count_step(fn, kwargs, device, instructions)
    except Exception as e:  # the instrument's own failure (a monitoring slot taken, the profiler): a finding
        return Counts(unavailable={"counts": f"{type(e).__name__}: {e}"[:300]})


def _count_step(fn: Callable, kwargs: dict, device: str, instructions: bool) -> Counts:
    import time

    t0 = time.perf_counter()
    fn(**kwargs)
    steps = [_one_step(lambda: fn(**kwargs), device, instructions) for _ in range(2)]
    profiled = [_profiled_step(lambda: fn(**kwargs), device) for _ in range(2)]
    (first, starts, unavailable, method), (second, *_) = steps
    first.update(profiled[0][0])
    second.update(profiled[1][0])
    unavailable.update(profiled[0][1])
    named = Counter({where(code): n for code, n in starts.items()})
    return Counts(
        counters=first,
        unsteady={k: [v, second.get(k)] for k, v in first.items() if second.get(k) != v},
        functions=dict(named.most_common(TOP)),
        all_functions=dict(named),
        unavailable=unavailable,
        method=method + (" and torch.profiler" if device.startswith("cuda") else ""),
        seconds=time.perf_counter() - t0,
    )


def difference(a: Counts, b: Counts, top: int = TOP) -> dict:
    """B - A per counter (both counted), and the functions whose starts per step changed, largest change first
    (``file:qualname``: B - A)."""
    counters = {
        k: {"a": a.counters[k], "b": b.counters[k], "change": b.counters[k] - a.counters[k]}
        for k in a.counters
        if k in b.counters
    }
    changed = Counter(b.all_functions)
    changed.subtract(a.all_functions)
    moved = sorted(((k, v) for k, v in changed.items() if v), key=lambda kv: (-abs(kv[1]), kv[0]))
    return {"counters": counters, "functions": dict(moved[:top]), "functions_changed": len(moved)}


def function_lines(functions: dict[str, int]) -> list[str]:
    """Functions whose starts per step changed (``difference``'s), in their order, as
    ``thunder/executors/nvfuserex_impl.py:FusionDefinitionWrapper.__call__: +1 per step``."""
    return [f"{k}: {per_step(v)}" for k, v in functions.items()]


def text(diff: dict) -> str:
    """One line for a count difference: ``counts changed: python function starts +412 per step (+3.1% of A);
    ...`` or ``counts: same``, naming the functions whose starts changed, largest first."""
    moved = [
        f"{k.replace('_', ' ')} {count_move(v['a'], v['b'])}"
        for k, v in diff["counters"].items()
        if v["change"] and k in JUDGED
    ]
    if not moved:
        return "counts: same (Python function starts and C calls, kernels, runtime calls, device allocations)"
    functions = "; ".join(function_lines(diff["functions"])[:5])
    return "counts changed: " + "; ".join(moved) + (f". Functions: {functions}" if functions else "")


def table(per_executor: dict[str, dict]) -> list[dict]:
    """One row per executor from its ``Counts.to_dict()``: each counter per step (those that agreed in both
    counted steps), the counters that did not, and what was unavailable."""
    rows = []
    for name, c in per_executor.items():
        counted = {k: v for k, v in c.get("counters", {}).items() if k not in c.get("unsteady", {})}
        rows.append(
            {
                "executor": name,
                **{f"{k}_per_step": counted.get(k) for k in COLUMNS},
                "differ_between_steps": ", ".join(c.get("unsteady", {})) or None,
                "unavailable": "; ".join(sorted(set(c.get("unavailable", {}).values()))) or None,
            }
        )
    return rows


def top_functions(per_executor: dict[str, dict], n: int = 5) -> list[dict]:
    """Each executor's ``n`` functions with the most starts per step (``file:qualname``)."""
    return [
        {"executor": name, "function": f, "starts_per_step": k}
        for name, c in per_executor.items()
        for f, k in list(c.get("functions", {}).items())[:n]
    ]
