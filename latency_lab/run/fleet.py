"""``runner.py --ray [ADDRESS]``: a run's notebooks on a Ray cluster, once per GPU type.

Each selected notebook becomes one Ray task per machine type (the cluster's ``accelerator_type:<T>``
resources, or those ``--accelerators`` names; one untyped "gpu" where the cluster's GPUs name none),
asking for one GPU. On its node the task resolves the parameters (the node's device), records the
node's environment and runs the notebook as a local run does (``notebook_run.execute``, a fresh
compile cache, into a folder of its own), and returns that folder's files as bytes through Ray's
object store. The caller writes them into one run folder per type (``<fleet>/<type>/``, with the
summary and pages of a local run) and the fleet page, ``<fleet>/index.html``: every task's status,
and the types side by side (``compare.many.compare_many``). A task that fails, or whose worker or node
dies, is its row's error and the others finish; Ctrl-C cancels the tasks left and writes what came.
A notebook that reads another's results (``catalog.READS_FROM``) starts after it on the same type.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path

from ..core import catalog, compile_cache, environment, parameters, results
from ..core.parameters import REPO_ROOT, clip, short
from ..pages import html_assets, tables
from . import notebook_run, report
from .compare import command as compare
from .compare import many as compare_many
from .run_folder import SetupError

ACCELERATOR = "accelerator_type:"  # Ray's resource of a node's GPU type (ray.util.accelerators)
UNTYPED = "gpu"  # the folder of a cluster's GPUs where they name no type
TYPE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")  # a type's folder is named after it
DEVICES = ("auto", "cpu", "cuda", "cuda:0")  # each task sees one GPU, as cuda:0
SHARED = (html_assets.PLOTLY_JS, html_assets.NOTEBOOK_CSS)  # written once per folder by the caller
INSTALL = "pip install 'latency-lab[cluster]' (or: python3 tasks.py install --cluster)"
ADDRESSES = (
    "HOST:PORT (a head node's GCS), ray://HOST:PORT (Ray Client), auto (the cluster `ray start` made on this "
    "machine), or none (RAY_ADDRESS, else a cluster running on this machine, else Ray started here)"
)


# --- the caller: options, cluster, tasks ------------------------------------------------------------------


def check_options(args) -> list[str] | None:
    """``--ray``'s options, checked before anything is started: the accelerator types asked for
    (None: every type of the cluster). SetupError naming the option and its allowed values."""
    if args.ray is None:
        for option, value in (("--accelerators", args.accelerators), ("--runtime-env", args.runtime_env)):
            if value is not None:
                raise SetupError(f"invalid {option} {short(value)}: allowed only with --ray [ADDRESS]")
        return None
    if args.cpu_slots != 1:
        raise SetupError(f"--ray and --cpu-slots {args.cpu_slots} disagree: a Ray task runs one notebook on one GPU")
    if args.gpus is not None:
        raise SetupError(
            f"--ray and --gpus {short(args.gpus)} disagree: give one (--gpus: this machine's GPUs side by side; "
            "--ray: one GPU per task, on a Ray cluster)"
        )
    if args.ray.strip() != args.ray:
        raise SetupError(f"invalid --ray {short(args.ray)}: allowed {ADDRESSES}")
    if args.accelerators is None:
        return None
    names = [t.strip() for t in args.accelerators.split(",")]
    allowed = "a comma list of GPU types as Ray names them, e.g. H100,H200,L40S (ray.util.accelerators)"
    if not all(names):
        raise SetupError(f"invalid --accelerators {short(args.accelerators)}: an empty name; allowed {allowed}")
    if bad := [n for n in names if not TYPE_NAME.fullmatch(n)]:
        raise SetupError(f"invalid --accelerators {short(args.accelerators)}: {short(bad[0])}; allowed {allowed}")
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise SetupError(f"invalid --accelerators {short(args.accelerators)}: {', '.join(twice)} given twice")
    return names


def checked_values(values: dict) -> dict:
    """The values the caller checks the input with: the device is the nodes' to resolve (one of
    ``DEVICES``, else SetupError), so a GPU device is checked as the CPU here (the tasks check
    again on their nodes)."""
    device = values.get("device", "auto")
    if device not in DEVICES:
        raise SetupError(
            f"invalid --device {short(device)} with --ray: each task sees one GPU, as cuda:0; allowed "
            f"{', '.join(DEVICES)}"
        )
    return {**values, "device": "cpu"} if device != "cpu" else values


def runtime_env(path: str | None) -> dict | None:
    """``--runtime-env FILE``: a JSON object, Ray's runtime environment for every task."""
    if path is None:
        return None
    try:
        env = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SetupError(f"invalid --runtime-env {short(path)}: {getattr(e, 'strerror', None) or e}") from None
    if not isinstance(env, dict):
        raise SetupError(f"invalid --runtime-env {short(path)}: allowed a JSON object (Ray's runtime_env)")
    return env


