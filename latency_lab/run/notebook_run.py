"""Running the suite's notebooks headlessly: discovery, parameter inspection, papermill execution in
a real kernel, and nbconvert HTML. Used by ``runner.py`` and the tests."""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, TextIO

from ..core import catalog, parameters, progress, results
from ..core.parameters import EVERY_NOTEBOOK, REPO_ROOT, clip, short

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
STOPPED = "latency-lab-stopped"  # the tag of the cell that says where a cut notebook stopped (``mark_stop``)


@dataclass
class Outcome:
    """What running one notebook produced."""

    name: str
    status: str = "pending"  # ok / failed / interrupted (cut by a signal; also while it runs) / not run
    seconds: float = 0.0  # executing it: the kernel's start and every cell
    error: dict | None = None
    files: dict = field(default_factory=dict)
    gpu: str | None = None  # "cpu", or the GPU as CUDA_VISIBLE_DEVICES names it (runner.py --gpus)
    cpus: list[int] | None = None  # the CPU cores its kernel was pinned to, side by side
    started: float | None = None  # time.perf_counter() when it started, for the seconds of a cut one
    html_seconds: float = 0.0  # rendering the executed notebook as HTML, after


@contextmanager
def kernel_environment(values: dict[str, str | None]) -> Iterator[None]:
    """Environment variables the kernels started meanwhile inherit (None: unset); the previous
    values are back afterwards, whatever happens."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass
class Heard:
    """What ``forwarded_progress`` heard last: the step running, the last progress line said in the
    cell running now (None before one and once that cell ended)."""

    step: str | None = None


HEARD = Heard()  # the notebook running under forwarded_progress, or the last one that did


@contextmanager
def forwarded_progress(out: TextIO, indent: str = "    ", every: float = 0.2) -> Iterator[None]:
    """Meanwhile, the progress lines of the kernels started (``progress.say``) printed to ``out`` as
    they come, each indented and flushed (a pipe too), the last one kept as ``HEARD.step`` (until
    its cell ends); at the end, the last of them before it returns."""
    done, name, thread = threading.Event(), None, None
    HEARD.step = None

    def pump(fd: int) -> None:
        with open(fd, encoding="utf-8", errors="replace") as f:
            pending = ""
            while True:
                last = done.is_set()
                pending += f.read()
                *lines, pending = pending.split("\n")
                try:
                    for line in lines:
                        HEARD.step = None if line == progress.CELL_END else line
                        if HEARD.step is not None:
                            print(indent + line, file=out, flush=True)
                except (OSError, ValueError):  # the output gone (a hang-up, a closed pipe)
                    return
                if last:
                    return
                done.wait(every)

    try:  # made inside the try: a signal right after it (the runner's Ctrl-C) still removes the file
        fd, name = tempfile.mkstemp(prefix="latency-lab-progress-", suffix=".txt")
        thread = threading.Thread(target=pump, args=(fd,), name="progress", daemon=True)
        thread.start()
        with kernel_environment({progress.FILE: name}):
            yield
    finally:
        done.set()
        if thread is not None and thread.ident is not None:
            thread.join(5)
        elif name is not None:
            os.close(fd)
        if name is not None:
            Path(name).unlink(missing_ok=True)


def discover(notebook_dir: Path = NOTEBOOK_DIR) -> dict[str, Path]:
    """``{"01_model_setup": path, ...}`` in order."""
    return {p.stem: p for p in sorted(Path(notebook_dir).glob("[0-9][0-9]_*.ipynb"))}


def select(available: dict[str, Path], wanted: str | None) -> dict[str, Path]:
    """Notebooks named by a comma list of numbers (``01,03``) or names; None means all."""
    if not wanted:
        return available
    chosen = {}
    for token in (t.strip() for t in wanted.split(",") if t.strip()):
        match = [n for n in available if n == token or n.split("_", 1)[0] == token.zfill(2)]
        if not match:
            allowed = ", ".join(n.split("_", 1)[0] for n in available)
            raise ValueError(
                f"invalid --notebooks entry {short(token)}: allowed {allowed} (or full names: {', '.join(available)})"
            )
        chosen[match[0]] = available[match[0]]
    return dict(sorted(chosen.items()))


def declared_parameters(path: Path) -> dict[str, dict]:
    """The notebook's ``parameters`` cell, as papermill reads it: name -> {default, help, ...}."""
    import papermill

    return papermill.inspect_notebook(str(path))


