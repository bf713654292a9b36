"""JupyterLab: the server from this environment lists the notebooks, runs the suite's kernel (and the
explorer's Run button in it), and its Lab shell renders in headless Chromium. Also the explorer's
logic without a browser, and runner.py started by a Python outside the .venv."""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest

import tasks
from latency_lab import explorer as X, parameters as P
from conftest import CHROMIUM_FLAGS, ROOT, chromium, chromium_dom, cpu_environment

KERNEL = "latency-lab"


def needs_jupyterlab() -> None:
    """Skip where JupyterLab is not installed (the GPU bundle has none); in CI it must be."""
    if importlib.util.find_spec("jupyterlab") is None:
        if os.environ.get("CI"):
            pytest.fail("jupyterlab is missing from this environment (pyproject.toml installs it)")
        pytest.skip("jupyterlab is not installed in this environment")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, port: int, token: str):
        self.base, self.token = f"http://127.0.0.1:{port}", token

    def url(self, path: str) -> str:
        return f"{self.base}{path}{'&' if '?' in path else '?'}token={self.token}"

    def api(self, path: str, method: str = "GET", body: dict | None = None, timeout: float = 30):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url(path), data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read().decode()
            return json.loads(text) if text else None


@contextmanager
def running_lab(folder: Path, home: Path):
    """JupyterLab as ``tasks.py lab`` starts it, from this environment, on ``folder``, on a free
    localhost port with a token; killed on exit."""
    needs_jupyterlab()
    port, token = free_port(), secrets.token_hex(16)
    env = cpu_environment(JUPYTER_RUNTIME_DIR=str(home / "runtime"), JUPYTERLAB_WORKSPACES_DIR=str(home / "ws"),
                          PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    log_path = home / "server.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, *tasks.lab_args(folder), "--no-browser", "--ServerApp.ip=127.0.0.1",
                                 "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: Run All on the notebook
                                 f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
                                 f"--IdentityProvider.token={token}"],
                                cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT)
        server = Server(port, token)
        try:
            deadline = time.monotonic() + 120
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
                try:
                    server.api("/api/status", timeout=5)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        pytest.fail(f"jupyter lab did not answer in 120 s:\n{log_path.read_text()[-3000:]}")
                    time.sleep(0.5)
            yield server
        finally:
            stop(proc)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The server ``tasks.py lab`` starts, on notebooks/."""
    with running_lab(ROOT / "notebooks", tmp_path_factory.mktemp("jupyter")) as server:
        yield server


def execute(server: Server, kernel_id: str, code: str, timeout: float = 300) -> str:
    """Run ``code`` in the kernel through the server's websocket; its stdout (complete once the
    kernel is idle again), or fail with its error."""
    import websocket
    from jupyter_client.session import Session

    ws = websocket.create_connection(server.url(f"/api/kernels/{kernel_id}/channels").replace("http", "ws", 1), timeout=timeout)
    try:
        msg = Session().msg("execute_request", {"code": code, "silent": False, "store_history": False,
                                                "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
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
        pytest.fail(f"kernelspec {KERNEL!r} is not registered in this environment ({', '.join(specs)}): "
                    "python3 tasks.py install registers it")
    kernel = lab.api("/api/kernels", "POST", {"name": KERNEL})
    try:
        out = execute(lab, kernel["id"], "import latency_lab, ipywidgets\nprint(latency_lab.__file__, ipywidgets.__version__)")
        path, widgets = out.split()[-2:]
        assert Path(path).resolve().is_relative_to(ROOT.resolve()) and widgets.startswith("8.")
        # The explorer's Run button, clicked in the real kernel: a tiny CPU measurement, then a bad setting.
        out = execute(lab, kernel["id"], "\n".join([
            "from latency_lab import explorer as X, parameters as P",
            "ui = X.ExplorerUI(X.Explorer(), P.validate(preset='tiny', device='cpu', executors='eager'), '/dev/null')",
            "ui.run_button.click()",
            "ui.layers.min, ui.layers.value = 0, 0",
            "ui.run_button.click()",
            "row = ui.explorer.runs[0]['rows'][0]",
            "print('RESULT', row['status'], row['wall (ms)'] > 0, ui.status.value)",
        ]))
        result = next(line for line in out.splitlines() if line.startswith("RESULT"))
        assert result.startswith("RESULT ok True") and "invalid parameter layers=0" in result, out
    finally:
        lab.api(f"/api/kernels/{kernel['id']}", "DELETE")


def test_lab_shell_and_notebook_list_render_in_chromium(lab, tmp_path):
    dom = chromium_dom(lab.url("/lab"), tmp_path / "profile", budget_ms=30000)
    assert "jp-LabShell" in dom, dom[-2000:]
    assert "00_explorer.ipynb" in dom and "01_model_setup.ipynb" in dom, "the file browser did not list the notebooks"


class Page:
    """A headless Chromium tab driven over the DevTools protocol."""

    def __init__(self, ws):
        self.ws, self.last = ws, 0

    def call(self, method: str, **params) -> dict:
        self.last += 1
        self.ws.send(json.dumps({"id": self.last, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.last:
                return reply.get("result", reply)

    def js(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def poll(self, expression: str, seconds: float):
        """The expression's first truthy value within ``seconds``, else None."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if value := self.js(expression):
                return value
            time.sleep(1)
        return None

    def wait(self, expression: str, seconds: float, what: str, log: Path | None = None):
        """``poll``, or fail with what the page shows (and the server log's tail, when given)."""
        if value := self.poll(expression, seconds):
            return value
        text = self.js("document.body.innerText")
        server = f"\nserver log:\n{log.read_text()[-2000:]}" if log else ""
        pytest.fail(f"no {what} in the page after {seconds} s; it shows:\n{(text or '')[-3000:]}{server}")


