"""JupyterLab: the server from this environment lists the notebooks, runs the suite's kernel (and the
explorer's Run button in it), opens at the start page, and in headless Chromium: an edited and
autosaved parameters cell changes neither the next batch run nor what git stores; the explorer's
Stop ends a run within one call and a reloaded page shows the chart again. Also runner.py started by
a Python outside the .venv."""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, Page, chromium_dom, chromium_page, run_runner, stop

import tasks
from latency_lab.core import catalog
from latency_lab.core import parameters as P
from latency_lab.run import start_page

KERNEL = "latency-lab"


def needs_jupyterlab() -> None:
    """Skip where JupyterLab is not installed (the GPU bundle has none); in CI it must be."""
    if importlib.util.find_spec("jupyterlab") is None:
        if os.environ.get("CI"):
            pytest.fail("jupyterlab is missing from this environment (pyproject.toml installs it)")
        pytest.skip("jupyterlab is not installed in this environment")


class Server:
    def __init__(self, port: int, token: str):
        self.base, self.token = f"http://127.0.0.1:{port}", token

    def url(self, path: str) -> str:
        return f"{self.base}{path}{'&' if '?' in path else '?'}token={self.token}"

    def api(self, path: str, method: str = "GET", body: dict | None = None, timeout: float = 30):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.url(path), data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read().decode()
            return json.loads(text) if text else None


@contextmanager
def running_lab(folder: Path, home: Path, start: str | None = None, settings: dict | None = None):
    """JupyterLab as ``tasks.py lab`` starts it (its arguments and config path), from this environment,
    on ``folder`` with front page ``start``, on a localhost port the OS picks (read back from the
    server's info file: no other test or xdist worker can take it in between) with a token;
    ``settings``: Lab setting defaults per plugin on top of the project's. Killed on exit."""
    needs_jupyterlab()
    token = secrets.token_hex(16)
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = tasks.lab_environment(
        {
            **os.environ,
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / "ws"),
            "PYTHONPATH": python_path,
        }
    )
    if settings:
        (home / "config" / "labconfig").mkdir(parents=True)
        (home / "config" / "labconfig" / "default_setting_overrides.json").write_text(json.dumps(settings))
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(home / "config"), env["JUPYTER_CONFIG_PATH"]])
    log_path = home / "server.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                *tasks.lab_args(folder, start),
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: Run All on the notebook
                "--ServerApp.port=0",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={token}",
            ],
            cwd=home,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        info, server = home / "runtime" / f"jpserver-{proc.pid}.json", None
        try:
            deadline = time.monotonic() + 120
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
                try:
                    server = server or Server(json.loads(info.read_text())["port"], token)
                    server.api("/api/status", timeout=5)
                    break
                except (OSError, ValueError):  # no info file yet, or half written; or no answer yet
                    if time.monotonic() > deadline:
                        pytest.fail(f"jupyter lab did not answer in 120 s:\n{log_path.read_text()[-3000:]}")
                    time.sleep(0.5)
            yield server
        finally:
            stop(proc)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The server ``tasks.py lab`` starts, on notebooks/."""
    with running_lab(ROOT / "notebooks", tmp_path_factory.mktemp("jupyter")) as server:
        yield server


def tiny_explorer_cell(nb, output_dir: Path) -> None:
    """Make the explorer notebook's parameters tiny, CPU, eager (an edit, as a user makes one)."""
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += f'\npreset, device, executors, output_dir = "tiny", "cpu", "eager", {str(output_dir)!r}'


def execute(server: Server, kernel_id: str, code: str, timeout: float = 300) -> str:
    """Run ``code`` in the kernel through the server's websocket; its stdout (complete once the
    kernel is idle again), or fail with its error."""
    import websocket
    from jupyter_client.session import Session

    ws = websocket.create_connection(
        server.url(f"/api/kernels/{kernel_id}/channels").replace("http", "ws", 1), timeout=timeout
    )
    try:
        msg = Session().msg(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": False,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
        )
        msg["channel"] = "shell"
        ws.send(json.dumps(msg, default=str))
        out, replied, idle, deadline = [], False, False, time.monotonic() + timeout
        while time.monotonic() < deadline and not (replied and idle):
            reply = json.loads(ws.recv())
            if reply.get("parent_header", {}).get("msg_id") != msg["header"]["msg_id"]:
                continue
            kind, content = reply["msg_type"], reply["content"]
            if kind == "stream" and content["name"] == "stdout":
                out.append(content["text"])
            elif kind == "error":
                pytest.fail(f"kernel error: {content['ename']}: {content['evalue']}")
            elif kind == "execute_reply":
                assert content["status"] == "ok", content
                replied = True
            idle = idle or (kind == "status" and content["execution_state"] == "idle")
        if replied and idle:
            return "".join(out)
        pytest.fail(f"no execute_reply within {timeout} s")
    finally:
        ws.close()


