"""Shared fixtures: one headless run of every notebook with the tiny preset, reused by all tests;
CPU-only kernels for every test that starts notebooks; the ``gpu`` marker; headless Chromium (a
page's DOM, ``chromium_dom``, or a tab driven over DevTools, ``chromium_page``).

Under pytest-xdist (``tasks.py test`` runs ``-n <CPUs> --dist loadgroup``) the tests that read the
tiny run are one group, run by one worker, which builds the run once while the others take the rest;
were they spread anyway (``--dist load``), a file lock still has one worker build it for all. The
``gpu`` tests are one group too: one GPU, one of them at a time, as in a serial run; and so are the
tests on one local Ray cluster (tests/test_fleet.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# For the runners, kernels and Jupyter servers tests start: no GPU at all, whatever --device says, so a
# test about the notebooks never pays for CUDA (a seed-size Thunder/nvFuser build takes 15-20 s on an
# H200). Tests about GPU behaviour are marked ``gpu`` and run in pytest's own process.
CPU_ONLY = {"CUDA_VISIBLE_DEVICES": ""}
OUTPUTS_BEFORE = pytest.StashKey[dict]()


def cpu_environment(**extra: str) -> dict[str, str]:
    """This process's environment with no GPU visible (``CPU_ONLY``), plus ``extra``."""
    return {**os.environ, **CPU_ONLY, **extra}


def run_runner(*args: str, timeout: int = 1200, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python runner.py ARGS`` in the repo root, output captured; its kernels see no GPU; ``env``:
    more variables."""
    return subprocess.run(
        [sys.executable, str(ROOT / "runner.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cpu_environment(**(env or {})),
    )


def outputs_listing(outputs: Path) -> dict[str, int]:
    """Every path under ``outputs`` (links not followed) with its modification time, in ns."""
    return {str(p.relative_to(outputs)): p.lstat().st_mtime_ns for p in sorted(outputs.rglob("*"))}


def pytest_sessionstart(session):
    """The user's ``outputs/`` as the tests found it (in the controlling process only)."""
    if not hasattr(session.config, "workerinput"):
        session.config.stash[OUTPUTS_BEFORE] = outputs_listing(ROOT / "outputs")


def pytest_sessionfinish(session, exitstatus):
    """Tests write only into temporary folders: a session that added, changed or removed anything under
    the user's ``outputs/`` fails, naming what."""
    before = session.config.stash.get(OUTPUTS_BEFORE, None)
    if before is None:
        return
    after = outputs_listing(ROOT / "outputs")
    touched = sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n))
    if touched:
        print(f"\nFAILED: the tests wrote into {ROOT / 'outputs'}: {', '.join(touched[:10])}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups into the node IDs
def pytest_collection_modifyitems(config, items):
    """``gpu`` tests run where CUDA is present and are skipped, with the reason, where it is not.
    Under xdist, the ``tiny_run`` tests, the ``gpu`` tests, the ``ab_runs`` tests (real A/B rounds: one
    at a time) and the tests on the module's Ray cluster (``ray_cluster``, tests/test_fleet.py) are each
    one ``xdist_group``."""
    import torch

    if config.pluginmanager.hasplugin("xdist"):
        for item in items:
            if "tiny_run" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group("tiny_run"))
            elif "gpu" in item.keywords:
                item.add_marker(pytest.mark.xdist_group("gpu"))
            elif "ab_runs" in item.keywords:
                item.add_marker(pytest.mark.xdist_group("ab_runs"))
            elif "ray_cluster" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group("ray"))
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="gpu: needs a CUDA GPU (torch.cuda.is_available() is False here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def tiny_run_slots() -> int:
    """The tiny run's notebooks side by side (``--cpu-slots``): one per 4 physical cores, at most 4."""
    from latency_lab.run import scheduler

    return max(1, min(4, len(scheduler.physical_cores(os.sched_getaffinity(0))) // 4))


def _make_tiny_run(out: Path) -> Path:
    """Every notebook on the tiny preset; 08 on 2 core slots (its pages and files, not its
    resolution, are what these tests read: tests/test_ab_builds.py times real A/B runs); side by side
    on a machine of 8 cores or more (``tiny_run_slots``)."""
    args = ("--preset", "tiny", "--device", "cpu", "-p", "workers=2", "--cpu-slots", str(tiny_run_slots()))
    proc = run_runner(*args, "--output-dir", str(out), "--run-id", "tiny")
    assert proc.returncode == 0, f"runner failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return out / "tiny"


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """The run folder of ``runner.py --preset tiny`` (all notebooks, CPU: ``--device cpu`` and no GPU
    visible), made once per test session: under xdist, by the first worker that needs it, in the
    session's temp folder that all workers share, the others waiting on its lock and reusing it."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return _make_tiny_run(tmp_path_factory.mktemp("outputs"))
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent  # the controller's basetemp: one per session
    out, done = shared / "tiny-run-outputs", shared / "tiny-run.done"
    with FileLock(str(shared / "tiny-run.lock")):
        if not done.exists():
            shutil.rmtree(out, ignore_errors=True)  # a build that failed in another worker
            out.mkdir()
            run = _make_tiny_run(out)
            done.write_text(str(run))
    return out / "tiny"


CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium() -> str:
    """The chromium binary; skips the test without one or without websocket-client (its DevTools
    transport, in the test extra), fails it in CI."""
    import importlib.util
    import os
    import shutil

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    missing = "chromium" if not browser else None
    if browser and importlib.util.find_spec("websocket") is None:
        missing = "websocket-client"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing} is needed for the browser tests (.ci/run installs both)")
        pytest.skip(f"{missing} not installed")
    return browser


@pytest.fixture(scope="session")
def package_index() -> None:
    """Skips the test where pip's index lists no releases of six (the GPU machines here reach none)."""
    from latency_lab.run import bisect_builds

    done = bisect_builds.pip("index", "versions", "six")
    if done.returncode != 0:
        pytest.skip(f"no package index lists releases here ({bisect_builds.last_line(done)})")


OFFLINE_FLAGS = ("--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND")  # no network at all


def chromium_dom(target: str, profile: Path, budget_ms: int = 10000, offline: bool = False) -> str:
    """The DOM of ``target`` (a URL) after headless Chromium ran its scripts for ``budget_ms`` of
    virtual time, with a fresh profile in ``profile`` (and no network when ``offline``)."""
    proc = subprocess.run(
        [
            chromium(),
            *CHROMIUM_FLAGS,
            *(OFFLINE_FLAGS if offline else ()),
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            target,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


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
        """The expression's value; None while a reload has no page context to evaluate in (an error
        reply), which ``poll`` simply tries again."""
        return (self.call("Runtime.evaluate", expression=expression, returnByValue=True).get("result") or {}).get(
            "value"
        )

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

    active = profile / "DevToolsActivePort"  # Chromium writes the port it picked (0: the OS picks) there
    active.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [
            chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "--window-size=1400,2000",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ws = None
    try:
        deadline = time.monotonic() + 60
        while ws is None:
            try:
                port = int(active.read_text().split()[0])
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                    target = next(t for t in json.load(r) if t["type"] == "page")
                ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
            except (OSError, StopIteration, ValueError, IndexError):  # no port file yet (or half written)
                if time.monotonic() > deadline:
                    pytest.fail("headless Chromium did not open its DevTools port in 60 s")
                time.sleep(0.5)
        yield Page(ws)
    finally:
        if ws is not None:
            ws.close()
        stop(proc)