@contextmanager
def chromium_page(profile: Path):
    """A tab of headless Chromium (the flags of ``conftest.chromium_dom``), closed on exit."""
    import websocket

    port = free_port()
    proc = subprocess.Popen([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--remote-debugging-port={port}",
                             "--window-size=1400,2000", "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ws = None
    try:
        deadline = time.monotonic() + 60
        while ws is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                    target = next(t for t in json.load(r) if t["type"] == "page")
                ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
            except (OSError, StopIteration):
                if time.monotonic() > deadline:
                    pytest.fail("headless Chromium did not open its DevTools port in 60 s")
                time.sleep(0.5)
        yield Page(ws)
    finally:
        if ws is not None:
            ws.close()
        stop(proc)


WIDGET_BUTTON = "[...document.querySelectorAll('.jupyter-widgets button')].find(b => b.textContent.trim() == 'Run')"
PANEL = "[...window.jupyterapp.shell.widgets('main')].find(w => w.sessionContext && w.content)"  # the notebook's panel
KERNEL_IDLE = f"(() => {{ const k = {PANEL}?.sessionContext?.session?.kernel; return !!k && k.status == 'idle'; }})()"
CELLS_STARTED = "[...document.querySelectorAll('.jp-Notebook .jp-InputPrompt')].some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))"


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


def test_explorer_run_button_in_jupyterlab(tmp_path):
    """JupyterLab in headless Chromium: the explorer notebook (tiny preset, CPU, eager) run cell by
    cell, then its Run button clicked: the widgets render and a second run lands in the table and
    the chart."""
    folder = tmp_path / "lab"
    folder.mkdir()
    nb = nbformat.read(ROOT / "notebooks" / "00_explorer.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += f'\npreset, device, executors, output_dir = "tiny", "cpu", "eager", {str(tmp_path / "out")!r}'
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": KERNEL, "language": "python"}
    nbformat.write(nb, folder / "explorer.ipynb")
    log = tmp_path / "server.log"
    with running_lab(folder, tmp_path) as server, chromium_page(tmp_path / "profile") as page:
        page.call("Page.navigate", url=server.url("/lab/tree/explorer.ipynb"))
        page.wait("document.querySelectorAll('.jp-Notebook .jp-Cell').length >= 3", 180, "notebook cells", log)
        run_all_cells(page, log)
        page.wait(f"!!{WIDGET_BUTTON}", 300, "Run button of the explorer's widgets", log)
        page.js(f"{WIDGET_BUTTON}.click()")
        status = page.wait("[...document.querySelectorAll('.jupyter-widgets .widget-html-content')].map(e => e.textContent)"
                           ".find(t => /^run 2: .* executor\\(s\\) in/.test(t))", 300, "status line of a second run", log)
        assert "prefill" in status
        rows = page.js("[...document.querySelectorAll('.jupyter-widgets table.latency-lab tr')].length")
        traces = page.js("Math.max(0, ...[...document.querySelectorAll('.jupyter-widgets .js-plotly-plot')]"
                         ".map(p => (p.data || []).length))")
        assert rows == 3 and traces == 2, (rows, traces)  # header + one row per run; one bar group per run


def test_widget_extension_is_installed():
    needs_jupyterlab()
    proc = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True, text=True, timeout=120)
    assert "@jupyter-widgets/jupyterlab-manager" in proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def tiny_params():
    return P.validate(preset="tiny", device="cpu", executors="eager,thunder", warmup=1, iters=2, repeats=2)


def test_explorer_keeps_runs_and_reports_bad_settings(tiny_params, tmp_path):
    explorer, seen = X.Explorer(), []
    first = explorer.run(X.settings_from(tiny_params), lambda done, total, text: seen.append((done, total)))
    assert first["error"] is None and seen[0] == (0, 3) and seen[-1] == (3, 3)
    eager, thunder = first["rows"]
    assert eager["status"] == "ok" and eager["q1 (ms)"] <= eager["wall (ms)"] <= eager["q3 (ms)"]
    assert eager["method"] == "perf_counter" and len(eager["blocks_ms"]) == 2 and eager["host submit (ms)"] > 0
    assert thunder["status"] == "unavailable" and "CUDA" in thunder["reason"] and thunder["wall (ms)"] is None
    decode = explorer.run({**X.settings_from(tiny_params), "executors": ["eager"], "step": "decode", "cache_mode": "static"})
    assert decode["error"] is None and decode["step"] == "decode" and decode["rows"][0]["wall (ms)"] > 0
    for bad, name in (({"step": "decode"}, "cache_mode"), ({"step": "generate"}, "step"), ({"layers": 0}, "layers"),
                      ({"executors": []}, "executors"), ({"executors": ["tvm"]}, "executors")):
        run = explorer.run({**X.settings_from(tiny_params), **bad})
        assert run["error"].startswith(f"invalid parameter {name}=") and run["rows"] == []
    assert [r["id"] for r in explorer.runs] == [1, 2, 3, 4, 5, 6, 7]
    assert [r["run"] for r in explorer.rows()] == [first["label"]] * 2 + [decode["label"]]
    saved = json.loads(explorer.save(tmp_path / "runs.json").read_text())
    assert len(saved["runs"]) == 7 and saved["runs"][1]["rows"][0]["executor"] == "eager"
    assert any("torch-eager" in f for f in X.findings(first)) and "unavailable" in X.findings(first)[-1]


def test_explorer_steps(tiny_params):
    """Prefill: the prompt's tokens; decode: one token at position seq_len, cache pre-filled."""
    prefill = X.step_setup(tiny_params, "prefill")
    assert prefill.kwargs["input_ids"].shape == (1, tiny_params.seq_len)
    static = P.validate({**tiny_params.to_dict(), "cache_mode": "static"})
    decode = X.step_setup(static, "decode").kwargs
    assert decode["input_ids"].shape == (1, 1) and decode["cache_position"].tolist() == [tiny_params.seq_len]
    assert decode["past_key_values"].get_seq_length() == tiny_params.seq_len  # the prompt's prefill filled it


def test_explorer_widget_shows_errors_and_keeps_working(tiny_params, tmp_path, monkeypatch):
    ui = X.ExplorerUI(X.Explorer(), tiny_params, tmp_path / "saved.json")
    ui.executors.value = ("eager",)
    ui.step.value = "decode"
    assert ui.cache_mode.value == "static"  # decode needs the pre-filled StaticCache
    ui.cache_mode.value = "seed"
    run = ui.on_run()
    assert "invalid parameter cache_mode='seed'" in ui.status.value and run["error"] and not ui.run_button.disabled

    def broken(settings, progress=None):
        raise RuntimeError("model build exploded")
    monkeypatch.setattr(X, "measure", broken)
    ui.cache_mode.value = "static"
    assert ui.on_run()["error"].startswith("RuntimeError: model build exploded") and "exploded" in ui.status.value
    monkeypatch.undo()
    run = ui.on_run()
    assert run["error"] is None and "1 executor(s)" in ui.status.value and "<td>torch-eager</td>" in ui.table.value
    assert ui.progress.value == ui.progress.max
    assert ui.on_save() == tmp_path / "saved.json" and len(json.loads((tmp_path / "saved.json").read_text())["runs"]) == 3
    ui.save_path.value = str(tmp_path / "saved.json" / "below-a-file.json")
    assert ui.on_save() is None and "save failed" in ui.status.value


def test_runner_from_a_python_outside_the_venv(tmp_path):
    """The Python the .venv was made from lacks the suite's packages: runner.py hands over to .venv."""
    outside = getattr(sys, "_base_executable", None)
    if Path(sys.prefix).resolve() != tasks.VENV.resolve() or not outside:
        pytest.skip(f"tests are not running in this checkout's {tasks.VENV}")
    has = subprocess.run([outside, "-c", "import papermill"], capture_output=True).returncode == 0
    if has:
        pytest.skip(f"{outside} has papermill: nothing to hand over")
    for args in (["--help"], ["--list"]):
        proc = subprocess.run([outside, str(ROOT / "runner.py"), *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, env={k: v for k, v in cpu_environment().items() if k != "VIRTUAL_ENV"})
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
