"""``runner.py --gpus`` and ``--cpu-slots``: a run's notebooks side by side, one GPU or one share of
the CPU cores each.

``plan`` turns ``--gpus`` (``0,1,2,3`` or ``all``) into slots: one slot (the notebooks one after
another, as without the option) on a CPU, with one GPU, or when one GPU is chosen; else one slot per
GPU, each with its own CPU cores. ``--cpu-slots N`` on a CPU run: N slots, each its own cores.
``run`` starts each notebook in a worker process (``python -m latency_lab.run.scheduler JOB``) that
pins itself to its slot's cores and sees only its slot's GPU (``CUDA_VISIBLE_DEVICES``); the
notebook's kernel, started by the worker, inherits both. A notebook starts once the notebooks it reads
(``RUNS_AFTER``) have finished, on the first free slot; its outcome lands in notebook order whatever
the order of finishing, and a failure is its outcome only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core import catalog, compile_cache
from ..core.parameters import REPO_ROOT
from . import notebook_run, run_folder

# Notebook -> notebooks of the same run whose results it reads, so it starts after they finish
# (whatever their status: without their results it builds its own): their catalog entries' ``reads_from``.
RUNS_AFTER = catalog.READS_FROM


@dataclass(frozen=True)
class Slot:
    """Where notebooks run: ``gpu`` is "cpu" or the GPU as ``CUDA_VISIBLE_DEVICES`` names it, ``cpus``
    the cores a side-by-side slot is pinned to (None: not pinned), ``env`` what its kernels get."""

    gpu: str
    cpus: tuple[int, ...] | None = None
    env: dict = dataclasses.field(default_factory=dict)


def gpu_count() -> int:
    """CUDA GPUs this process may use (NVML, no CUDA context made)."""
    import torch

    return torch.cuda.device_count()


def visible_id(index: int) -> str:
    """GPU ``index`` of this process as the kernels' ``CUDA_VISIBLE_DEVICES`` must name it: through
    this process's own ``CUDA_VISIBLE_DEVICES`` where it narrows the GPUs."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return visible[index] if "CUDA_VISIBLE_DEVICES" in os.environ and index < len(visible) else str(index)


def parse_gpus(spec: str, count: int) -> list[int]:
    """``all`` or a comma list of distinct indices below ``count``; else ValueError naming the allowed values."""
    allowed = (
        f"all or a comma list of distinct GPU indices 0..{count - 1}" if count else "all (this machine has no CUDA GPU)"
    )
    if spec.strip() == "all":
        return list(range(count))
    items = [t.strip() for t in spec.split(",")]
    if not items or not all(t.isdigit() for t in items):
        raise ValueError(f"invalid --gpus {spec!r}: allowed {allowed}")
    gpus = [int(t) for t in items]
    if twice := sorted({g for g in gpus if gpus.count(g) > 1}):
        raise ValueError(f"invalid --gpus {spec!r}: {', '.join(map(str, twice))} given twice; allowed {allowed}")
    if missing := [g for g in gpus if g >= count]:
        raise ValueError(f"invalid --gpus {spec!r}: no GPU {', '.join(map(str, missing))} here; allowed {allowed}")
    return gpus


def physical_cores(cpus) -> list[tuple[int, ...]]:
    """``cpus`` grouped by physical core (hyperthread siblings together, from sysfs), by first CPU."""
    cores: dict[tuple[int, ...], None] = {}
    for cpu in sorted(cpus):
        try:
            text = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text()
            siblings = {n for part in text.strip().split(",") for n in _span(part)}
        except (OSError, ValueError):
            siblings = {cpu}
        cores[tuple(sorted(siblings & set(cpus)))] = None
    return list(cores)


def _span(part: str) -> range:
    first, _, last = part.partition("-")
    return range(int(first), int(last or first) + 1)


