"""The measurement harness every notebook that measures executors uses: build an executor and make
its first call (``prepare``), run a plan of measurements right after it (``build_and_measure``,
``standard_plan``), time everything that was built in the interleaved rounds beside the host reference
(``time_in_rounds``: ``rounds.rounds`` over ``entries``, then ``settled``), and free it again (``release``).
Each executor is one ``Measurement`` (module ``measurement``) from its build to its row.

The rounds' ``Entry``, ``Timed``, ``Rounds`` and ``rounds`` (module ``rounds``) and ``describe`` (module
``failures``) are imported here, and the studies use them under these names (``harness.Rounds``).
"""

from __future__ import annotations

import gc
from dataclasses import replace
from typing import Callable

import torch

from . import compile_cache, parameters, planted, timing
from .failures import describe, lost_context
from .measurement import Measurement
from .model import compare_to_eager, logits_of
from .phases import phase
from .progress import say
from .registry import Executor
from .rounds import Entry, Rounds, Timed, rounds


def set_threads(params) -> int:
    """torch's intra-op threads as ``params`` asks; returns the number in use. Alone where a process
    records the environment but compiles nothing (the runner, a fleet task)."""
    parameters.torch_default_threads()  # read torch's own default before changing it
    torch.set_num_threads(params.threads)
    return torch.get_num_threads()


def set_up(params) -> int:
    """This process as ``params`` asks, before anything is built or timed: ``set_threads`` and, on a
    CPU, Inductor's instruction-set checks shared by the run's kernels (``compile_cache.share_isa_checks``).
    Every study's ``run`` starts with it."""
    threads = set_threads(params)
    if params.device == "cpu":
        compile_cache.share_isa_checks()
    return threads


def prepare(executor: Executor, module, kwargs: dict, device: str) -> Measurement:
    """Build ``executor`` on ``module`` and make its first call (timed: tracing and compile
    included); an unavailable or failing executor comes back with its reason."""
    if problem := executor.check(device):
        status, reason = problem
        return Measurement(executor, status, reason=reason)
    if lost := lost_context(device):
        return Measurement(executor, "failed", reason=lost)
    notes: list[str] = []
    try:
        with phase("build"):
            fn, notes = executor.build(module)
            fn = planted.wrap(executor.name, fn)
            seconds, output = timing.first_call(fn, kwargs, device)
    except Exception as e:
        return Measurement(executor, "failed", reason=f"first call: {describe(e)}", notes=notes)
    return Measurement(executor, "ok", fn=fn, notes=notes, first_call_s=seconds, output=output)


def release(measured, device: str) -> dict:
    """Free executors (a ``Measurement``, or several): drop their callables and outputs, collect, and
    empty the CUDA allocator's cache, so the next reading of GPU memory starts from what is really
    held. Returns that reading (MiB allocated and reserved; empty on a CPU)."""
    for p in [measured] if isinstance(measured, Measurement) else list(measured):
        p.fn = p.output = None
    gc.collect()
    return memory(device, empty=True)


def memory(device: str, empty: bool = False) -> dict:
    """MiB allocated and reserved by the CUDA caching allocator (after emptying its cache when
    ``empty``); empty on a CPU."""
    if not device.startswith("cuda"):
        return {}
    if empty:
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
    return {
        "allocated_mib": torch.cuda.memory_allocated(device) / 2**20,
        "reserved_mib": torch.cuda.memory_reserved(device) / 2**20,
    }


def memory_held(before: dict, after: dict) -> dict:
    """What was built between two ``memory`` readings holds: MiB allocated and reserved after minus
    before. A reading that went down (something else was freed meanwhile, e.g. the cuBLAS workspaces
    torch.compile's CUDA graphs release) says nothing about the build: it is None, with the reason."""
    held, shrank = {}, []
    for name in ("allocated_mib", "reserved_mib"):
        if name in before and name in after:
            change = after[name] - before[name]
            held[name] = change if change >= 0 else None
            if change < 0:
                shrank.append(f"{name.removesuffix('_mib')} fell by {-change:.0f} MiB")
    if shrank:
        held["reason"] = f"memory not attributed: {', '.join(shrank)} during the build (something else was freed)"
    return held


def check_output(p: Measurement, eager_logits, dtype: str, layers: int) -> dict:
    """The first call's logits against eager's (``model.compare_to_eager``); a mismatch fails the row,
    since the timings of a wrong computation mean nothing."""
    check = compare_to_eager(logits_of(p.output), eager_logits, dtype, layers)
    if not check["passed"]:
        raise ValueError(
            f"logits differ from eager's: rel err {check['rel_err']} > {check['tolerance']} "
            f"{check.get('mismatch') or ''}".strip()
        )
    return check