def test_server_lists_notebooks_and_runs_the_suite_kernel(lab):
    listed = {item["name"] for item in lab.api("/api/contents")["content"]}
    assert {"00_explorer.ipynb", "01_model_setup.ipynb", "02_executor_timing.ipynb"} <= listed
    specs = lab.api("/api/kernelspecs")["kernelspecs"]
    if KERNEL not in specs:
        pytest.fail(
            f"kernelspec {KERNEL!r} is not registered in this environment ({', '.join(specs)}): "
            "python3 tasks.py install registers it"
        )
    kernel = lab.api("/api/kernels", "POST", {"name": KERNEL})
    try:
        out = execute(
            lab, kernel["id"], "import latency_lab, ipywidgets\nprint(latency_lab.__file__, ipywidgets.__version__)"
        )
        path, widgets = out.split()[-2:]
        assert Path(path).resolve().is_relative_to(ROOT.resolve()) and widgets.startswith("8.")
        # The explorer's Run button, clicked in the real kernel: a tiny CPU measurement, then a bad setting.
        out = execute(
            lab,
            kernel["id"],
            "\n".join(
                [
                    "import tempfile",
                    "from latency_lab import explorer as X",
                    "from latency_lab.core import parameters as P",
                    "p = P.validate(preset='tiny', device='cpu', executors='eager')",
                    "ui = X.ExplorerUI(X.Explorer(tempfile.mkdtemp()), p, '/dev/null')",
                    "ui.run_button.click(); ui.worker.join()",
                    "ui.layers.min, ui.layers.value = 0, 0",
                    "ui.run_button.click(); ui.worker.join()",
                    "row = ui.explorer.runs[0]['rows'][0]",
                    "print('RESULT', row['status'], row['wall_ms'] > 0, ui.status.value)",
                ]
            ),
        )
        result = next(line for line in out.splitlines() if line.startswith("RESULT"))
        assert result.startswith("RESULT ok True") and "invalid parameter layers=0" in result, out
    finally:
        lab.api(f"/api/kernels/{kernel['id']}", "DELETE")


def test_lab_opens_at_the_start_page(tmp_path):
    """``tasks.py lab``'s front page: the Lab shell on the project, the start page rendered (Markdown
    preview, the project's Lab config), the notebooks in order with what each answers."""
    project = tmp_path / "project"
    (project / "notebooks").mkdir(parents=True)
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        shutil.copy(path, project / "notebooks")
    start_page.write(project / tasks.START_PAGE)
    with running_lab(project, tmp_path, start=tasks.START_PAGE) as server:
        dom = chromium_dom(server.url("/"), tmp_path / "profile", budget_ms=30000)
    assert "jp-LabShell" in dom, dom[-2000:]
    heading = re.search(r"<h1[^>]*>(<span[^>]*></span>)?latency-lab: start here", dom)  # rendered, not source
    assert heading, "the start page did not open, or not rendered"
    rendered = dom[heading.start() :]
    links = re.findall(r'<a href="[^"]*/files/notebooks/([0-9][0-9]_[a-z_]+\.ipynb)', rendered)  # Lab opens these
    assert links == sorted(p.name for p in (project / "notebooks").glob("*.ipynb")), links
    assert html.escape(catalog.entry("05_host_overhead").question, quote=False) in rendered