def cpu_shares(n: int, cores: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """``cores`` split into ``n`` disjoint, contiguous, near-equal shares of whole cores; ValueError
    when there are fewer cores than shares (two kernels would then share a core)."""
    if len(cores) < n:
        raise ValueError(
            f"invalid --gpus: {n} GPUs side by side need {n} CPU cores, this process may use "
            f"{len(cores)}; choose at most {len(cores)} GPUs"
        )
    size, extra = divmod(len(cores), n)
    shares, start = [], 0
    for i in range(n):
        end = start + size + (i < extra)
        shares.append(tuple(sorted(cpu for core in cores[start:end] for cpu in core)))
        start = end
    return shares


def plan(spec: str | None, device: str, count: int | None = None, cpus=None, cpu_slots: int = 1) -> list[Slot]:
    """The slots of a run on resolved ``device``: one (the notebooks one after another, as without
    ``--gpus``, or on the one GPU chosen), one per GPU, side by side, or on a CPU ``cpu_slots`` shares
    of its cores. Bad ``--gpus`` and ``--cpu-slots`` values are ValueErrors naming the allowed values,
    also where the option would change nothing."""
    if cpu_slots != 1:
        if spec is not None:  # a bad --gpus is an error beside --cpu-slots too, where it changes nothing
            parse_gpus(spec, gpu_count() if count is None else count)
        return cpu_plan(cpu_slots, device, os.sched_getaffinity(0) if cpus is None else cpus)
    if spec is None:
        return [Slot(device_label(device))]
    count = gpu_count() if count is None else count
    gpus = parse_gpus(spec, count)
    if device == "cpu" or count <= 1:
        return [Slot(device_label(device))]
    if device not in ("cuda", "cuda:0"):
        raise ValueError(
            f"--device {device} and --gpus {spec} disagree: with --gpus each notebook sees only its "
            "GPU, as cuda:0; give --device cuda (or auto)"
        )
    if len(gpus) == 1:
        return [Slot(visible_id(gpus[0]), env={"CUDA_VISIBLE_DEVICES": visible_id(gpus[0])})]
    shares = cpu_shares(len(gpus), physical_cores(os.sched_getaffinity(0) if cpus is None else cpus))
    return [Slot(visible_id(g), share, {"CUDA_VISIBLE_DEVICES": visible_id(g)}) for g, share in zip(gpus, shares)]


def cpu_plan(n: int, device: str, cpus) -> list[Slot]:
    """``--cpu-slots n``: ``n`` slots of whole physical cores on a CPU run."""
    if device != "cpu":
        raise ValueError(
            f"invalid --cpu-slots {n}: allowed only on a CPU run (--device cpu); GPUs side by side: --gpus"
        )
    cores = physical_cores(cpus)
    if not 1 <= n <= len(cores):
        raise ValueError(f"invalid --cpu-slots {n}: allowed 1..{len(cores)} (the physical cores this process may use)")
    return [Slot("cpu", share) for share in cpu_shares(n, cores)]


def device_label(device: str) -> str:
    """ "cpu", or the GPU a device (``cuda``, ``cuda:N``) is, as ``CUDA_VISIBLE_DEVICES`` names it."""
    if not device.startswith("cuda"):
        return "cpu"
    return visible_id(int(device.partition(":")[2] or 0))


def start_order(names: list[str], seconds: dict[str, float], runs_after=RUNS_AFTER) -> list[str]:
    """Longest chain first: a notebook's own expected seconds plus those of the longest chain of
    selected notebooks waiting for it (unknown seconds count as the mean of the known, or 1); ties
    in notebook order. So the notebooks others wait for, and the long ones, start first."""
    default = sum(seconds.values()) / len(seconds) if seconds else 1.0
    chain: dict[str, float] = {}

    def length(name: str, seen: tuple[str, ...] = ()) -> float:
        if name in seen:
            raise ValueError(f"RUNS_AFTER has a cycle: {' -> '.join([*seen, name])}")
        if name not in chain:
            waiting = [n for n in names if name in runs_after.get(n, ())]
            chain[name] = seconds.get(name, default) + max((length(n, (*seen, name)) for n in waiting), default=0.0)
        return chain[name]

    return sorted(names, key=lambda n: (-length(n), names.index(n)))


def previous_seconds(root: Path) -> dict[str, float]:
    """Seconds per notebook that finished ok in the last usable run under ``root`` (``run_folder.last_usable``;
    none: {})."""
    last = run_folder.last_usable(Path(root))
    if last is None:
        return {}
    try:
        summary = json.loads((last / "summary.json").read_text())
        return {n["name"]: float(n["seconds"]) for n in summary["notebooks"] if n["status"] == "ok"}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def in_order(names: list[str], outcomes: list) -> list:
    """One outcome per notebook in notebook order; "not run" where none was started."""
    by_name = {o.name: o for o in outcomes}
    return [by_name.get(n) or notebook_run.Outcome(n, status="not run") for n in names]


def run(
    names: list[str],
    slots: list[Slot],
    start: Callable,
    outcomes: list,
    runs_after=RUNS_AFTER,
    seconds: dict[str, float] | None = None,
    poll_s: float = 0.2,
) -> None:
    """Run ``names`` on ``slots`` side by side: ``start(name, slot)`` returns a handle whose
    ``poll()`` is None while the notebook runs and its ``Outcome`` once it ended, and whose
    ``kill()`` ends it. ``outcomes`` gets an "interrupted" outcome as each notebook starts, replaced
    by its own when it ends. Whatever stops the loop (Ctrl-C, SIGTERM) kills the running ones."""
    waiting, free, running, done = start_order(names, seconds or {}, runs_after), list(slots), {}, set()
    try:
        while waiting or running:
            for name in [n for n in waiting if set(runs_after.get(n, ())) & set(names) <= done]:
                if not free:
                    break
                slot = free.pop(0)
                waiting.remove(name)
                print(f"[{len(outcomes) + 1}/{len(names)}] {name} on {ran_on(slot.gpu, slot.cpus)} ...", flush=True)
                handle = start(name, slot)
                outcomes.append(
                    notebook_run.Outcome(
                        name, status="interrupted", gpu=slot.gpu, cpus=slot.cpus, started=time.perf_counter()
                    )
                )
                running[name] = (handle, slot, len(outcomes) - 1)
            time.sleep(poll_s)
            for name, (handle, slot, i) in list(running.items()):
                if (outcome := handle.poll()) is None:
                    continue
                outcomes[i] = dataclasses.replace(outcome, gpu=slot.gpu, cpus=slot.cpus)
                del running[name]
                done.add(name)
                free.append(slot)
                detail = "" if outcome.status == "ok" else f": {notebook_run.error_line(outcome.error)}"
                print(
                    f"[{i + 1}/{len(names)}] {name} {outcome.status} in {outcome.seconds:.1f} s "
                    f"on {ran_on(slot.gpu, slot.cpus)}{detail}",
                    flush=True,
                )
    finally:
        for handle, _, _ in running.values():
            handle.kill()


def ran_on(gpu: str | None, cpus=None) -> str:
    """Where a notebook ran, for people: "cpu", "GPU 2", "GPU 2 · CPU cores 8-11"; "" when not
    recorded (runs made before the field existed, notebooks never started)."""
    where = "" if gpu is None else "cpu" if gpu == "cpu" else f"GPU {gpu}"
    if not (where and cpus):
        return where
    spans = [[cpus[0], cpus[0]]]
    for c in cpus[1:]:
        if c == spans[-1][1] + 1:
            spans[-1][1] = c
        else:
            spans.append([c, c])
    return f"{where} · CPU cores " + ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in spans)


