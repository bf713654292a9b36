"""Notebook 08's workers from the coordinator's side: each worker process (``worker``, in its build's
own interpreter, driven over an execnet channel) and the requests sent to it; the rounds' entries whose
blocks are timed in a worker (``RemoteEntry``) and what each block cost; and a run's arms (A, its twin A',
one per planted delay, B), each of k workers, started in an order balanced over the slots and built side by
side, then pinned slot by slot (worker i of every arm on the same core); a calibration worker of build A,
outside the arms, that measures A's host time and sizes the planted delays (so no timed worker does work the
others do not); the entries of the rounds over the workers that built, and their order, slot by slot
(``slot_order``).
"""

from __future__ import annotations

import os
import random
import shlex
import shutil
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ...core import builds, fits, harness, registry, timing
from ...core.builds import Build
from ...core.harness import describe
from ...core.parameters import Params
from ...core.rounds import Reading
from . import worker
from .rows import CostRow

A, TWIN, B = "A", "A'", "B"  # the workers: build A, a second worker of build A (the control), build B
CALIBRATION = "calibration"  # a worker of build A outside the arms: it sizes the plants, and is never timed
BUILD_TIMEOUT_S = 1800  # a worker's model and first calls (Thunder at 16 layers: minutes)
CALL_TIMEOUT_S = 600  # any other request
# Every worker hashes strings alike, so dicts and sets iterate alike in all of them: with Python's random
# seed per process, two workers of one build differed by up to 2% on the CPU machine (tools/ab_benchmark.py)
HASH_SEED = "0"
CALIBRATION_BLOCKS = 5  # blocks of A that size the planted delays (the fastest: the fast state's host time)


class WorkerError(RuntimeError):
    """A request a worker could not answer: its error, or the worker is gone."""


@dataclass
class Worker:
    """One worker process of an arm (``worker``), its slot in the arm, and the channel to it."""

    label: str
    build: Build
    cache: Path
    arm: str = A
    slot: int = 0
    variants: tuple[str, ...] = (worker.PLAIN,)  # what it builds (``worker.Worker.build``); it times the last
    planted_pct: float | None = None  # the delay its arm plants, % of A's host time (None: no delay)
    group: object = None
    gateway: object = None
    channel: object = None
    error: str | None = None  # set once the worker is gone: every later request fails with it

    def start(self) -> None:
        """Start the build's interpreter (execnet's popen gateway) with its variables from the first
        instruction on (``env``), its own compile caches (Inductor's and nvFuser's kernel DB under
        ``cache``) and ``HASH_SEED``, then put the build's folders first on its module path."""
        import execnet

        (self.cache / "tmp").mkdir(parents=True, exist_ok=True)
        env = {
            "PYTHONHASHSEED": HASH_SEED,
            # segments the caching allocator can give back in part: after a build a worker held 1.6 GiB for 0.65
            # of weights without it (H100, seed), so fewer slots fit; under both names: torch before 2.9 reads
            # the old one, and from 2.9 on the old one alone prints a deprecation warning as every worker ends
            "PYTORCH_ALLOC_CONF": "expandable_segments:True",
            "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
            "TORCHINDUCTOR_CACHE_DIR": str(self.cache / "inductor"),
            "TMPDIR": str(self.cache / "tmp"),
            **dict(self.build.env),
        }
        spec = execnet.XSpec("popen")
        spec.python = shlex.join(
            [shutil.which("env") or "/usr/bin/env", *(f"{k}={v}" for k, v in env.items()), self.build.interpreter]
        )
        self.group = execnet.Group()  # its own, so that ``stop`` ends and reaps this worker's process
        self.gateway = self.group.makegateway(spec)
        self.channel = self.gateway.remote_exec(worker.BOOTSTRAP)
        self.channel.send({"paths": [*self.build.path, str(builds.REPO_ROOT)]})

    def send(self, op: str, **fields) -> None:
        if self.error:
            raise WorkerError(self.error)
        try:
            self.channel.send({"op": op, **fields})
        except Exception as e:  # the channel closed: the worker is gone
            self.error = f"worker {self.label} is gone: {describe(e)}"
            raise WorkerError(self.error) from None

    def receive(self, timeout: float = CALL_TIMEOUT_S):
        if self.error:
            raise WorkerError(self.error)
        try:
            answer = self.channel.receive(timeout)
        except Exception as e:  # EOFError, RemoteError, TimeoutError: the worker died or hangs
            self.error = f"worker {self.label} is gone: {describe(e)}"
            raise WorkerError(self.error) from None
        if not answer["ok"]:
            raise WorkerError(answer["error"])
        return answer["value"]

    def call(self, op: str, timeout: float = CALL_TIMEOUT_S, **fields):
        self.send(op, **fields)
        return self.receive(timeout)

    def stop(self) -> None:
        """Ask the worker to end, then end its gateway's process and wait for it (no zombie left)."""
        stop_all([self])