WIDGET_BUTTON = "[...document.querySelectorAll('.jupyter-widgets button')].find(b => b.textContent.trim() == 'Run')"
PANEL = "[...window.jupyterapp.shell.widgets('main')].find(w => w.sessionContext && w.content)"  # the notebook's panel
KERNEL_IDLE = f"(() => {{ const k = {PANEL}?.sessionContext?.session?.kernel; return !!k && k.status == 'idle'; }})()"
RUN_OUTCOME = f"""(() => {{
    const panel = {PANEL};
    const cells = panel.content.widgets.filter(c => c.model.type == 'code');
    const errors = cells.flatMap(c => [...Array(c.model.outputs.length).keys()]
        .map(i => c.model.outputs.get(i).toJSON()).filter(o => o.output_type == 'error')
        .map(o => o.ename + ': ' + o.evalue));
    if (errors.length) return errors.join('\\n');
    const idle = panel.sessionContext.session?.kernel?.status == 'idle';
    return idle && cells.every(c => c.model.executionCount) ? 'done' : null;
}})()"""  # 'done', the error outputs' lines, or null while Run All goes on
CELLS_STARTED = (
    "[...document.querySelectorAll('.jp-Notebook .jp-InputPrompt')].some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))"
)


def run_all_cells(page: Page, log: Path) -> None:
    """Lab's own Run All on the notebook's panel (named by id: no keyboard focus or current widget
    needed), once its kernel is idle; asked again if no cell has started within a minute."""
    page.wait(f"!!(window.jupyterapp && {PANEL})", 120, "the notebook panel in the Lab app object", log)
    page.wait(KERNEL_IDLE, 180, "idle kernel of the notebook", log)
    for _ in range(3):
        page.js(f"window.jupyterapp.commands.execute('notebook:run-all-cells', {{widgetId: {PANEL}.id}})")
        if page.poll(CELLS_STARTED, 60):
            return
    page.wait(CELLS_STARTED, 1, "cell started by Run All", log)


WIDGET_TEXTS = "[...document.querySelectorAll('.jupyter-widgets .widget-html-content')].map(e => e.textContent)"
CHART_TRACES = (
    "Math.max(0, ...[...document.querySelectorAll('.jupyter-widgets .js-plotly-plot')].map(p => (p.data || []).length))"
)
TABLE_ROWS = "[...document.querySelectorAll('.jupyter-widgets table.latency-lab')][0]?.querySelectorAll('tr').length"


def set_widget_number(page: Page, label: str, value: int) -> None:
    """Type ``value`` into the widget input labelled ``label`` (a change event, as on leaving the field)."""
    page.js(f"""(() => {{
        const box = [...document.querySelectorAll('.jupyter-widgets.widget-inline-hbox')]
            .find(b => b.querySelector('label')?.textContent.trim() == {json.dumps(label)});
        const input = box.querySelector('input');
        input.value = '{value}';
        input.dispatchEvent(new Event('change', {{bubbles: true}}));
    }})()""")


def click_widget_button(page: Page, text: str) -> None:
    page.js(
        f"[...document.querySelectorAll('.jupyter-widgets button')]"
        f".find(b => b.textContent.trim() == {json.dumps(text)}).click()"
    )


def test_explorer_stop_and_reload_in_jupyterlab(tmp_path):
    """JupyterLab in headless Chromium: the explorer notebook (tiny preset, CPU, eager) Run All: the
    widgets show its own run. Then a run of 100,000 calls per block, stopped in its wall-time blocks:
    it ends within a call (seconds, where it would take minutes) and says so. Saved and reloaded,
    the page shows the chart (one bar group) and the table again, from the kernel's widget state."""
    folder = tmp_path / "lab"
    folder.mkdir()
    nb = nbformat.read(ROOT / "notebooks" / "00_explorer.ipynb", as_version=4)
    tiny_explorer_cell(nb, tmp_path / "out")
    nbformat.write(nb, folder / "explorer.ipynb")
    log = tmp_path / "server.log"
    with running_lab(folder, tmp_path) as server, chromium_page(tmp_path / "profile") as page:
        page.call("Page.navigate", url=server.url("/lab/tree/explorer.ipynb"))
        page.wait("document.querySelectorAll('.jp-Notebook .jp-Cell').length >= 3", 180, "notebook cells", log)
        run_all_cells(page, log)
        page.wait(
            f"{WIDGET_TEXTS}.some(t => /^run 1: .* executor\\(s\\) in/.test(t))", 300, "the notebook's own run", log
        )
        page.wait(KERNEL_IDLE, 120, "idle kernel after Run All", log)
        set_widget_number(page, "calls / block", 100_000)
        click_widget_button(page, "Run")
        page.wait(
            f"{WIDGET_TEXTS}.some(t => t.includes('eager: wall and steady-state host time')"
            " && t.includes('rounds: a warm-up round'))",
            120,
            "run 2 in its wall-time blocks",
            log,
        )
        time.sleep(2)
        click_widget_button(page, "Stop")
        t0 = time.monotonic()
        status = page.wait(
            f"{WIDGET_TEXTS}.find(t => /^run 2: .*stopped \\(eager, wall\\)/.test(t))",
            60,
            "the stopped run's status line",
            log,
        )
        assert time.monotonic() - t0 < 30 and "100000x2" in status, status  # 200,000 calls would take minutes
        assert int(re.search(r"(\d+) guarded calls ran, none after Stop", status).group(1)) < 100_000, status
        page.wait(f"{CHART_TRACES} == 1 && {TABLE_ROWS} == 3", 30, "run 1's bars; header and a row per run", log)
        page.js(f"{PANEL}.context.save()")  # as autosave or Ctrl+S would
        page.wait(f"!{PANEL}.context.model.dirty", 30, "the saved notebook", log)
        page.js("window.beforeReload = true")
        page.call("Page.reload")
        page.wait(
            f"!window.beforeReload && {CHART_TRACES} == 1 && {TABLE_ROWS} == 3",
            120,
            "the chart and the table after a reload",
            log,
        )
        texts = page.js(WIDGET_TEXTS)
        assert any("stopped (eager, wall)" in t for t in texts), texts