# A plan: the measurements run on each executor right after its first call, in order, as
# {step name: callable(measurement) -> record}. A step that raises fails the executor's row.
Plan = dict[str, Callable[[Measurement], object]]


def build_and_measure(
    executors, module, kwargs: dict, plan: Plan, device: str, progress: Callable[[str], None] = say
) -> dict[str, Measurement]:
    """Build each executor and run ``plan`` on it before the next is built, so each is measured right
    after its own first call (its records in ``steps``) and a failure stays in its own row. A failure
    that poisons the CUDA context leaves the executors after it as rows that say so; nothing raises."""
    measured: dict[str, Measurement] = {}
    for ex in executors:
        progress(f"{ex.label}: building (first call: trace and compile) ...")
        p = measured[ex.name] = prepare(ex, module, kwargs, device)
        if p.ok:
            run_plan(p, plan)
        progress(
            f"{ex.label}: first call {p.first_call_s:.2f} s, {p.status}"
            if p.first_call_s is not None
            else f"{ex.label}: {p.status}: {p.reason}"
        )
    return measured


def run_plan(p: Measurement, plan: Plan) -> Measurement:
    """``plan``'s steps on ``p`` in order, right after its first call, each record in ``p.steps``; a step
    that raises an ``Exception`` fails ``p`` (its reason names the step) and ends the plan. Returns ``p``."""
    for step, measure in plan.items():
        try:
            p.steps[step] = measure(p)
        except Exception as e:  # one executor's failure is its row's reason
            p.fail(e, step)
            break
    return p


def standard_plan(
    kwargs: dict,
    params,
    eager_logits=None,
    timeit: Callable | None = None,
    trace: Callable | None = None,
    profile_steps: int | None = None,
    check: Callable | None = None,
) -> Plan:
    """The standard measurements right after a first call, in order: the output against eager's
    (first, before a later call can overwrite a CUDA graph's output), the Thunder trace row of a
    Thunder configuration when ``trace(measurement, kwargs)`` is given (``instruments.trace_row``, one
    more call), the warm-up (CUDA graphs record here, before the next executor is built), ``%timeit``
    when ``timeit(fn)`` is given, and kernels per step from the profiler. Wall and host time come
    later, from ``rounds``. The output check is ``check(measurement)`` when given, else the logits
    against ``eager_logits``."""
    steps = max(3, min(params.iters, 10)) if profile_steps is None else profile_steps
    plan: Plan = {"output": check or (lambda p: check_output(p, eager_logits, params.dtype, params.layers))}
    if trace is not None:
        plan["trace"] = lambda p: trace(p, kwargs) if p.executor.needs_thunder else None
    plan["warm-up"] = lambda p: timing.warm_up(p.fn, kwargs, params.warmup)
    if timeit is not None:
        plan["timeit"] = lambda p: timing.timeit_record(timeit(p.fn))
    plan["kernels"] = lambda p: timing.profile_kernels(p.fn, kwargs, params.device, steps)
    return plan


def entries(measured: dict[str, Measurement], kwargs: dict, probes: dict[str, dict] | None = None) -> list[Entry]:
    """The rounds' entries: every executor that is ok, under its key, with its probes (by key)."""
    return [Entry(n, p.fn, kwargs, (probes or {}).get(n, {})) for n, p in measured.items() if p.ok]


def settled(measured: dict[str, Measurement], timed: Rounds) -> dict[str, Measurement]:
    """The executors as the rounds left them, each with its blocks (``timed``, under its key in
    ``measured``): one whose blocks stopped part-way comes back ``partial`` (its blocks before the error
    stand), one with no block at all ``failed``, the reason saying where it stopped. Copies: ``measured``
    is left as it is."""
    return {key: settle(p, timed.entries.get(key)) for key, p in measured.items()}


def settle(p: Measurement, t: Timed | None) -> Measurement:
    """A copy of one executor with its blocks ``t`` (``settled``): ``partial`` or ``failed`` with the
    reason where its blocks stopped, else with its status as it was."""
    if not (t and t.error and p.ok):
        return replace(p, timed=t)
    return replace(
        p,
        timed=t,
        status="partial" if t.wall_ms else "failed",
        reason="; ".join(filter(None, (p.reason, f"rounds: {t.error}"))),
    )


def time_in_rounds(
    measured: dict[str, Measurement], kwargs: dict, params, probes: dict[str, dict] | None = None
) -> tuple[dict[str, Measurement], Rounds]:
    """Every executor of ``measured`` that is ok in the same rounds (``rounds`` over ``entries``, their
    blocks as ``params`` asks), and the executors as the rounds left them (``settled``)."""
    timed = rounds(entries(measured, kwargs, probes), params.device, params.warmup, params.iters, params.repeats)
    return settled(measured, timed), timed