def reachable(address: str, timeout: float = 5.0) -> None:
    """SetupError unless something answers at ``HOST:PORT`` (``ray.init`` would wait on it for
    minutes); ``auto`` and a cluster started here are Ray's to find."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if address == "auto":
        return
    if not sep or not host or not port.isdigit():
        raise SetupError(f"invalid --ray {short(address)}: allowed {ADDRESSES}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise SetupError(
            f"invalid --ray {short(address)}: nothing answers there ({e.strerror or e}); allowed {ADDRESSES}"
        ) from None


def connect(args) -> dict:
    """Ray connected to ``--ray``'s cluster (the runner's signal handlers kept), and what it has:
    ``{"address", "types"}``, each type a folder name, its resource name (None: any GPU)."""
    wanted = check_options(args)
    env = runtime_env(args.runtime_env)
    address = args.ray or None  # none: RAY_ADDRESS, else a cluster running here, else Ray started here
    if address:
        reachable(address)
    try:
        import ray
    except ImportError:
        raise SetupError(f"--ray needs Ray, which is not installed: {INSTALL}") from None
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        ray.init(address=address, runtime_env=env, log_to_driver=False, configure_logging=False)
        resources = ray.cluster_resources()
    except Exception as e:  # ConnectionError, RuntimeError, a gRPC error: whatever Ray raises
        raise SetupError(
            f"invalid --ray {short(args.ray)}: Ray could not connect: {type(e).__name__}: "
            f"{clip(str(e).splitlines()[0] if str(e) else '', 200)} (a cluster with token authentication needs "
            "RAY_AUTH_MODE=token here and its token: RAY_AUTH_TOKEN or ~/.ray/auth_token); allowed " + ADDRESSES
        ) from None
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    try:
        return {"address": ray.get_runtime_context().gcs_address, "types": machine_types(resources, wanted, args)}
    except SetupError:
        ray.shutdown()
        raise


def machine_types(resources: dict, wanted: list[str] | None, args) -> dict[str, str | None]:
    """The GPU types to run on: ``wanted`` (each must be the cluster's), else every type the
    cluster has, else one untyped type; each to its folder name (the type)."""
    if resources.get("GPU", 0) < 1:
        raise SetupError(
            f"invalid --ray {short(args.ray)}: the cluster has no GPU (each task asks for one: num_gpus=1)"
        )
    have = sorted(k[len(ACCELERATOR) :] for k in resources if k.startswith(ACCELERATOR))
    if wanted is None:
        return {t: t for t in have if TYPE_NAME.fullmatch(t)} or {UNTYPED: None}
    if missing := [t for t in wanted if t not in have]:
        raise SetupError(
            f"invalid --accelerators {short(args.accelerators)}: the cluster has no {', '.join(missing)}; allowed "
            + (", ".join(have) if have else "none (its GPUs name no type: leave --accelerators out)")
        )
    return {t: t for t in wanted}


def task_error(e: BaseException) -> dict:
    """A task that raised or was lost, as an outcome's error: the notebook's exception for a task
    that raised (``RayTaskError``), else what happened to its worker or node."""
    cause = getattr(e, "cause", None)
    if cause is not None:
        e = cause
    why = {
        "WorkerCrashedError": "the task's worker died (killed, or out of memory)",
        "NodeDiedError": "the task's node died",
        "TaskCancelledError": "the task was cancelled",
    }.get(type(e).__name__)
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return {"cell": None, "cell_index": None, "ename": type(e).__name__, "evalue": f"{why}: {text}" if why else text}


class Fleet:
    """The tasks of one fleet run and the folders they land in: ``types`` (folder -> resource
    type, None for any GPU), the notebooks, and per type its outcomes, environments and resolved
    parameters as they come."""

    def __init__(self, types: dict, notebooks: dict[str, Path], values: dict, fleet_dir: Path, args):
        self.types, self.notebooks, self.values, self.dir, self.args = types, notebooks, values, fleet_dir, args
        self.outcomes = {t: [] for t in types}
        self.environments = {t: {} for t in types}
        self.resolved: dict[str, dict] = {}
        self.running: dict = {}  # ObjectRef -> (type, notebook, index in its outcomes)
        self.waiting = [(t, n) for n in notebooks for t in types]
        self.finished: set[tuple[str, str]] = set()
        self.unwritten: list[str] = []  # pages that could not be written (a full disk), per type
        for t in types:
            (fleet_dir / t).mkdir()
            notebook_run.write_shared_assets(fleet_dir / t)

    def submit_ready(self) -> None:
        """Submit every waiting task whose notebooks to read first (on its type) have finished,
        with their results files."""
        import ray

        for t, name in list(self.waiting):
            reads = [r for r in catalog.READS_FROM.get(name, ()) if r in self.notebooks]
            if not all((t, r) in self.finished for r in reads):
                continue
            inputs = {p.name: p.read_bytes() for r in reads if (p := results.path_for(self.dir / t, r)).is_file()}
            task = ray.remote(run_notebook).options(
                num_gpus=1,
                max_retries=0,  # a lost task is a row that says so, not run again behind the caller's back
                name=f"latency-lab {t} {name}",
                **({"accelerator_type": self.types[t]} if self.types[t] else {}),
            )
            ref = task.remote(
                name,
                self.notebooks[name].read_bytes(),
                self.values,
                inputs,
                self.args.timeout,
                self.args.compile_cache,
                self.types[t],
            )
            self.outcomes[t].append(notebook_run.Outcome(name, status="interrupted", started=time.perf_counter()))
            self.running[ref] = (t, name, len(self.outcomes[t]) - 1)
            self.waiting.remove((t, name))

    def run(self, poll_s: float = 0.5) -> None:
        """Submit, wait and collect until every task has ended; whatever stops it (a signal) leaves
        the running ones in ``running``, for ``cancel``."""
        import ray

        total, done = len(self.waiting), 0
        self.submit_ready()
        while self.running:
            ended, _ = ray.wait(list(self.running), num_returns=1, timeout=poll_s)
            for ref in ended:
                t, name, i = self.running[ref]
                try:
                    self.collect(t, i, ray.get(ref))
                except ray.exceptions.RayError as e:
                    o = self.outcomes[t][i]
                    o.status, o.error, o.seconds = "failed", task_error(e), time.perf_counter() - o.started
                del self.running[ref]
                self.finished.add((t, name))
                done += 1
                o = self.outcomes[t][i]
                detail = "" if o.status == "ok" else f": {notebook_run.error_line(o.error)}"
                where = where_ran(o.gpu, self.environments[t].get(name))
                print(f"[{done}/{total}] {t} {name} {o.status} in {o.seconds:.1f} s{where}{detail}", flush=True)
            self.submit_ready()

    def collect(self, t: str, i: int, got: dict) -> None:
        """A task's return: its files into the type's folder, its outcome, environment and parameters."""
        folder = self.dir / t
        for name, data in got["files"].items():
            results.write_atomic(folder / name, data.decode("utf-8"))
        self.outcomes[t][i] = notebook_run.Outcome(**got["outcome"])
        self.environments[t][self.outcomes[t][i].name] = got["environment"]
        self.resolved.setdefault(t, got["resolved"])
        if not (folder / "environment.json").is_file():
            results.write_atomic(folder / "environment.json", json.dumps(got["environment"], indent=1))

    def cancel(self, reason: str) -> None:
        """The running tasks cancelled (their workers killed, and with them the kernels), each
        marked interrupted by ``reason``."""
        import ray

        for ref, (t, _, i) in self.running.items():
            ray.cancel(ref, force=True)
            o = self.outcomes[t][i]
            o.seconds = time.perf_counter() - o.started
            o.error = {"cell": None, "cell_index": None, "ename": "Interrupted", "evalue": f"{reason}: task cancelled"}
        self.running.clear()

    def finish(self, meta: dict) -> list[dict]:
        """Each type's summary and pages (as a local run's), then the fleet page; the summaries."""
        from .scheduler import in_order

        summaries = []
        for t in self.types:
            outcomes = in_order(list(self.notebooks), self.outcomes[t])
            env = next(iter(self.environments[t].values()), None)
            type_meta = {
                **meta,
                "run_id": f"{self.dir.name}/{t}",
                "parameters": {"given": self.values, "resolved": self.resolved.get(t) or {}},
                "environment": env,
                "environments": self.environments[t],
                "ray": {"address": meta["ray"]["address"], "accelerator_type": self.types[t]},
            }
            summary = report.summarize(self.dir / t, type_meta, outcomes)
            self.unwritten += [f"{t}/{page}" for page in report.write(self.dir / t, summary)]
            summaries.append(summary)
        page = fleet_page(self.dir, list(self.types), summaries, meta)
        results.write_atomic(self.dir / "index.html", page["html"])
        results.write_atomic(self.dir / "fleet.json", json.dumps(page["data"], indent=1, default=str))
        return summaries


def where_ran(gpu: str | None, env: dict | None) -> str:
    """`` · GPU 0 · on host`` (``scheduler.ran_on`` and the task's node); "" where the task never ran."""
    from .scheduler import ran_on

    host = ((env or {}).get("ray") or {}).get("host")
    return "".join(f" · {x}" for x in (ran_on(gpu), host and f"on {host}") if x)


def fleet_page(fleet_dir: Path, types: list[str], summaries: list[dict], meta: dict) -> dict:
    """The fleet page's HTML and its data: each task's status, then the types that wrote results
    side by side (``compare.many.compare_many``: the first such type is A)."""
    from markupsafe import Markup

    runs, skipped = [], []
    for t in types:
        try:
            runs.append(compare.load_run(fleet_dir / t))
        except compare.CompareError as e:
            skipped.append(f"{t}: {e}")
    try:
        report_ = compare_many.compare_many(runs) if runs else None
    except compare.CompareError as e:  # a type with no notebook in common with A
        report_, skipped = None, [*skipped, str(e)]
    by_type = dict(zip(types, summaries))
    rows = []
    for i, name in enumerate(n["name"] for n in summaries[0]["notebooks"]):
        cells = [name]
        for t in types:
            n = by_type[t]["notebooks"][i]
            text = Markup('<a href="{}/index.html"><span class="status">{}</span></a> {} s').format(
                t, n["status"], tables.number(n["seconds"])
            )
            where = where_ran(n.get("gpu"), (by_type[t].get("environments") or {}).get(n["name"]))
            error = notebook_run.error_line(n.get("error"))
            text += where + (f" · {error}" if error else "")
            cells.append(tables.Cell(text, n["status"].replace(" ", "-")))
        rows.append(cells)
    status = tables.html_table(rows, ["notebook", *types], "Every task: status, time, where it ran")
    title = f"latency-lab fleet {fleet_dir.name}: {', '.join(types)}"
    empty = {
        "runs": [],
        "notebooks": [],
        "ran_on": [],
        "parameters": [],
        "environment": [],
        "skipped": [],
        "tallies": [],
        "seed_tables": [],
        "rows": [],
    }
    shown = report_ or empty
    shown = {**shown, "skipped": [*skipped, *shown["skipped"]]}
    data = {
        **{
            k: meta[k]
            for k in ("run_id", "started", "command", "seconds", "interrupted", "stopped", "ray")
            if k in meta
        },
        "types": types,
        "tasks": [
            {"type": t, **{k: n[k] for k in ("name", "status", "seconds", "gpu", "error")}}
            for t, sm in zip(types, summaries)
            for n in sm["notebooks"]
        ],
        "compare": shown,
    }
    return {"html": compare_many.many_html(shown, title, status), "data": data}


# --- the task, on its node ---------------------------------------------------------------------------------


def run_notebook(
    name: str, source: bytes, values: dict, inputs: dict, timeout: int, cache_mode: str, accelerator: str | None
) -> dict:
    """One notebook on this node, as a local run runs it: the parameters resolved here (the node's
    device), the environment recorded, the notebook executed into a folder of its own (with the
    results files it reads, ``inputs``) with a fresh compile cache (``cache_mode`` "run"); returns
    that folder's files as bytes, the outcome, environment and resolved parameters."""
    import ray

    from ..core import harness

    work = Path(tempfile.mkdtemp(prefix=f"latency-lab-ray-{name}-"))
    try:
        path, run_dir = work / "notebooks" / f"{name}.ipynb", work / "run"
        path.parent.mkdir()
        run_dir.mkdir()
        path.write_bytes(source)
        for file, data in inputs.items():
            (run_dir / file).write_bytes(data)
        params = parameters.validate(values)
        harness.set_threads(params)
        environment.quiet_known_noise()
        gpus = ",".join(str(g) for g in ray.get_gpu_ids())
        env = {
            **environment.collect(params.device),
            "ray": {
                "node_id": ray.get_runtime_context().get_node_id(),
                "host": platform.node(),
                "gpu_ids": gpus,
                "accelerator_type": accelerator,
            },
        }
        results.write_atomic(run_dir / "environment.json", json.dumps(env, indent=1))
        injected = {**notebook_run.injected_parameters(name, values, path), "output_dir": str(run_dir)}
        cache = compile_cache.make(name) if cache_mode == "run" else None
        kernels = {
            **compile_cache.environment(cache),
            results.RUN_DIR: str(run_dir),
            # the kernel imports the latency_lab this task runs (a runtime env's working_dir too)
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        }
        try:
            with notebook_run.kernel_environment(kernels):
                outcome = notebook_run.execute(path, run_dir, injected, notebook_run.kernel_name(), timeout, False)
        finally:
            if cache:
                compile_cache.close(cache)
        outcome.gpu = "cpu" if params.device == "cpu" else gpus or "?"  # as a local run records it
        files = {
            p.name: p.read_bytes()
            for p in run_dir.iterdir()
            if p.is_file() and p.name not in SHARED and p.name not in inputs and not p.name.endswith(".tmp")
        }
        resolved = json.loads(json.dumps(params.to_dict(), default=str))
        return {"outcome": dataclasses.asdict(outcome), "files": files, "environment": env, "resolved": resolved}
    finally:
        shutil.rmtree(work, ignore_errors=True)
