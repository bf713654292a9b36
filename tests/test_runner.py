"""End to end: runner.py runs the notebooks through papermill in a real kernel and writes a
complete run folder; bad input is rejected early; a failing notebook leaves the others intact."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from latency_lab import executors as E, notebook_run, results
from conftest import ROOT, run_runner  # noqa: E402

NOTEBOOKS = list(notebook_run.discover())


def test_declared_parameters_are_schema_names():
    from latency_lab.params import SCHEMA
    for name, path in notebook_run.discover().items():
        declared = notebook_run.declared_parameters(path)
        assert set(declared) <= set(SCHEMA), f"{name}: {set(declared) - set(SCHEMA)}"
        assert "output_dir" in declared


def test_run_folder_is_complete(tiny_run: Path):
    for name in NOTEBOOKS:
        for suffix in (".ipynb", ".html", ".results.json"):
            assert (tiny_run / f"{name}{suffix}").is_file(), f"{name}{suffix} missing"
    for name in ("environment.json", "summary.json", "index.html"):
        assert (tiny_run / name).is_file()
    assert (tiny_run.parent / "latest").resolve() == tiny_run.resolve()
    summary = json.loads((tiny_run / "summary.json").read_text())
    assert summary["ok"] and [n["name"] for n in summary["notebooks"]] == NOTEBOOKS
    assert all(n["status"] == "ok" and n["key_table"]["rows"] for n in summary["notebooks"])
    assert summary["parameters"]["resolved"]["preset"] == "tiny"
    env = json.loads((tiny_run / "environment.json").read_text())
    assert env["packages"]["torch"] and env["packages"]["lightning-thunder"] and env["cpu"]
    # torch.compile ran in several notebooks against one cache folder for the run, gone afterwards
    assert env["compile_cache"].startswith("per run") and summary["compile_cache"]["mode"] == "run"
    assert summary["compile_cache"]["inductor_files"] > 0


def test_notebooks_ran_in_a_real_kernel_with_injected_parameters(tiny_run: Path):
    for name in NOTEBOOKS:
        nb = nbformat.read(tiny_run / f"{name}.ipynb", as_version=4)
        assert nb.metadata["papermill"]["parameters"]["preset"] == "tiny"
        assert any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells)
        counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
        assert counts == list(range(1, len(counts) + 1)), f"{name} did not run every cell in order"


# Executors that must run on a CPU: anything but "ok" for them is a bug, not a reason.
CPU_EXECUTORS = ("eager", "torch.compile", "thunder:torch", "thunder:torchcompile", "thunderfx")


def test_model_setup_results(tiny_run: Path):
    data = results.load(tiny_run / "01_model_setup.results.json")
    rows = {r["executor"]: r for r in data["executors"]}
    assert list(rows) == list(E.REGISTRY)
    for name in CPU_EXECUTORS:
        assert rows[name]["status"] == "ok", rows[name]
    assert rows["thunder"]["status"] == "unavailable" and "CUDA" in rows["thunder"]["reason"]
    assert data["cost"]["parameters"] > 0 and data["cost"]["floor_ms_measured"] is None
    assert data["environment"]["device"] == "cpu" and len(data["findings"]) == 2


def test_executor_timing_results(tiny_run: Path):
    data = results.load(tiny_run / "02_executor_timing.results.json")
    assert data["key_table"]["columns"][:6] == ["Execution Type", "Wall Clock Time (ms)", "CPU Overhead (ms)",
                                               "Kernel Time (ms)", "Kernels", "Overhead / Kernel (us)"]
    rows = {r["executor"]: r for r in data["rows"]}
    assert list(rows) == list(E.REGISTRY)
    for name in CPU_EXECUTORS:
        assert rows[name]["status"] == "ok", rows[name]
    for name, r in rows.items():
        if r["status"] == "ok":
            assert r["Wall Clock Time (ms)"] > 0 and r["host submit (ms)"] > 0 and r["first call (s)"] > 0
            assert r["pass 2 / pass 1"] > 0 and r["%timeit (ms)"]
            assert data["measured"][name]["output"]["passed"] is True
            t = data["measured"][name]["timeit"]
            assert t["mean_ms"] > 0 and t["runs"] == 7 and t["loops"] == data["params"]["iters"]
            w = data["walls"][name]
            assert [p["n"] for p in w["passes"]] == [data["params"]["repeats"]] * 2 and w["error"] is None
            assert w["min"] <= w["median"] <= w["max"] and w["median"] == r["Wall Clock Time (ms)"]
            assert data["measured"][name]["warm-up"] == {"calls": data["params"]["warmup"]}
            assert r["Kernel Time (ms)"] is None and r["host-bound"] is None
            assert r["reason"].startswith("no device kernels on CPU")
        else:
            assert r["reason"]
    assert {"seed: DGX H100, Nsight Systems", "seed: L40S, %timeit"} <= {r["source"] for r in data["reference"]}
    assert data["ranking"].startswith("Fastest to slowest")


def test_index_links_resolve(tiny_run: Path):
    page = (tiny_run / "index.html").read_text()
    links = re.findall(r'href="([^"]+)"', page)
    assert len(links) >= 3 * len(NOTEBOOKS)
    for link in links:
        assert (tiny_run / link).is_file(), link
    assert "all notebooks ok" in page and "Executor timing" in page


@pytest.mark.parametrize("args, fragment", [
    (["-p", "executors=eager,tvm"], "invalid parameter executors="),
    (["-p", "layers=0"], "invalid parameter layers=0: allowed an integer >= 1"),
    (["--notebooks", "09"], "invalid --notebooks entry '09'"),
    (["-p", "dtype=int3"], "invalid parameter dtype='int3'"),
    (["-p", "cache_mode=paged"], "allowed seed, static, none"),
    (["-p", "nonsense=1"], "invalid parameter nonsense=1"),
    (["-p", "layers"], "NAME=VALUE"),
    (["--preset", "huge"], "allowed seed, tiny"),
    (["--preset", "tiny", "-p", "preset=seed"], "--preset tiny and -p preset=seed disagree"),
    (["-p", "repeats=3"], "an even integer >= 2"),
    (["-p", "seed=4294967296"], "an integer 0..4294967295"),
    (["--run-id", "../escape"], "invalid --run-id '../escape'"),
    (["--run-id", "a/b"], "invalid --run-id 'a/b'"),
    (["--run-id", ".hidden"], "invalid --run-id '.hidden'"),
    (["--run-id", "latest"], "invalid --run-id 'latest'"),
    (["--timeout", "0"], "invalid --timeout 0"),
    (["--timeout", "-5"], "invalid --timeout -5"),
    (["--notebooks", ""], "invalid --notebooks ''"),
    (["--notebooks", ","], "invalid --notebooks ','"),
    (["--compile-cache", "warm"], "argument --compile-cache: invalid choice: 'warm'"),
])
def test_bad_input_rejected_before_any_notebook(tmp_path, args, fragment):
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "keep.txt").write_text("earlier run")
    proc = run_runner(*args, "--output-dir", str(tmp_path), timeout=120)
    assert proc.returncode == 2
    assert fragment in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier"]
    assert (earlier / "keep.txt").read_text() == "earlier run"


def test_empty_output_dir_is_rejected(tmp_path):
    proc = run_runner("--output-dir", "", timeout=120)
    assert proc.returncode == 2 and "invalid --output-dir ''" in proc.stderr


@pytest.mark.parametrize("make, fragment", [
    (lambda d: (d / "file").write_text("x") and d / "file", "is a file"),
    (lambda d: (d / "file").write_text("x") and d / "file" / "sub", "is a file"),
])
def test_unusable_output_dir_is_a_one_line_setup_error(tmp_path, make, fragment):
    target = make(tmp_path)
    proc = run_runner("--output-dir", str(target), timeout=120)
    assert proc.returncode == 2 and fragment in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_read_only_output_dir_is_a_setup_error(tmp_path):
    tmp_path.chmod(0o500)
    try:
        proc = run_runner("--output-dir", str(tmp_path), timeout=120)
    finally:
        tmp_path.chmod(0o700)
    assert proc.returncode == 2 and "not writable" in proc.stderr


def test_existing_run_id_is_never_overwritten(tmp_path):
    (tmp_path / "r1").mkdir()
    proc = run_runner("--run-id", "r1", "--output-dir", str(tmp_path), timeout=120)
    assert proc.returncode == 2 and "never overwritten" in proc.stderr


def _notebook(path: Path, code: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('preset = "seed"\noutput_dir = ""')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(code)]
    nbformat.write(nb, path)


def test_failing_notebook_is_marked_and_others_survive(tmp_path):
    nbdir, out = tmp_path / "nbs", tmp_path / "out"
    nbdir.mkdir()
    _notebook(nbdir / "01_ok.ipynb", "from latency_lab import params as P, results\n"
              "p = P.validate(preset=preset)\n"
              "results.save(output_dir, '01_ok', p, {}, results.key_table('ok', [{'x': 1}]))")
    _notebook(nbdir / "02_fails.ipynb", "raise RuntimeError('deliberate failure')")
    _notebook(nbdir / "03_after.ipynb", "from latency_lab import params as P, results\n"
              "results.save(output_dir, '03_after', P.validate(), {}, results.key_table('after', [{'y': 2}]))")
    proc = run_runner("--notebook-dir", str(nbdir), "--output-dir", str(out), "--run-id", "r", "--preset", "tiny", timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED: 02_fails" in proc.stdout
    summary = json.loads((out / "r" / "summary.json").read_text())
    status = {n["name"]: n for n in summary["notebooks"]}
    assert status["01_ok"]["status"] == "ok" and status["03_after"]["status"] == "ok"
    assert status["02_fails"]["status"] == "failed"
    assert status["02_fails"]["error"]["ename"] == "RuntimeError" and "deliberate" in status["02_fails"]["error"]["evalue"]
    for f in ("01_ok.results.json", "03_after.results.json", "02_fails.ipynb", "02_fails.html", "index.html"):
        assert (out / "r" / f).is_file(), f
    page = (out / "r" / "index.html").read_text()
    assert "some notebooks failed" in page and "deliberate failure" in page


def test_list_shows_notebooks_and_parameters():
    proc = run_runner("--list", timeout=120)
    assert proc.returncode == 0
    for name in NOTEBOOKS:
        assert name in proc.stdout
    assert "cache_mode" in proc.stdout and "executors" in proc.stdout


def test_environment_yml_installs_the_pyproject_pins():
    env = (ROOT / "environment.yml").read_text()
    assert "- -e .[test]" in env
    assert "python=3.11" in env and 'requires-python = ">=3.11"' in (ROOT / "pyproject.toml").read_text()


def test_html_export_failure_is_an_outcome_not_a_crash(tmp_path, monkeypatch):
    _notebook(tmp_path / "01_ok.ipynb", "x = 1")
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    def broken(executed):
        raise RuntimeError("exporter broke")
    monkeypatch.setattr(notebook_run, "to_html", broken)
    outcome = notebook_run.execute(tmp_path / "01_ok.ipynb", run_dir, {}, notebook_run.kernel_name(), 120, False)
    assert outcome.status == "failed" and outcome.error["ename"] == "HTMLExportError"
    assert "exporter broke" in outcome.error["evalue"] and outcome.files == {"ipynb": "01_ok.ipynb"}
    assert (run_dir / "01_ok.ipynb").is_file()


def test_dead_kernel_and_timeout_name_their_cell(tmp_path):
    nbdir, out = tmp_path / "nbs", tmp_path / "out"
    nbdir.mkdir()
    _notebook(nbdir / "01_dies.ipynb", "import os\nos._exit(1)")
    _notebook(nbdir / "02_hangs.ipynb", "import time\ntime.sleep(60)")
    proc = run_runner("--notebook-dir", str(nbdir), "--output-dir", str(out), "--run-id", "r", "--timeout", "5", timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    status = {n["name"]: n for n in json.loads((out / "r" / "summary.json").read_text())["notebooks"]}
    for name in ("01_dies", "02_hangs"):  # cells: parameters, papermill's injected parameters, the culprit
        assert status[name]["status"] == "failed" and status[name]["error"]["cell_index"] == 2, status[name]
    assert "DeadKernel" in status["01_dies"]["error"]["ename"]
    assert "Timeout" in status["02_hangs"]["error"]["ename"] or "timed out" in status["02_hangs"]["error"]["evalue"]
    assert re.search(r"01_dies failed in [\d.]+ s: cell (3|index 2): DeadKernelError", proc.stdout), proc.stdout


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_interrupt_stops_kills_the_kernel_and_marks_the_run(tmp_path, signum):
    nbdir, out = tmp_path / "nbs", tmp_path / "out"
    nbdir.mkdir()
    pid_file = tmp_path / "kernel.pid"
    _notebook(nbdir / "01_quick.ipynb", "from latency_lab import params as P, results\n"
              "results.save(output_dir, '01_quick', P.validate(preset=preset), {}, results.key_table('q', [{'x': 1}]))")
    _notebook(nbdir / "02_slow.ipynb", f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)")
    _notebook(nbdir / "03_never.ipynb", "x = 3")
    temp = tmp_path / "temp"  # where the run's compile-cache folder is made, and must be gone from
    temp.mkdir()
    proc = subprocess.Popen([sys.executable, str(ROOT / "runner.py"), "--notebook-dir", str(nbdir), "--output-dir", str(out),
                             "--run-id", "r"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(temp)})
    deadline = time.monotonic() + 240
    while not pid_file.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    assert pid_file.exists(), proc.communicate()
    kernel = int(pid_file.read_text())
    sent = time.monotonic()
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=60)
    assert time.monotonic() - sent < 20
    assert proc.returncode == 128 + signum, stdout + stderr
    assert "INTERRUPTED" in stdout
    time.sleep(1)
    assert not psutil.pid_exists(kernel) or psutil.Process(kernel).status() == psutil.STATUS_ZOMBIE
    summary = json.loads((out / "r" / "summary.json").read_text())
    assert summary["interrupted"] == signal.Signals(signum).name and not summary["ok"]
    assert [(n["name"], n["status"]) for n in summary["notebooks"]] == \
        [("01_quick", "ok"), ("02_slow", "interrupted"), ("03_never", "not run")]
    assert "interrupted" in (out / "r" / "index.html").read_text()
    assert (out / "latest").resolve() == (out / "r").resolve()
    assert list(temp.iterdir()) == []


def test_latest_is_replaced_atomically_by_concurrent_runs(tmp_path):
    import runner
    runs = [tmp_path / f"r{i}" for i in range(8)]
    for r in runs:
        r.mkdir()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda r: [runner.point_latest(tmp_path, r) for _ in range(50)], runs))
    assert (tmp_path / "latest").resolve() in [r.resolve() for r in runs]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["latest", *(r.name for r in runs)])


def test_runner_names_notebooks_that_ignore_a_parameter_and_records_what_each_ran_with(tmp_path):
    nbdir, out = tmp_path / "nbs", tmp_path / "out"
    nbdir.mkdir()
    for name, extra in (("01_with", "\nlayers = 1"), ("02_without", "")):
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        params = nbformat.v4.new_code_cell('preset = "seed"\noutput_dir = ""' + extra)
        params.metadata["tags"] = ["parameters"]
        nb.cells = [params, nbformat.v4.new_code_cell(
            "from latency_lab import params as P, results\n"
            f"p = P.from_namespace(globals())\nresults.save(output_dir, {name!r}, p, {{}}, results.key_table('t', [{{'x': 1}}]))")]
        nbformat.write(nb, nbdir / f"{name}.ipynb")
    proc = run_runner("--notebook-dir", str(nbdir), "--output-dir", str(out), "--run-id", "r", "--preset", "tiny",
                      "-p", "layers=2", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "note: -p layers is not a parameter of 02_without" in proc.stdout
    ran = {n["name"]: n["params"] for n in json.loads((out / "r" / "summary.json").read_text())["notebooks"]}
    assert ran["01_with"]["layers"] == 2 and ran["02_without"]["layers"] == 1
    assert ran["01_with"]["preset"] == ran["02_without"]["preset"] == "tiny"