def declared_names(path: Path) -> list[str]:
    """The parameters a notebook takes: its parameters cell's names and ``parameters.EVERY_NOTEBOOK``."""
    names = list(declared_parameters(path))
    return names + [n for n in EVERY_NOTEBOOK if n not in names]


def injected_parameters(name: str, values: dict, path: Path) -> dict:
    """What a run injects into notebook ``name``: every parameter its cell declares and any of its own
    defaults (its catalog entry's), resolved from ``values`` and the package alone
    (``parameters.for_notebook``), as papermill literals (tuples as lists), so an edited parameters cell never
    changes a batch run. An undeclared ``EVERY_NOTEBOOK`` parameter goes in when given (else the notebook's
    setup resolves the same default itself)."""
    entry = catalog.entry(name)
    names = {
        *declared_parameters(path),
        *entry.defaults,
        *entry.cpu_defaults,
        *(n for n in EVERY_NOTEBOOK if n in values),
    }
    given = parameters.for_notebook(name, values).to_dict()
    return {n: list(v) if isinstance(v, tuple) else v for n, v in given.items() if n in names}


def kernel_name() -> str:
    """The suite's registered kernel (``tasks.py install`` registers it), else the default python3."""
    from jupyter_client.kernelspec import KernelSpecManager

    return "latency-lab" if "latency-lab" in KernelSpecManager().find_kernel_specs() else "python3"


class _SaidByTheRunner(logging.Filter):
    """papermill's log (nbclient logs through it) without the line a dead kernel makes it print: the
    outcome says what stopped the notebook, where and after how long (``stop_line``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Kernel died while waiting for execute reply" not in record.getMessage()


logging.getLogger("papermill").addFilter(_SaidByTheRunner())


def execute(path: Path, run_dir: Path, injected: dict, kernel: str, timeout: int | None, progress_bar: bool) -> Outcome:
    """Execute one notebook into ``run_dir`` with the ``injected`` parameters and render its HTML; a failure
    is kept, not raised."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    outcome = Outcome(path.stem)
    executed = run_dir / path.name
    start, cut_short = time.perf_counter(), False
    try:
        # No widget state in the saved notebook: a headless run has no one to click its widgets, and
        # plotly's FigureWidget state carries its whole JavaScript bundle (5 MB) into ipynb and HTML.
        # The kernel is stopped at once when the notebook ends: a graceful shutdown of a kernel still busy
        # in a timed-out cell makes it print a zmq traceback as it answers on a closed socket. It keeps no
        # IPython history: nobody reads a headless run's back, and on a full disk it prints a traceback.
        # Its log shows errors only: the kernel listens on localhost, and its warning that TCP is not
        # encrypted would otherwise interleave every notebook's progress line.
        papermill.execute_notebook(
            str(path),
            str(executed),
            parameters=injected,
            kernel_name=kernel,
            cwd=str(path.parent),
            progress_bar=progress_bar,
            execution_timeout=timeout,
            store_widget_state=False,
            shutdown_kernel="immediate",
            extra_arguments=["--HistoryManager.enabled=False", "--IPKernelApp.log_level=ERROR"],
        )
        outcome.status = "ok"
    except PapermillExecutionError as e:  # papermill marks the cell and its error in the notebook
        outcome.status = "failed"
        outcome.error = {
            "cell": e.exec_count,
            "cell_index": e.cell_index,
            "first_line": first_line(e.source),
            "ename": e.ename,
            "evalue": e.evalue,
        }
    except Exception as e:  # kernel death, timeouts, bad notebooks: the run goes on
        outcome.status, cut_short = "failed", True
        outcome.error = {**stopped_in(executed), "ename": type(e).__name__, "evalue": str(e)}
    outcome.seconds = time.perf_counter() - start
    if executed.exists():
        outcome.files["ipynb"] = executed.name
        try:
            if cut_short:
                mark_stop(executed, outcome)
            rendering = time.perf_counter()
            outcome.files["html"] = to_html(executed).name
            outcome.html_seconds = time.perf_counter() - rendering
        except Exception as e:  # the executed notebook and its results stay; the run goes on
            outcome.status = "failed"
            outcome.error = outcome.error or {
                "cell": None,
                "cell_index": None,
                "ename": "HTMLExportError",
                "evalue": f"{type(e).__name__}: {e}",
            }
    return outcome


