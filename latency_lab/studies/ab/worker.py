"""One build's worker for notebook 08: runs in the build's own interpreter, started and driven by
``study`` over an execnet channel (execnet sends its own bootstrap, so the build's environment
needs none of it; ``BOOTSTRAP`` puts the build's folders, then this suite, on its module path).

The worker builds the model and every executor once, then answers requests one at a time, blocking
on the channel in between (an idle worker does not spin): a block between two host references
(``rounds.measure_block``, which synchronizes before it returns, so two workers never overlap on
the GPU), optionally behind a planted pure-Python delay and followed by an in-place breakdown of a
Thunder step (``thunder_breakdown.InSitu``); kernels from the profiler; its versions.
"""

from __future__ import annotations

import array
import os
import time

PLAIN, OPS = "plain", "ops"  # a worker's variants of the step: as built, and with the planted ops inside
VARIANTS = (PLAIN, OPS)

# Sent to the build's interpreter by ``remote`` (its variables are set when it starts): the first
# message is ``{"paths"}``, the build's folders and this suite's root.
BOOTSTRAP = """
import sys, warnings
warnings.filterwarnings("ignore", message="transformer_engine module not found")  # thunder's import, every build
setup = channel.receive()
sys.path[:0] = setup["paths"]
from latency_lab.studies.ab import worker
worker.serve(channel)
"""


class Worker:
    """The requests a worker answers (``serve`` calls them by name with the message's fields)."""

    def __init__(self):
        self.setup = None
        self.prepared = {}
        self.insitu = {}
        self.device = "cpu"

    def hello(self) -> dict:
        from ...core import builds

        return {**builds.versions(), "pid": os.getpid()}

    def build(self, params: dict, executors: list[str], variants: tuple[str, ...] = (PLAIN,)) -> dict:
        """The model and each executor, each with its first call, for each variant (``PLAIN``; ``OPS``: the
        step with ``planted_ops`` more ops inside, ``planted.with_ops``); per executor of the last variant its
        status, reason, first-call seconds and logits (float32 bytes and shape, taken before any later call),
        and the build's seconds: setting up (torch's import, threads) and the model.
        ``params``: the coordinator's ``Params`` as a dict, resolved and checked there, taken as they are."""
        from dataclasses import replace

        from ...core import harness, model, parameters, planted

        t0 = time.perf_counter()
        p = parameters.Params(**params)
        harness.set_up(p)
        self.device = p.device
        t1 = time.perf_counter()
        self.setup = model.build(p)
        t2 = time.perf_counter()
        out = {}
        for variant in variants:
            ops = planted.with_ops(self.setup.model, p.planted_ops) if variant == OPS else self.setup.model
            out = self.build_variant(variant, replace(self.setup, model=ops), executors)
        held = harness.memory(self.device, empty=True)  # the build's peak given back: the caching allocator emptied
        seconds = {"set_up_s": t1 - t0, "model_s": t2 - t1}
        for record in out.values():
            record.update(memory_mib=held, **seconds)
        return out

    def build_variant(self, variant: str, setup, executors: list[str]) -> dict:
        from ...core import harness, model, registry

        out = {}
        for ex in registry.selected(executors):
            prep = self.prepared[variant, ex.name] = harness.prepare(ex, setup.model, setup.kwargs, self.device)
            record = {"status": prep.status, "reason": prep.reason, "notes": prep.notes}
            if prep.ok:
                logits = model.logits_of(prep.output).detach().float().cpu().contiguous()
                record.update(
                    first_call_s=prep.first_call_s,
                    logits=array.array("f", logits.flatten().tolist()).tobytes(),
                    shape=list(logits.shape),
                )
                prep.output = None
            out[ex.name] = record
        return out

    def pin(self, core: int) -> int:
        """Every thread of this process (and those it starts later) on ``core``; the core."""
        for tid in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(tid), {core})
            except OSError:  # a thread that ended meanwhile
                pass
        return core

    def block(
        self, executor: str, warmup: int, iters: int, delay_us: float = 0.0, parts: bool = False, variant: str = PLAIN
    ) -> dict:
        """One block of ``executor`` (of ``variant``) between two host references (``rounds.measure_block``),
        behind ``delay_us`` of planted delay; with ``parts``, an in-place breakdown of the same step right
        after it (a Thunder configuration that can be instrumented), else the reason it has none."""
        from ...core import planted
        from ...core.rounds import measure_block

        t0 = time.perf_counter()
        fn = self.prepared[variant, executor].fn
        probes = {"parts": lambda: self.parts(executor, iters, variant)} if parts else {}
        m = measure_block(
            planted.delayed(fn, delay_us) if delay_us else fn, self.setup.kwargs, self.device, warmup, iters, probes
        )
        return {
            "before_ms": m.before_ms,
            "after_ms": m.after_ms,
            "wall_ms": m.block.wall_ms,
            "host_ms": m.block.host_ms,
            "probed": m.probed,
            "worker_ms": (time.perf_counter() - t0) * 1e3,
        }

    def parts(self, executor: str, calls: int, variant: str = PLAIN) -> dict:
        """µs per call of each in-place part of a Thunder step: the phases around its computation and
        the computation's statements summed by kind (``thunder_breakdown``); or ``{"reason": ...}``."""
        from ...instruments import thunder_breakdown

        if (variant, executor) not in self.insitu:
            self.insitu[variant, executor] = thunder_breakdown.insitu_probe(
                self.prepared[variant, executor], self.setup.kwargs, calls
            )
        ins, why = self.insitu[variant, executor]
        if ins is None:
            return {"reason": why}
        b = ins.block(calls)
        out = {k: v for k, v in b["phases_us"].items() if k != "statements"}
        for s in ins.statements:
            label = thunder_breakdown.kind_label(s.kind)
            out[label] = out.get(label, 0.0) + b["statements_us"][s.index]
        return {"us": out}

    def counts(self, executor: str, variant: str = PLAIN) -> dict:
        """The step's work counted (``instruments.counts.count_step``): per counter its count per step, the
        counters whose two counted steps differed, every function's starts per step, what was unavailable."""
        from ...instruments import counts

        c = counts.count_step(self.prepared[variant, executor].fn, self.setup.kwargs, self.device)
        return c.to_dict()

    def kernels(self, executor: str, steps: int, variant: str = PLAIN) -> dict:
        from ...core import timing

        return timing.profile_kernels(self.prepared[variant, executor].fn, self.setup.kwargs, self.device, steps)


def serve(channel) -> None:
    """Answer ``{"op": NAME, **fields}`` messages with ``{"ok": True, "value": ...}`` or ``{"ok":
    False, "error": ...}`` until ``{"op": "stop"}``."""
    from ...core.harness import describe

    worker = Worker()
    while True:
        message = channel.receive()
        op = message.pop("op")
        if op == "stop":
            channel.send({"ok": True, "value": None})
            return
        try:
            channel.send({"ok": True, "value": getattr(worker, op)(**message)})
        except Exception as e:  # the request's failure is its answer; the worker keeps serving
            channel.send({"ok": False, "error": describe(e)})