def stop_all(workers: list[Worker]) -> None:
    """Ask every worker to end at once, then wait for each and end its gateway's process (no zombie left): the
    processes end side by side (a CUDA worker takes seconds to give its context back)."""
    asked = []
    for w in workers:
        try:
            if not w.error and w.channel is not None:
                w.send("stop")
                asked.append(w)
        except WorkerError:
            pass
    for w in asked:
        try:
            w.receive(timeout=30)
        except WorkerError:
            pass
    groups = [w.group for w in workers if w.group is not None]
    if groups:  # each waits for its process to exit: side by side (one by one, 21 CPU workers took 12 s)
        with ThreadPoolExecutor(len(groups)) as pool:
            list(pool.map(lambda g: g.terminate(timeout=10), groups))


class RemoteEntry(harness.Entry):
    """An entry of the rounds whose step runs in a worker: its block is timed there (``worker``)."""

    in_process = False

    def __init__(self, name: str, worker: Worker, executor: str, delay_us: float = 0.0, parts: bool = False):
        super().__init__(name, None, {})
        self.worker, self.executor, self.delay_us, self.parts = worker, executor, delay_us, parts
        self.variant = worker.variants[-1]
        self.costs: list[tuple[float, float]] = []  # per block: ms the request took here, and in the worker

    @property
    def arm(self) -> str:
        return self.worker.arm

    def measure(self, device: str, warmup: int, iters: int) -> Reading:
        t0 = time.perf_counter()
        b = self.worker.call(
            "block",
            executor=self.executor,
            warmup=warmup,
            iters=iters,
            delay_us=self.delay_us,
            parts=self.parts,
            variant=self.variant,
        )
        self.costs.append(((time.perf_counter() - t0) * 1e3, b["worker_ms"]))
        return Reading(b["before_ms"], timing.Block(b["wall_ms"], b["host_ms"]), b["after_ms"], b["probed"])


def cost_rows(entries: list[RemoteEntry]) -> list[CostRow]:
    """Per entry, what one block cost the run (median ms): the request as the coordinator saw it, the
    same inside the worker (references, warm-up, timed calls, parts), and the channel's share."""
    rows = []
    for e in entries:
        if e.costs:
            total, worker = (statistics.median(c[i] for c in e.costs) for i in (0, 1))
            rows.append(CostRow(e.name, total, worker))
    return rows


def entry_name(executor: str, who: str) -> str:
    return f"{executor} · {who}"


def planted_label(pct: float) -> str:
    """The arm of build A whose step runs behind a planted delay of ``pct`` % of A's host time."""
    return f"A + {pct:g}% planted"


def ops_label(ops: int) -> str:
    """The arm of build A whose step has ``ops`` more elementwise ops inside (``planted.with_ops``)."""
    return f"A + {ops} ops planted"


def worker_label(arm: str, slot: int) -> str:
    return f"{arm} #{slot + 1}"


def planted_arms(params: Params) -> list[tuple[str, float | None]]:
    """The planted arms of build A, each with the delay it plants (% of A's host time; None: the planted ops)."""
    ops = [(ops_label(params.planted_ops), None)] if params.planted_ops else []
    return [*((planted_label(pct), pct) for pct in params.planted_pct), *ops]


def arms_for(
    params: Params, more: tuple[tuple[str, Build], ...] = (), copies: Path | None = None
) -> list[tuple[str, Build, float | None]]:
    """The arms, each with its build and the delay it plants (None: none): A, its twin A' (the control: with
    ``copies``, a second instance of A's code in folders of its own there, ``builds.second_instance``), the
    planted arms of build A (``planted_arms``), B when given, then ``more`` builds (name, build), each read
    against A like B (a bisection's midpoint)."""
    a = builds.parse("build_a", params.build_a)
    b = None if params.build_b is None else builds.parse("build_b", params.build_b)
    others = [b] if b else []
    twin = a if copies is None else builds.second_instance(a, [*others, *(x for _, x in more)], copies)
    out = [(A, a, None), (TWIN, twin, None), *((label, a, pct) for label, pct in planted_arms(params))]
    if b is not None:
        out.append((B, b, None))
    return out + [(name, build, None) for name, build in more]


