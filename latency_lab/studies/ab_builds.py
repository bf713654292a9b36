"""Notebook 08, two builds in the same rounds: did a change of the stack (another Thunder, nvFuser or
transformers, a branch, a variable) move the step? ``run(params) -> Result``, written by ``Result.save``.

One worker process per build (``ab_worker``, in the build's own interpreter, driven over an execnet
channel), each built once, with its own compile caches. One coordinator (this process, which times
nothing itself) gives every worker's entries of one executor a block in turn in the same interleaved
rounds (``harness.rounds``: forward then reverse, the order permuted per pair of rounds; one set of
rounds per executor, so that the blocks compared are neighbours in time), each block between host
references in the worker's own process, which synchronizes before it answers. The host's speed state
flips within 0.1-5 s, so 08 times many short blocks (``NOTEBOOK_DEFAULTS``: 2 warm-up and 10 timed
calls, 120 rounds) rather than a few long ones: two blocks a few tens of ms apart mostly share a state.

Controls in every run: a second worker of build A (A') gives the run's own false-alarm check (A'
against A), and A' with a planted pure-Python delay of ``planted_pct`` % of A's host time per step
gives its sensitivity (the delay is known; the estimate must find it). B against A, A' against A and
each planted entry against A are read alike (``paired.change``): the median per-round ratio, its
bootstrap interval, a signed-rank test, and a call only beyond the measured minimum effect.
"""

from __future__ import annotations

import shlex
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..core import builds, environment, harness, model, paired, registry, results, timing
from ..core.builds import Build
from ..core.harness import Measured, Rounds, describe
from ..core.parameters import Params
from ..core.progress import say
from ..pages.tables import number
from . import ab_worker
from .study import Study, rounds_text

A, TWIN, B = "A", "A'", "B"  # the workers: build A, a second worker of build A (the control), build B
BUILD_TIMEOUT_S = 1800  # a worker's model and first calls (Thunder at 16 layers: minutes)
CALL_TIMEOUT_S = 600  # any other request
# Every worker hashes strings alike, so dicts and sets iterate alike in all of them: with Python's random
# seed per process, two workers of one build differed by up to 2% on the CPU machine (tools/ab_benchmark.py)
HASH_SEED = "0"
CALIBRATION_BLOCKS = 5  # blocks of A that size the planted delays (the fastest: the fast state's host time)
KEY_COLUMNS = [
    "executor",
    "comparison",
    "metric",
    "a_ms",
    "b_ms",
    "ratio_x",
    "ratio_lo_x",
    "ratio_hi_x",
    "change_pct",
    "resolution_pct",
    "p",
    "verdict",
    "status",
    "reason",
]


# What the page shows of the key table: the verdict carries the change and its interval in words
PAGE_COLUMNS = ["executor", "comparison", "metric", "a_ms", "ratio_x", "p", "verdict", "status", "reason"]


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


@dataclass
class Result(Study):
    """Notebook 08's run: the builds, the verdicts (B against A and the controls), kernels, parts,
    logits, findings, and the rounds."""

    NOTEBOOK = results.AB_BUILDS
    TITLE = "B against A and the controls, paired per round"
    COLUMNS = KEY_COLUMNS

    builds: list[dict]  # per worker: the build, its versions and folders' git state
    differs: list[str]  # what differs between A and B (empty: the same stack, or no B)
    table: list[dict]  # the key table: per executor, comparison and metric
    controls: list[dict]  # the planted delays: known against found
    kernels: list[dict]
    parts: list[dict]
    logits: list[dict]
    executors: list[dict]  # per executor and worker: status, reason, first call
    min_effect: dict
    findings: list[str]
    timed: Rounds | None = None
    delays_us: dict = field(default_factory=dict)
    costs: list[dict] = field(default_factory=list)  # ``cost_rows``

    def key_table_rows(self) -> list[dict]:
        return self.table

    def sections(self) -> dict:
        return {
            "findings": self.findings,
            "builds": self.builds,
            "differs": self.differs,
            "controls": self.controls,
            "kernels": self.kernels,
            "parts": self.parts,
            "logits": self.logits,
            "executors": self.executors,
            "min_effect": self.min_effect,
            "planted_delays_us": self.delays_us,
            "block_costs": self.costs,
            "method": paired.METHOD,
            **(self.timed.sections() if self.timed else {}),
        }


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