# --- worker processes ---------------------------------------------------------------------------------


class Worker:
    """One notebook in its own process (``python -m latency_lab.run.scheduler JOB``), its outcome
    read back from a JSON file in ``folder``."""

    def __init__(self, job: dict, env: dict, folder: Path):
        self.name, self.outcome_file = Path(job["path"]).stem, folder / f"{Path(job['path']).stem}.outcome.json"
        job = {**job, "outcome": str(self.outcome_file)}
        self.started = time.perf_counter()
        # cwd first on sys.path: the worker imports the runner's own latency_lab
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "latency_lab.run.scheduler", json.dumps(job)],
            cwd=REPO_ROOT,
            env={**os.environ, **env},
        )

    def poll(self):
        code = self.proc.poll()
        if code is None:
            return None
        try:
            return notebook_run.Outcome(**json.loads(self.outcome_file.read_text()))
        except (OSError, ValueError, TypeError) as e:  # the worker died before writing it
            error = f"the notebook's worker exited with {code} and left no outcome ({type(e).__name__})"
            return notebook_run.Outcome(
                self.name,
                status="failed",
                seconds=time.perf_counter() - self.started,
                error={"cell": None, "cell_index": None, "ename": "WorkerDied", "evalue": error},
            )

    def kill(self) -> None:
        """The worker and its kernel, killed."""
        import psutil

        try:
            procs = [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        for p in reversed(procs):
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(procs, timeout=5)


def slot_environment(slot: Slot) -> dict:
    """What a side-by-side slot's worker and kernel get: its GPU and, in a run with per-run compile
    caches, a temp folder of its own (nvFuser's kernel DB there is not safe for concurrent writers;
    Inductor's cache stays shared)."""
    env = dict(slot.env)
    if os.environ.get(compile_cache.MARKER) == "run" and os.environ.get("TMPDIR"):
        tmp = Path(os.environ["TMPDIR"]) / f"gpu{slot.gpu}"
        tmp.mkdir(exist_ok=True)
        env["TMPDIR"] = str(tmp)
    return env


def run_side_by_side(
    notebooks: dict[str, Path],
    parameters: dict[str, dict],
    slots: list[Slot],
    run_dir: Path,
    kernel: str,
    timeout: int,
    outcomes: list,
) -> None:
    """``run`` with real workers: each notebook executed into ``run_dir`` with its ``parameters``,
    started longest first by the times of the latest run beside it."""
    notebook_run.write_shared_assets(run_dir)  # before the workers, which would otherwise race to write them
    folder = Path(tempfile.mkdtemp(prefix="latency-lab-jobs-"))

    def start(name: str, slot: Slot) -> Worker:
        job = {
            "path": str(notebooks[name]),
            "run_dir": str(run_dir),
            "parameters": parameters[name],
            "kernel": kernel,
            "timeout": timeout,
            "cpus": list(slot.cpus) if slot.cpus else None,
        }
        return Worker(job, slot_environment(slot), folder)

    try:
        run(list(notebooks), slots, start, outcomes, seconds=previous_seconds(run_dir.parent))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def work(job: dict) -> None:
    """The worker: pinned to its cores (the kernel it starts inherits them), one notebook executed,
    its outcome written as JSON."""
    if job.get("cpus"):
        os.sched_setaffinity(0, job["cpus"])
    outcome = notebook_run.execute(
        Path(job["path"]), Path(job["run_dir"]), job["parameters"], job["kernel"], job["timeout"], progress_bar=False
    )
    tmp = Path(job["outcome"] + ".tmp")
    tmp.write_text(json.dumps(dataclasses.asdict(outcome), default=str))
    tmp.replace(job["outcome"])


if __name__ == "__main__":
    try:
        work(json.loads(sys.argv[1]))
    except KeyboardInterrupt:  # the runner, interrupted too, kills the kernel
        sys.exit(128 + signal.SIGINT)