def workers_for(params: Params, cache_root: Path, more: tuple[tuple[str, Build], ...] = ()) -> list[Worker]:
    """``params.workers`` workers per arm (``arms_for``; one per slot), each with its own cache folder and one
    entry per executor (a worker that ran the block before is warmer than one that did not: on the CPU
    machine, a worker serving three entries read 3% faster than one serving one), then the calibration worker
    of build A (the plain step, and the step with the planted ops where they are asked for)."""
    ops = ops_label(params.planted_ops) if params.planted_ops else None
    arms = arms_for(params, more, cache_root / "second-instance")
    out = [
        Worker(worker_label(arm, i), build, cache_root / f"arm{n}-{i}", arm, i, variants_of(arm == ops), pct)
        for n, (arm, build, pct) in enumerate(arms)
        for i in range(params.workers)
    ]
    calibrates = (worker.PLAIN, worker.OPS) if ops else (worker.PLAIN,)
    return [*out, Worker(CALIBRATION, arms[0][1], cache_root / CALIBRATION, CALIBRATION, 0, calibrates)]


def variants_of(ops_arm: bool) -> tuple[str, ...]:
    """What a worker of an arm builds: the plain step; in the ops arm the step with the ops."""
    return (worker.OPS,) if ops_arm else (worker.PLAIN,)


def start_order(workers: list[Worker], seed: object) -> list[Worker]:
    """The order the workers start and build in: position j of every slot in turn, each slot's arms in a
    rotation of one random order (a cyclic Latin square), so that which arm starts first on a slot is balanced
    over the slots, not the same arm everywhere (on an H100 the process started first on a core read 0.6-0.9%
    slower than the second); the calibration worker last."""
    timed = [w for w in workers if w.arm != CALIBRATION]
    arms = list(dict.fromkeys(w.arm for w in timed))
    random.Random(f"start-{seed}").shuffle(arms)
    by = {(w.arm, w.slot): w for w in timed}
    slots = sorted({w.slot for w in timed})
    out = [by[key] for j in range(len(arms)) for slot in slots if (key := (arms[(j + slot) % len(arms)], slot)) in by]
    return out + [w for w in workers if w.arm == CALIBRATION]


def slot_order(entries: list, r: int, seed: object) -> list:
    """The entries' order in round ``r`` (``rounds.rounds``' ``order``): the slots in a fresh random order every
    round, and on each slot its arms' blocks back to back, in a random order per slot and pair of rounds,
    forward then reversed (each arm's mean place on its slot is the same: ABBA over a pair of rounds)."""
    slots: dict[int, list] = {}
    for e in entries:
        slots.setdefault(e.worker.slot, []).append(e)
    visit = sorted(slots)
    random.Random(f"{seed}-slots-{r}").shuffle(visit)
    out = []
    for slot in visit:
        group = list(slots[slot])
        random.Random(f"{seed}-{slot}-{r // 2}").shuffle(group)
        out += group if r % 2 == 0 else group[::-1]
    return out