def comparisons(name: str, timed: Rounds, params: Params) -> list[tuple[str, str]]:
    """(comparison, the entry read against A) for one executor: B, the A/A control, each planted."""
    whos = [B] if entry_name(name, B) in timed.entries else []
    whos += [TWIN, *(planted_label(p) for p in params.planted_pct)]
    label = {B: "B vs A", TWIN: "A' vs A (A/A control)"}
    return [(label.get(w, f"{w} vs A"), entry_name(name, w)) for w in whos if entry_name(name, w) in timed.entries]


def metrics_for(device: str) -> tuple[str, ...]:
    """The numbers read against A: host and wall time per step (on a CPU the wall is the host time)."""
    return ("host_ms", "wall_ms") if device.startswith("cuda") else ("host_ms",)


def change_rows(timed: Rounds, params: Params, min_effect: dict) -> list[dict]:
    """The key table: per executor, comparison and metric, the paired change against A."""
    rows = []
    for name in params.executors:
        base = timed.entries.get(entry_name(name, A))
        if base is None:
            continue
        for comparison, other in comparisons(name, timed, params):
            t = timed.entries[other]
            for metric in metrics_for(params.device):
                c = paired.change(
                    metric, getattr(base, metric), getattr(t, metric), base.keep(), t.keep(), min_effect.get(metric, 0)
                )
                error = "; ".join(filter(None, (base.error, t.error)))
                rows.append(change_row(name, comparison, metric, c, error))
    return rows


def change_row(name: str, comparison: str, metric: str, c: paired.Change | None, error: str) -> dict:
    status = "ok" if c and not error else "partial" if c else "failed"
    row = {"executor": name, "comparison": comparison, "metric": metric, "status": status, "reason": error or None}
    if c is None:
        return {**row, "reason": error or "no round with both blocks"}
    return {
        **row,
        "a_ms": c.a,
        "b_ms": c.b,
        "ratio_x": c.ratio,
        "ratio_lo_x": c.lo,
        "ratio_hi_x": c.hi,
        "change_pct": c.change_pct,
        "resolution_pct": 100 * c.resolution,
        "p": c.p,
        "verdict": c.text("B" if comparison == "B vs A" else comparison.split(" vs ")[0]),
        "called": c.called,
        "rounds": c.rounds,
        "fast_only": c.fast_only,
    }


def control_rows(table: list[dict], delays: dict, timed: Rounds) -> list[dict]:
    """Each planted delay's host-time row: the delay planted (µs and % of A's host time in these
    rounds), the change found, the estimate's error in percentage points, and whether it was called."""
    out = []
    for r in table:
        if r["metric"] != "host_ms" or "planted" not in r["comparison"] or r.get("ratio_x") is None:
            continue
        pct = float(r["comparison"].split("+ ")[1].split("%")[0])
        us = delays[r["executor"]][pct]
        planted = 100 * us / (r["a_ms"] * 1e3)
        out.append(
            {
                "executor": r["executor"],
                "comparison": r["comparison"],
                "planted_pct_asked": pct,
                "planted_us": us,
                "planted_pct": planted,
                "found_pct": r["change_pct"],
                "error_pp": r["change_pct"] - planted,
                "detected": r["called"] and r["change_pct"] > 0,
                "verdict": r["verdict"],
            }
        )
    return out


def parts_rows(timed: Rounds, params: Params) -> list[dict]:
    """Per Thunder configuration and in-place part: A' against A (the A/A control), and B against A,
    each paired per round (``paired.difference``). A part of B **moved** when its test calls it and
    its whole interval lies beyond the control's interval for the same part (what two workers of build
    A differ by in this run); the control's own rows show what no change looks like, part by part."""
    rows = []
    for name in params.executors:
        a = timed.entries.get(entry_name(name, A))
        if a is None or "parts" not in a.probes:
            continue
        control = {}
        for other in (TWIN, B):
            b = timed.entries.get(entry_name(name, other))
            if b is None:
                continue
            pa, pb = a.probes["parts"], b.probes["parts"]
            reason = next((x.get("reason") for x in pa + pb if "reason" in x), None)
            if reason:
                rows.append({"executor": name, "against": other, "part": None, "reason": reason})
                continue
            n = min(len(pa), len(pb))
            for part in dict.fromkeys([*pa[0]["us"], *pb[0]["us"]] if n else []):
                d = paired.difference(*([x["us"].get(part, 0.0) for x in side[:n]] for side in (pa, pb)))
                if d is None:
                    continue
                if other == TWIN:
                    control[part] = (d["diff_lo_us"], d["diff_hi_us"])
                else:
                    lo, hi = control.get(part, (0.0, 0.0))
                    d["control_lo_us"], d["control_hi_us"] = lo, hi
                    d["moved"] = d["moved"] and (d["diff_lo_us"] > hi or d["diff_hi_us"] < lo)
                rows.append({"executor": name, "against": other, "part": part, **d})
    return rows