def test_a_run_page_in_jupyterlab_says_how_to_see_its_charts(tmp_path):
    """Issue 24: a run's index.html opened in Lab's HTML viewer (no script runs there) shows, where its
    chart would be, the line that says what to do; report.html, opened as that line says (a browser
    tab on the file's URL: served sandboxed, so only a page with its own plotly.js draws), draws and
    the line is gone."""
    from test_report import _fake_run

    from latency_lab.pages import html_assets
    from latency_lab.run import report

    (tmp_path / "project").mkdir()
    run, summary = _fake_run(tmp_path / "project")
    report.write(run, summary)
    log = tmp_path / "server.log"
    with running_lab(tmp_path / "project", tmp_path) as server, chromium_page(tmp_path / "profile") as page:
        page.call("Page.navigate", url=server.url("/lab/tree/run/index.html"))
        viewer = "document.querySelector('.jp-HTMLViewer iframe')?.contentDocument?.body?.innerText"
        text = page.wait(f"{viewer}?.includes('Notebooks') && {viewer}", 120, "the page in Lab's HTML viewer", log)
        assert html_assets.CHART_HINT in text, text  # the viewer's frame ran no script: the line says what to do
        page.call("Page.navigate", url=server.url("/files/run/report.html"))  # as Open in New Browser Tab does
        page.wait("!!document.querySelector('.main-svg')", 60, "report.html's charts drawn in a browser tab", log)
        assert not page.js("document.querySelector('.chart-hint')")