def pin(workers: list[Worker]) -> dict[str, int | None]:
    """Each worker pinned to one core, worker i of every arm to the same core (slot i), so that every
    arm meets every core once; the core per worker (None where the worker could not be pinned)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    out = {}
    for w in workers:
        core = cores[(w.slot + 1) % len(cores)] if cores else None  # slot 0 off the first core, where the system runs
        try:
            out[w.label] = w.call("pin", core=core) if core is not None else None
        except WorkerError:
            out[w.label] = None
    return out


def start_and_build(workers: list[Worker], params: Params) -> tuple[dict, dict, dict]:
    """Every worker started, then built side by side, in ``start_order``: no more at once than the cores, nor than
    the free memory holds at a build's peak (``fits.builds_at_once``; a built worker holds far less); per worker its
    versions and its executors' records (``worker.Worker.build``), or the error that stopped it; and the seconds
    until every worker had started (``started_s``) and built (``built_s``), with the builds ``at_once``."""
    hello, built = {}, {}
    t0 = time.perf_counter()
    workers = start_order(workers, params.seed)
    for w in workers:
        try:
            w.start()
            w.send("hello")
        except Exception as e:  # an interpreter that does not start
            w.error = w.error or f"worker {w.label} did not start: {describe(e)}"
    for w in workers:
        try:
            hello[w.label] = w.receive()
        except WorkerError as e:
            hello[w.label] = {"error": str(e)}
    started_s = time.perf_counter() - t0
    at_once = fits.builds_at_once(params)  # on a CPU too: 17 seed workers built at once ran out of RAM
    building: list[Worker] = []
    for w in [*workers, *[None] * at_once]:
        if w is not None and "error" not in hello[w.label]:
            try:
                w.send("build", params=params.to_dict(), executors=list(params.executors), variants=w.variants)
                building.append(w)
            except WorkerError as e:
                built[w.label] = {"error": str(e)}
        while building and (len(building) >= at_once or w is None):
            done = building.pop(0)
            try:
                built[done.label] = done.receive(BUILD_TIMEOUT_S)
            except WorkerError as e:
                built[done.label] = {"error": str(e)}
    for w in workers:
        built.setdefault(w.label, {"error": hello[w.label].get("error") or f"worker {w.label} was not built"})
    return hello, built, {"started_s": started_s, "built_s": time.perf_counter() - t0, "at_once": at_once}


def usable(built: dict, label: str, executor: str) -> bool:
    return (built.get(label) or {}).get(executor, {}).get("status") == "ok"


def arm_usable(workers: list[Worker], built: dict, arm: str, executor: str) -> list[Worker]:
    """The workers of ``arm`` that built ``executor``."""
    return [w for w in workers if w.arm == arm and usable(built, w.label, executor)]


def calibrate(worker: Worker, executor: str, params: Params) -> float | None:
    """A's host ms per step of ``executor``, the fastest of ``CALIBRATION_BLOCKS`` blocks (the headlines
    are fast-state ones): what the planted delays are a share of."""
    try:
        hosts = [
            worker.call("block", executor=executor, warmup=params.warmup, iters=params.iters)["host_ms"]
            for _ in range(CALIBRATION_BLOCKS)
        ]
    except WorkerError:
        return None
    return min(hosts)


# Pairs of blocks that size a plant in one process: PLANTED_PAIRS (about 1 s on a GPU, a few s for the tiny
# preset on a CPU), or as many as PLANTED_SECONDS hold once PLANTED_MIN_PAIRS are in (a seed step on the
# CPU machine: 1.4 s a pair)
PLANTED_PAIRS, PLANTED_MIN_PAIRS, PLANTED_SECONDS = 40, 10, 15.0


def planted_cost(w: Worker, executor: str, params: Params, delay_us: float = 0.0) -> dict | None:
    """What a plant adds to a step in one process: ``PLANTED_PAIRS`` pairs of blocks (fewer where they take
    longer than ``PLANTED_SECONDS``, at least ``PLANTED_MIN_PAIRS``), plain and planted (behind
    ``delay_us`` of busy wait, or, with none, the step with the planted ops), in alternating order; the median
    of their host-time differences in µs (``us``) and its standard error (``us_se``, from their spread); for
    the ops, also kernels per step and kernel µs added (the profiler). The busy wait costs more than it waits
    (54 µs for 47.6 on the CPU machine: the step after it runs colder), so this, not the nominal delay, is
    the planted size, and its error counts in the coverage check (``tables.control_rows``)."""
    plant = {"delay_us": delay_us} if delay_us else {"variant": worker.OPS}
    try:
        diffs, start = [], time.perf_counter()
        for i in range(PLANTED_PAIRS):
            if i >= PLANTED_MIN_PAIRS and time.perf_counter() - start > PLANTED_SECONDS:
                break
            order = ({}, plant) if i % 2 == 0 else (plant, {})
            host = [
                w.call("block", executor=executor, warmup=params.warmup, iters=params.iters, **extra)["host_ms"]
                for extra in order
            ]
            diffs.append(1e3 * (host[1] - host[0]) * (1 if i % 2 == 0 else -1))
        mid = statistics.median(diffs)
        spread = 1.4826 * statistics.median(abs(d - mid) for d in diffs)
        out = {"us": mid, "us_se": 1.2533 * spread / len(diffs) ** 0.5}
        if not delay_us:
            steps = max(3, min(params.iters, 10))
            k0, k1 = (w.call("kernels", executor=executor, steps=steps, variant=v) for v in worker.VARIANTS)
            if "reason" not in k0 and "reason" not in k1:
                out["kernels_per_step"] = k1["kernels_per_step"] - k0["kernels_per_step"]
                out["kernel_us"] = 1e3 * (k1["kernel_ms"] - k0["kernel_ms"])
    except WorkerError:
        return None
    return out


def entries_for(
    workers: list[Worker], built: dict, params: Params, delays: dict, parts: bool = True
) -> list[RemoteEntry]:
    """Per executor that at least 2 workers of A and of A' built: every worker of every arm that built
    it, a planted arm's behind its delay (``delays``: per executor, µs per planted %). With ``parts``, the
    in-place parts are taken after every block of the first slot, every arm alike (A', B and a bisection's
    midpoint are read against A's), for every Thunder configuration."""
    out = []
    for name in params.executors:
        if min(len(arm_usable(workers, built, arm, name)) for arm in (A, TWIN)) < 2:
            continue
        take_parts = parts and registry.REGISTRY[name].needs_thunder
        sized = delays.get(name, {})
        for w in workers:  # a planted arm whose delay was not sized is left out
            if w.arm == CALIBRATION or not usable(built, w.label, name):
                continue
            if w.planted_pct is not None and w.planted_pct not in sized:
                continue
            probe = take_parts and w.slot == 0
            delay_us = 0.0 if w.planted_pct is None else sized[w.planted_pct]
            out.append(RemoteEntry(entry_name(name, w.label), w, name, delay_us=delay_us, parts=probe))
    return out