def last_started_cell(executed: Path) -> dict:
    """The cell papermill started last (where a kernel died, a cell timed out or a signal cut the
    run): its execution count, index and first line, from the notebook papermill writes as it goes;
    None where unknown. A code cell whose count the notebook did not record (a kernel that died in it
    first) has the kernel's next one: one more than the cells' before it (papermill runs them in turn)."""
    import nbformat

    unknown = {"cell": None, "cell_index": None, "first_line": None}
    try:
        cells = nbformat.read(executed, as_version=4).cells
    except Exception:  # no notebook written yet
        return unknown
    started = [i for i, c in enumerate(cells) if c.get("metadata", {}).get("papermill", {}).get("start_time")]
    if not started:
        return unknown
    index = started[-1]
    cell, count = cells[index], cells[index].get("execution_count")
    if count is None and cell.cell_type == "code":
        count = max((c.get("execution_count") or 0 for c in cells[:index] if c.cell_type == "code"), default=0) + 1
    return {"cell": count, "cell_index": index, "first_line": first_line(cell.source)}


def stopped_in(executed: Path) -> dict:
    """Where a notebook cut short stopped: its last started cell (``last_started_cell``) and, where
    its kernel said one there, the step running (``HEARD``)."""
    return {**last_started_cell(executed), **({"step": HEARD.step} if HEARD.step else {})}


def first_line(source: str) -> str:
    """A cell's first line that is not blank, shortened (``clip``)."""
    return clip(next((line.strip() for line in source.splitlines() if line.strip()), ""))


def error_line(error: dict | None) -> str:
    """One line for an outcome's error: where (cell), what, the message, the step running (where
    known) and the cell's first line."""
    if not error:
        return ""
    where = (
        f"cell {error['cell']}: "
        if error.get("cell") is not None
        else f"cell index {error['cell_index']}: "
        if error.get("cell_index") is not None
        else ""
    )
    step = f"; the step running: {error['step']}" if error.get("step") else ""
    first = f"; the cell's first line: {error['first_line']}" if error.get("first_line") else ""
    return f"{where}{error.get('ename')}: {one_line(str(error.get('evalue')))[:300]}{step}{first}"


TIMEOUT_PREVIEW = "Here is a preview of the cell contents:"  # nbclient's CellTimeoutError message


def one_line(message: str) -> str:
    """An error message as one line; nbclient's timeout message without the preview of its cell's
    source (the error's ``first_line`` names the cell)."""
    head, preview, _ = message.partition(TIMEOUT_PREVIEW)
    return " ".join((head.strip().rstrip(".") if preview else message).split())


def stop_line(outcome: Outcome) -> str:
    """Where and why a notebook stopped short, as its marker cell says it (``mark_stop``)."""
    return f"The notebook stopped here, after {outcome.seconds:.1f} s: {error_line(outcome.error)}"


def mark_stop(executed: Path, outcome: Outcome) -> None:
    """Into the executed notebook cut short (a dead kernel, a timeout, a signal), right after the cell
    it stopped in (first, where no cell started), a cell tagged ``STOPPED`` that says so: what stopped
    it, in which cell, after how many seconds (``stop_line``, from the outcome the index shows too)."""
    import html

    import nbformat

    nb = nbformat.read(executed, as_version=4)
    said = f"<b>{html.escape(stop_line(outcome))}</b><br>The cells below did not run."
    cell = nbformat.v4.new_markdown_cell(f'<div class="alert alert-danger">{said}</div>')
    cell.metadata["tags"] = [STOPPED]
    index = outcome.error.get("cell_index")
    nb.cells.insert(0 if index is None else index + 1, cell)
    results.write_atomic(executed, nbformat.writes(nb))