def logits_rows(built: dict, params: Params) -> list[dict]:
    """Per executor, A' and B's first-call logits against A's (``model.compare_to_eager``'s tolerance)."""
    import torch

    def logits(label, name):
        r = built[label][name]
        return torch.frombuffer(bytearray(r["logits"]), dtype=torch.float32).reshape(r["shape"])

    rows = []
    for name in params.executors:
        for who in (TWIN, B):
            if not (usable(built, A, name) and usable(built, who, name)):
                continue
            check = model.compare_to_eager(logits(who, name), logits(A, name), "float32", params.layers)
            check = {**check, "tolerance": model.tolerance(params.dtype, params.layers)}
            check["passed"] = check["rel_err"] is not None and check["rel_err"] <= check["tolerance"]
            rows.append({"executor": name, "against": f"{who} vs A", **check})
    return rows


def kernel_rows(workers: dict[str, Worker], built: dict, params: Params) -> list[dict]:
    """Kernels per step and kernel ms per step of each executor in A and B (the profiler), and B - A."""
    rows = []
    who = [w for w in (A, B) if w in workers]
    for name in params.executors:
        row = {"executor": name}
        for w in who:
            if not usable(built, w, name):
                continue
            try:
                k = workers[w].call("kernels", executor=name, steps=max(3, min(params.iters, 10)))
            except WorkerError as e:
                row[f"{w}_reason"] = str(e)
                continue
            if "reason" in k:
                row["reason"] = k["reason"]
                continue
            row[f"{w.lower()}_kernels_per_step"] = k["kernels_per_step"]
            row[f"{w.lower()}_kernel_ms"] = k["kernel_ms"]
        if "b_kernel_ms" in row and "a_kernel_ms" in row:
            row["diff_kernels_per_step"] = row["b_kernels_per_step"] - row["a_kernels_per_step"]
            row["diff_kernel_us"] = 1e3 * (row["b_kernel_ms"] - row["a_kernel_ms"])
        rows.append(row)
    return rows


def build_rows(workers: list[Worker], hello: dict) -> list[dict]:
    """Per worker: what the build is, python and package versions, and each folder's git state."""
    rows = []
    for w in workers:
        h = hello.get(w.label) or {}
        row = {"worker": w.label, "build": w.build.text(), "python": h.get("python"), "error": h.get("error")}
        for dist, info in (h.get("packages") or {}).items():
            row[dist] = info.get("version") or f"missing ({info.get('error')})"
        row["folders"] = [{"folder": f, "git": builds.git_state(f)} for f in w.build.path]
        row["git"] = "; ".join(git_text(f["folder"], f["git"]) for f in row["folders"] if f["git"]) or None
        rows.append(row)
    return rows


def git_text(folder: str, git: dict) -> str:
    """A folder's git state in a few words: ``lightning-thunder at 1a2b3c4d5e (my-branch, with changes)``."""
    changes = ", with changes" if git["dirty"] else ""
    return f"{Path(folder).name} at {git['commit'][:10]} ({git['branch']}{changes})"


def executor_rows(workers: list[Worker], built: dict, params: Params) -> list[dict]:
    """Per executor and worker: its status and reason (a worker that did not build: its error)."""
    rows = []
    for name in params.executors:
        for w in workers:
            r = built.get(w.label) or {}
            record = r.get(name) or {"status": "failed", "reason": r.get("error") or w.error or "not built"}
            rows.append(
                {
                    "executor": name,
                    "worker": w.label,
                    "status": record["status"],
                    "reason": record.get("reason"),
                    "first_call_s": record.get("first_call_s"),
                }
            )
    return rows


