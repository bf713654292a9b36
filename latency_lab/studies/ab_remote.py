"""Notebook 08's workers from the coordinator's side: each build's worker process (``ab_worker``, in the
build's own interpreter, driven over an execnet channel) and the requests sent to it; the rounds' entries
whose blocks are timed in a worker (``RemoteEntry``) and what each block cost; and a run's set of workers
(A, its twin A', one per planted delay, B), started and built side by side, A's host time measured to
size the planted delays, and the entries of the rounds over those that built.
"""

from __future__ import annotations

import shlex
import shutil
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from ..core import builds, harness, registry, timing
from ..core.builds import Build
from ..core.harness import describe
from ..core.parameters import Params
from ..core.rounds import Measured
from . import ab_worker

A, TWIN, B = "A", "A'", "B"  # the workers: build A, a second worker of build A (the control), build B
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
    """One build's worker process (``ab_worker``) and the channel to it."""

    label: str
    build: Build
    cache: Path
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
        self.channel = self.gateway.remote_exec(ab_worker.BOOTSTRAP)
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
        try:
            if not self.error and self.channel is not None:
                self.call("stop", timeout=30)
        except WorkerError:
            pass
        if self.group is not None:
            self.group.terminate(timeout=10)


class RemoteEntry(harness.Entry):
    """An entry of the rounds whose step runs in a worker: its block is timed there (``ab_worker``)."""

    in_process = False

    def __init__(self, name: str, worker: Worker, executor: str, delay_us: float = 0.0, parts: bool = False):
        super().__init__(name, None, {})
        self.worker, self.executor, self.delay_us, self.parts = worker, executor, delay_us, parts
        self.costs: list[tuple[float, float]] = []  # per block: ms the request took here, and in the worker

    def measure(self, device: str, warmup: int, iters: int) -> Measured:
        t0 = time.perf_counter()
        b = self.worker.call(
            "block", executor=self.executor, warmup=warmup, iters=iters, delay_us=self.delay_us, parts=self.parts
        )
        self.costs.append(((time.perf_counter() - t0) * 1e3, b["worker_ms"]))
        return Measured(b["before_ms"], timing.Block(b["wall_ms"], b["host_ms"]), b["after_ms"], b["probed"])


def cost_rows(entries: list[RemoteEntry]) -> list[dict]:
    """Per entry, what one block cost the run (median ms): the request as the coordinator saw it, the
    same inside the worker (references, warm-up, timed calls, parts), and the channel's share."""
    rows = []
    for e in entries:
        if e.costs:
            total, worker = (statistics.median(c[i] for c in e.costs) for i in (0, 1))
            rows.append({"entry": e.name, "request_ms": total, "in_worker_ms": worker, "channel_ms": total - worker})
    return rows


def entry_name(executor: str, who: str) -> str:
    return f"{executor} · {who}"


def planted_label(pct: float) -> str:
    """The worker of build A whose step runs behind a planted delay of ``pct`` % of A's host time."""
    return f"A + {pct:g}% planted"


def workers_for(params: Params, cache_root: Path) -> list[Worker]:
    """A, its twin A' (the control), one worker of build A per planted delay, and B when one is given,
    each with its own cache folder. One entry per worker: a worker that ran the block before is warmer
    than one that did not (on the CPU machine, a worker serving three entries read 3% faster than one
    serving one), so every block follows another process's."""
    a = builds.parse("build_a", params.build_a)
    out = [Worker(A, a, cache_root / "A"), Worker(TWIN, a, cache_root / "A-twin")]
    out += [Worker(planted_label(p), a, cache_root / f"A-planted-{i}") for i, p in enumerate(params.planted_pct)]
    if params.build_b is not None:
        out.append(Worker(B, builds.parse("build_b", params.build_b), cache_root / "B"))
    return out


def start_and_build(workers: list[Worker], params: Params) -> tuple[dict, dict]:
    """Every worker started and built side by side; per worker its versions and its executors'
    records (``ab_worker.Worker.build``), or the error that stopped it."""
    hello, built = {}, {}
    for w in workers:
        try:
            w.start()
            w.send("hello")
        except Exception as e:  # an interpreter that does not start
            w.error = w.error or f"worker {w.label} did not start: {describe(e)}"
    for w in workers:
        try:
            hello[w.label] = w.receive()
            w.send("build", params=params.to_dict(), executors=list(params.executors))
        except WorkerError as e:
            hello.setdefault(w.label, {"error": str(e)})
    for w in workers:
        try:
            built[w.label] = w.receive(BUILD_TIMEOUT_S)
        except WorkerError as e:
            built[w.label] = {"error": str(e)}
    return hello, built


def usable(built: dict, label: str, executor: str) -> bool:
    return (built.get(label) or {}).get(executor, {}).get("status") == "ok"


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


def entries_for(
    workers: dict[str, Worker], built: dict, params: Params, delays: dict, parts: bool = True
) -> list[RemoteEntry]:
    """Per executor that A and A' built: A, A', each planted worker behind its delay, and B, where each
    built it. With ``parts``, the in-place parts are taken for A, A' and B of every Thunder configuration."""
    out = []
    for name in params.executors:
        if not (usable(built, A, name) and usable(built, TWIN, name)):
            continue
        parts = parts and registry.REGISTRY[name].needs_thunder
        out += [
            RemoteEntry(entry_name(name, A), workers[A], name, parts=parts),
            RemoteEntry(entry_name(name, TWIN), workers[TWIN], name, parts=parts),
        ]
        for pct, us in delays.get(name, {}).items():
            who = planted_label(pct)
            if usable(built, who, name):
                out.append(RemoteEntry(entry_name(name, who), workers[who], name, delay_us=us))
        if B in workers and usable(built, B, name):
            out.append(RemoteEntry(entry_name(name, B), workers[B], name, parts=parts))
    return out