def cut(outcome: Outcome, run_dir: Path, reason: str) -> Outcome:
    """A notebook the run was interrupted in (``reason``: the signal): the seconds it ran, the cell
    and step it was in, and its partly executed notebook, marked where it stopped (``mark_stop``),
    and that notebook's HTML (where they can be made) in its files; ``cut_line`` printed."""
    if outcome.started is not None:
        outcome.seconds = time.perf_counter() - outcome.started
    executed = run_dir / f"{outcome.name}.ipynb"
    outcome.error = {**stopped_in(executed), "ename": "Interrupted", "evalue": reason}
    if executed.is_file():
        outcome.files["ipynb"] = executed.name
        try:
            mark_stop(executed, outcome)
            outcome.files["html"] = to_html(executed).name
        except Exception:  # a notebook cut while papermill wrote it: the ipynb is what there is
            pass
    try:
        print(cut_line(outcome, run_dir), flush=True)
    except OSError:  # the terminal is gone (a hang-up): the run folder says it
        pass
    return outcome


def cut_line(outcome: Outcome, run_dir: Path) -> str:
    """One line for a notebook cut by a signal: what stopped what, where (cell, step or the cell's
    first line), after how long, and its partial outputs."""
    e = outcome.error
    cell = f" in cell {e['cell']}" if e.get("cell") is not None else ""
    what = f"the step running: {e['step']}" if e.get("step") else e.get("first_line")
    where = f"{cell} ({what})" if what else cell
    files = ", ".join(str(run_dir / f) for f in outcome.files.values()) or "none"
    return (
        f"{clip(one_line(str(e['evalue'])), 120)} stopped {outcome.name}{where} after {outcome.seconds:.1f} s; "
        f"its partial outputs: {files}"
    )


def kill_children() -> None:
    """Kill every process this one started (the notebooks' kernels), after an interrupt, and remove
    the connection files of the kernels killed (``-f FILE`` on their command line), which their
    managers, cut short, leave in the temp folder."""
    import psutil

    children = psutil.Process().children(recursive=True)
    connection_files = []
    for child in children:
        try:
            cmd = child.cmdline()
            if any("ipykernel" in arg for arg in cmd):
                connection_files += [cmd[i + 1] for i, arg in enumerate(cmd[:-1]) if arg == "-f"]
            child.kill()
        except psutil.Error:  # gone meanwhile
            pass
    psutil.wait_procs(children, timeout=5)
    for f in connection_files:
        Path(f).unlink(missing_ok=True)


def settle_event_loop(timeout: float = 10) -> None:
    """After an interrupt killed the kernels: cancel and await the tasks papermill's event loop still
    holds, as ``asyncio.run`` does at its end (left pending, they would run again in nbclient's
    clean-up at exit), and keep the loop from reporting a task's "Kernel died" that nobody took: the
    run killed that kernel itself, and the report would end the run's output with a traceback."""
    import asyncio

    from jupyter_core.utils import ensure_event_loop
    from nbclient.exceptions import DeadKernelError

    def report(loop, context) -> None:
        if not isinstance(context.get("exception"), (DeadKernelError, asyncio.CancelledError)):
            loop.default_exception_handler(context)

    loop = ensure_event_loop()
    loop.set_exception_handler(report)
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.wait(pending, timeout=timeout))


def to_html(executed: Path) -> Path:
    """nbconvert's HTML (lab template) beside the executed notebook; its plotly figures are drawn by
    the run folder's shared ``plotly.packed.js`` and it links the shared ``notebook.css`` (both written
    there if missing)."""
    import nbformat

    from ..pages import html_assets

    nb = nbformat.read(executed, as_version=4)
    html_assets.plotly_outputs_to_html(nb)
    exporter = html_exporter()
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": executed.stem}})
    write_shared_assets(executed.parent, exporter)
    return results.write_atomic(executed.with_suffix(".html"), body)


def html_exporter():
    """nbconvert's HTML exporter, lab template, with the suite's template over it."""
    import jinja2
    from nbconvert import HTMLExporter

    from ..pages import html_assets

    return HTMLExporter(
        template_name="lab",
        template_file="latency_lab.html.j2",
        extra_loaders=[jinja2.DictLoader({"latency_lab.html.j2": html_assets.NOTEBOOK_TEMPLATE})],
    )


def write_shared_assets(folder: Path, exporter=None) -> None:
    """The run folder's ``plotly.packed.js`` and ``notebook.css``, written if missing (before
    notebooks run side by side, so that no two of them write one at the same time)."""
    from ..pages import html_assets

    html_assets.ensure_plotly_js(folder)
    html_assets.ensure_notebook_css(folder, (exporter or html_exporter()).environment)