def failed_entries(params: Params, built: dict, workers: dict) -> list[dict]:
    """Key-table rows for what could not be compared: an executor A could not run (one row), else
    each other worker that could not run it, with the reason."""
    rows = []
    for name in params.executors:
        for who in workers:
            if usable(built, who, name):
                continue
            r = (built.get(who) or {}).get(name) or {}
            status = r.get("status") or "failed"
            reason = r.get("reason") or (built.get(who) or {}).get("error") or "not built"
            rows.append(
                {"executor": name, "comparison": f"{who} build", "metric": None, "status": status, "reason": reason}
            )
            if who == A:
                break
    return rows


def differs_text(r: Result) -> str:
    """What the page opens with: what differs between A and B, or that this run has no B."""
    if r.params.build_b is None:
        return (
            "**No build B:** this run times only the controls, two workers of build A and A with a planted delay: "
            "what it could resolve on this machine. `python runner.py ab --b-path FOLDER` adds a B."
        )
    if not r.differs:
        return "**A and B import the same versions from the same folders:** B differs only by its variables."
    return "**What differs between A and B:** " + "; ".join(r.differs) + "."


def findings(r: Result) -> list[str]:
    """Sentences from the tables: what differs, each executor's verdict, the controls, which part moved."""
    out = [differs_text(r)]
    for row in r.table:
        if row["comparison"] == f"{B} build":
            out.append(f"**B could not run {row['executor']}** ({row['status']}): {row['reason']}.")
        elif row["comparison"] == "B vs A" and row["status"] != "ok" and row["metric"] == "host_ms":
            out.append(
                f"**B's {row['executor']} stopped early** ({row['reason']}): its verdict below is from "
                f"{row.get('rounds') or 0} rounds."
            )
    for row in r.table:
        if row["comparison"] == "B vs A" and row.get("ratio_x") is not None:
            out.append(f"**{row['executor']}**, {row['metric'].removesuffix('_ms')} time per step: {row['verdict']}.")
    aa = [x for x in r.table if x["comparison"].startswith("A' vs A") and x.get("ratio_x") is not None]
    false_calls = [x for x in aa if x["called"]]
    if aa:
        called = ", ".join(f"{x['executor']} {x['metric']} ({x['verdict']})" for x in false_calls)
        out.append(
            f"**A/A control:** {len(aa) - len(false_calls)} of {len(aa)} numbers of two workers of build A read "
            "no change"
            + (f"; {called} did not, so this run's verdicts are not to be trusted at that size." if called else ".")
        )
    for c in r.controls:
        out.append(
            f"**Planted {c['planted_pct']:.2g}%** ({c['planted_us']:.3g} µs) in {c['executor']}'s host time: found "
            f"{c['found_pct']:+.2g}% ({c['error_pp']:+.2g} percentage points), "
            + ("detected." if c["detected"] else f"not detected ({c['verdict']}).")
        )
    moved = [p for p in r.parts if p.get("moved") and p["against"] == B]
    if moved:
        out.append(
            "**Parts of B that moved** (in place, paired per round, the whole interval beyond the A/A control's "
            "for the same part): "
            + "; ".join(f"{p['executor']} {p['part']} {p['diff_us']:+.3g} µs" for p in moved)
            + "."
        )
    elif any(p["against"] == B for p in r.parts):
        out.append("No in-place part of B moved beyond its paired interval and the A/A control's for that part.")
    aa = [p for p in r.parts if p["against"] == TWIN and p.get("part")]
    if aa:

        def reach(p):
            return max(abs(p["diff_lo_us"]), abs(p["diff_hi_us"]))

        widest = max(aa, key=reach)
        out.append(
            f"In the A/A control, {sum(bool(p['moved']) for p in aa)} of {len(aa)} in-place parts read moved by "
            f"their test alone (two workers of one build differ part by part; the widest interval, "
            f"{widest['executor']} {widest['part']}, reaches {reach(widest):.3g} µs)"
            + (": a part of B counts only beyond its own A/A interval." if r.params.build_b is not None else ".")
        )
    bad = [x for x in r.logits if not x["passed"]]
    if bad:
        out.append(
            "**Logits differ** beyond the tolerance: "
            + ", ".join(f"{x['executor']} {x['against']} (rel err {number(x['rel_err'])})" for x in bad)
            + "."
        )
    elif r.logits:
        out.append(f"Logits agree with A's within the tolerance for {len(r.logits)} of {len(r.logits)} comparisons.")
    if not r.min_effect:
        out.append(
            "No minimum effect was measured for this kind of machine (min_effect.json): changes are called on the "
            "test and the interval alone."
        )
    return out