def test_edited_parameters_cell_changes_neither_the_batch_run_nor_git(tmp_path):
    """A user opens 01 in JupyterLab, edits its parameters cell and runs it; autosave or Ctrl+S writes the edit
    and the outputs to the tracked file. The next runner.py run uses the package's parameters (and
    records that the file is not the committed one); git stores the edit without the outputs."""
    from test_notebook_files import make_repo

    repo = make_repo(tmp_path / "repo")
    path = repo / "notebooks" / "01_model_setup.ipynb"
    # its results go to a temporary folder: "" would write into the user's outputs/interactive
    edited = 'preset = "tiny"\ndevice = "cpu"\nlayers = 3\nexecutors = "eager"\n'
    edited += f"output_dir = {json.dumps(str(tmp_path / 'lab'))}"
    log = tmp_path / "server.log"
    autosave = {"@jupyterlab/docmanager-extension:plugin": {"autosaveInterval": 2}}
    with running_lab(repo, tmp_path, settings=autosave) as server, chromium_page(tmp_path / "profile") as page:
        page.call("Page.navigate", url=server.url("/lab/tree/notebooks/01_model_setup.ipynb"))
        page.wait("document.querySelectorAll('.jp-Notebook .jp-Cell').length >= 3", 180, "notebook cells", log)
        page.wait(f"!!(window.jupyterapp && {PANEL})", 120, "the notebook panel", log)
        page.js(f"""(() => {{
            const cell = {PANEL}.content.widgets.find(c => (c.model.getMetadata('tags') || []).includes('parameters'));
            cell.model.sharedModel.setSource(cell.model.sharedModel.getSource() + {json.dumps(chr(10) + edited)});
        }})()""")
        run_all_cells(page, log)
        outcome = page.wait(RUN_OUTCOME, 480, "end of Run All (every code cell numbered, kernel idle)", log)
        assert outcome == "done", f"Run All stopped on an error in the Lab:\n{outcome}"
        page.js(f"{PANEL}.context.save()")  # as Ctrl+S would (autosave may have saved a part of the run)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the edit and the outputs reach the tracked file
            try:
                on_disk = nbformat.read(path, as_version=4)
            except nbformat.reader.NotJSONError:  # read while the server writes it (empty or cut): again
                time.sleep(0.5)
                continue
            if edited in "".join(c.source for c in on_disk.cells) and all(
                c.execution_count for c in on_disk.cells if c.cell_type == "code"
            ):
                break
            time.sleep(2)
        else:
            shown = (page.js("document.body.innerText") or "")[-1500:]
            pytest.fail(f"saving did not write the run into {path}; page:\n{shown}\n{log.read_text()[-2000:]}")
    assert sum(len(c.outputs) for c in on_disk.cells if c.cell_type == "code") > 0
    assert (tmp_path / "lab" / "01_model_setup.results.json").is_file()  # the Lab run wrote where it was told
    proc = run_runner(
        "--notebook-dir",
        str(repo / "notebooks"),
        "--notebooks",
        "01",
        "--preset",
        "tiny",
        "--device",
        "cpu",
        "--output-dir",
        str(tmp_path / "out"),
        "--run-id",
        "r",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran = json.loads((tmp_path / "out" / "r" / "01_model_setup.results.json").read_text())["params"]
    expected = P.for_notebook("01_model_setup", {"preset": "tiny", "device": "cpu"}).to_dict()
    assert {k: v for k, v in ran.items() if k != "output_dir"} == {
        k: list(v) if isinstance(v, tuple) else v for k, v in expected.items() if k != "output_dir"
    }
    assert ran["layers"] == 1 and len(ran["executors"]) > 1  # not the cell's 3 layers and eager only
    summary = json.loads((tmp_path / "out" / "r" / "summary.json").read_text())
    assert "differs from the committed notebook" in summary["notebook_changes"]["01_model_setup"]
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    staged = nbformat.reads(
        subprocess.run(
            ["git", "-C", str(repo), "show", ":notebooks/01_model_setup.ipynb"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout,
        as_version=4,
    )
    assert edited in "".join(c.source for c in staged.cells)
    assert all(not c.outputs and c.execution_count is None for c in staged.cells if c.cell_type == "code")


def test_opening_a_notebook_in_jupyterlab_changes_nothing_git_sees(tmp_path):
    """Issue 24: on opening a notebook JupyterLab sets the kernel's language_info (its Python version
    and more) and autosaves; the project's pre-save hook saves the language_info git stores, so the
    file stays byte for byte the committed one and git status lists nothing."""
    from test_notebook_files import git, make_repo

    repo = make_repo(tmp_path / "repo", ("00_explorer",))
    path = repo / "notebooks" / "00_explorer.ipynb"
    committed, log = path.read_bytes(), tmp_path / "server.log"
    with running_lab(repo, tmp_path) as server, chromium_page(tmp_path / "profile") as page:
        page.call("Page.navigate", url=server.url("/lab/tree/notebooks/00_explorer.ipynb"))
        page.wait(f"!!(window.jupyterapp && {PANEL})", 180, "the notebook panel", log)
        page.wait(f"{PANEL}.context.model.metadata.language_info?.version", 180, "the kernel's language_info", log)
        before = path.stat().st_mtime_ns
        page.js(f"{PANEL}.context.save()")  # as autosave does
        deadline = time.monotonic() + 60
        while path.stat().st_mtime_ns == before and time.monotonic() < deadline:
            time.sleep(0.5)
        assert path.stat().st_mtime_ns != before, "JupyterLab did not save the notebook"
    assert path.read_bytes() == committed
    assert git(repo, "status", "--porcelain", "--", "notebooks/00_explorer.ipynb") == ""


def test_tasks_lab_writes_the_start_page_and_opens_lab_there(monkeypatch):
    calls = []
    monkeypatch.setattr(tasks, "install", lambda cluster=False: None)
    monkeypatch.setattr(tasks, "install_git_filter", lambda: calls.append("filter"))

    def run(cmd, **kw):
        calls.append((cmd, kw))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(tasks.subprocess, "run", run)
    monkeypatch.setattr(tasks, "run_task", lambda cmd, env=None: run(cmd, env=env).returncode)  # the foreground job
    assert tasks.main(["lab", "--no-browser"]) == 0
    filtered, (page, _), (lab, options) = calls
    assert filtered == "filter" and page[1:] == ["-m", "latency_lab.run.start_page", str(ROOT / tasks.START_PAGE)]
    assert lab[1:3] == ["-m", "jupyterlab"] and f"--ServerApp.root_dir={ROOT}" in lab and lab[-1] == "--no-browser"
    assert f"--LabApp.default_url=/lab/tree/{tasks.START_PAGE}" in lab
    assert options["env"]["JUPYTER_CONFIG_PATH"].split(os.pathsep)[0] == str(tasks.LAB_CONFIG)
    overrides = json.loads((tasks.LAB_CONFIG / "labconfig" / "default_setting_overrides.json").read_text())
    assert overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]["markdown"] == "Markdown Preview"


def test_widget_extension_is_installed():
    needs_jupyterlab()
    proc = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True, text=True, timeout=120
    )
    assert "@jupyter-widgets/jupyterlab-manager" in proc.stdout + proc.stderr


def test_runner_from_a_python_outside_the_venv(tmp_path):
    """The Python the .venv was made from lacks the suite's packages: runner.py hands over to .venv."""
    outside = getattr(sys, "_base_executable", None)
    if Path(sys.prefix).resolve() != tasks.VENV.resolve() or not outside:
        pytest.skip(f"tests are not running in this checkout's {tasks.VENV}")
    has = subprocess.run([outside, "-c", "import papermill"], capture_output=True).returncode == 0
    if has:
        pytest.skip(f"{outside} has papermill: nothing to hand over")
    for args in (["--help"], ["--list"]):
        proc = subprocess.run(
            [outside, str(ROOT / "runner.py"), *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"},
        )
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert ("usage: runner.py" if args == ["--help"] else "00_explorer") in proc.stdout


def test_handover_failure_is_one_line(monkeypatch):
    monkeypatch.setattr(tasks, "SUITE_MODULES", ("no_such_module_here",))
    monkeypatch.setattr(tasks, "VENV", Path("/nonexistent/.venv"))

    def fail():
        raise subprocess.CalledProcessError(1, ["pip", "install"])

    monkeypatch.setattr(tasks, "install", fail)
    with pytest.raises(SystemExit) as e:
        tasks.use_suite_python("runner.py", ["--help"])
    message = str(e.value.code)
    assert message.startswith("runner.py: error: could not set up /nonexistent/.venv") and "\n" not in message
    assert message.endswith("run: python3 tasks.py install")


def test_lab_starts_without_the_news_prompt_or_a_pre_save_hook_warning(tmp_path):
    """Issue 37: Lab's news setting is off (it asks only while the setting is "none"), and the server
    logs no ``pre_save_hook`` override warning: the project's contents manager registers the hook
    (one set in config is validated twice and warns that it overrides itself). A notebook saved
    through the server still gets the hook's language_info."""
    folder = tmp_path / "project"
    folder.mkdir()
    with running_lab(folder, tmp_path) as server:
        news = server.api("/lab/api/settings/@jupyterlab/apputils-extension:notification")
        content = {"cells": [], "metadata": {"language_info": {"name": "python", "version": "3.11.7"}}}
        notebook = {"type": "notebook", "format": "json", "content": {**content, "nbformat": 4, "nbformat_minor": 5}}
        server.api("/api/contents/saved.ipynb", "PUT", notebook)
    assert news["schema"]["properties"]["fetchNews"]["default"] == "false"
    assert json.loads((folder / "saved.ipynb").read_text())["metadata"]["language_info"] == {"name": "python"}
    log = (tmp_path / "server.log").read_text()
    assert "pre_save_hook" not in log and "Warning:" not in log, log