class Session:
    """The workers of one run, started and built once (``with Session(params) as s``), their planted
    delays sized against A; ``trial`` times them in a new set of rounds and reads the verdicts, as
    often as asked (``tools/ab_benchmark.py`` runs many trials on one session)."""

    def __init__(self, params: Params):
        self.params = params
        self.cache_root = Path(tempfile.mkdtemp(prefix="latency-lab-ab-"))
        self.workers = workers_for(params, self.cache_root)
        self.by_label = {w.label: w for w in self.workers}
        self.hello, self.built, self.delays = {}, {}, {}

    def __enter__(self) -> Session:
        try:
            self.hello, self.built = start_and_build(self.workers, self.params)
            for w in self.workers:
                print(f"worker {w.label}: {w.build.text()}: {w.error or 'built'}")
            for name in self.params.executors:
                if usable(self.built, A, name) and usable(self.built, TWIN, name):
                    host_ms = calibrate(self.by_label[A], name, self.params)
                    if host_ms:
                        self.delays[name] = {p: p / 100 * host_ms * 1e3 for p in self.params.planted_pct}
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Every worker stopped, the caches removed."""
        for w in self.workers:
            w.stop()
        shutil.rmtree(self.cache_root, ignore_errors=True)

    def trial(self, shuffle: int, min_effect: dict | None = None, extras: bool = True) -> Result:
        """One set of rounds of every entry (``shuffle``: the seed of their order), read against A with
        ``min_effect`` (default: ``min_effect.json``'s for this device); ``extras``: the in-place parts
        and the kernels too."""
        p = self.params
        entries = entries_for(self.by_label, self.built, p, self.delays, parts=extras)
        groups = {e.executor: [x for x in entries if x.executor == e.executor] for e in entries}
        timed = harness.Rounds.merged(
            [harness.rounds(g, p.device, p.warmup, p.iters, p.repeats, shuffle=shuffle) for g in groups.values()]
        )
        effects = paired.min_effects(p.device) if min_effect is None else min_effect
        table = change_rows(timed, p, {k: v for k, v in effects.items() if k in metrics_for(p.device)})
        table += failed_entries(p, self.built, self.by_label)
        hello = self.hello
        both = "packages" in hello.get(B, {}) and "packages" in hello[A]
        result = Result(
            params=p,
            env={},
            builds=build_rows(self.workers, hello),
            differs=builds.differences(hello[A], hello[B]) if both else [],
            table=table,
            controls=control_rows(table, self.delays, timed),
            kernels=kernel_rows(self.by_label, self.built, p) if extras else [],
            parts=parts_rows(timed, p),
            logits=logits_rows(self.built, p),
            executors=executor_rows(self.workers, self.built, p),
            min_effect=effects,
            findings=[],
            timed=timed,
            delays_us=self.delays,
            costs=cost_rows(entries),
        )
        return replace(result, findings=findings(result))


def run(params: Params) -> Result:
    """Start and build the workers, size the planted delays, time every entry in the same rounds,
    then read B and the controls against A (module docstring)."""
    env = environment.collect(params.device)
    print(
        f"device {params.device} · {params.layers} layer(s) · builds A{', B' if params.build_b is not None else ''} "
        f"(and A' of A) · {rounds_text(params)}"
    )
    with Session(params) as session:
        result = replace(session.trial(params.seed), env=env)
    for row in result.table:  # the verdicts in the runner's output too, not only on the page
        if row.get("verdict") and (row["comparison"] == "B vs A" or row["metric"] == "host_ms"):
            say(f"{row['executor']} {row['metric'].removesuffix('_ms')} · {row['comparison']}: {row['verdict']}")
    return result
