"""End to end: runner.py runs the notebooks through papermill in a real kernel and writes a
complete run folder; bad input is rejected early; a failing notebook leaves the others intact."""

from __future__ import annotations

import concurrent.futures
import html
import io
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
from conftest import CPU_ONLY, ROOT, cpu_environment, run_runner  # noqa: E402

import tasks
from latency_lab.core import registry as E
from latency_lab.core import results
from latency_lab.run import notebook_run, run_folder, start_page
from latency_lab.run.compare import command as compare

NOTEBOOKS = list(notebook_run.discover())


def test_declared_parameters_are_schema_names():
    from latency_lab.core.parameters import SCHEMA

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
    status = {n["name"]: n["status"] for n in summary["notebooks"]}
    assert all(n["key_table"]["rows"] for n in summary["notebooks"])
    # 07 sets levers beside Thunder-nvFuser, which a CPU cannot run: it measures nothing, and says so
    assert status == {name: "unavailable" if name == "07_levers" else "ok" for name in NOTEBOOKS}, status
    levers = next(n for n in summary["notebooks"] if n["name"] == "07_levers")
    assert levers["findings"][0].startswith("Nothing measured on cpu: ")
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
    assert data["schema"] == 2 and data["key_table"]["columns"][:3] == ["executor", "wall_ms", "host_ms"]
    assert "kernel_ms" in data["key_table"]["columns"] and "host_per_ref_x" in data["key_table"]["columns"]
    rows = {r["executor"]: r for r in data["rows"]}
    assert list(rows) == list(data["params"]["executors"])
    for name in CPU_EXECUTORS:
        if name in rows:
            assert rows[name]["status"] == "ok", rows[name]
    for name, r in rows.items():
        if r["status"] == "ok":
            assert 0 < r["host_ms"] <= r["wall_ms"] * 1.0001 and r["first_call_s"] > 0 and r["timeit_ms"] > 0
            assert r["wall_q1_ms"] <= r["wall_ms"] <= r["wall_q3_ms"] and r["pass_ratio_x"] > 0
            assert data["measured"][name]["output"]["passed"] is True
            t = data["measured"][name]["timeit"]
            assert t["mean_ms"] > 0 and t["runs"] == 7 and t["loops"] == data["params"]["iters"]
            w = data["rounds"][name]
            assert w["rounds"] == 2 * data["params"]["repeats"] and w["error"] is None
            assert w["wall"]["median"] == r["wall_ms"] and w["host"]["median"] == r["host_ms"]
            assert r["kernel_ms"] is None and r["host_bound"] is None and "no device kernels on CPU" in r["notes"]
        else:
            assert r["reason"]
    assert len(data["host_reference"]["per_round_ms"]) == 2 * data["params"]["repeats"]
    assert {"seed: DGX H100, Nsight Systems", "seed: L40S, %timeit"} <= {r["source"] for r in data["reference"]}
    assert data["findings"][0].startswith("Fastest to slowest")
    assert any("says nothing about the seed" in f for f in data["findings"])  # a CPU run says what it cannot answer


def test_index_links_resolve(tiny_run: Path):
    page = (tiny_run / "index.html").read_text()
    # how a slow host is dealt with: said once, on the index, not in 02's, 04's and 06's findings
    assert page.count("are medians over the blocks that ran while the host read fast") == 1
    assert len(re.findall(r"the run(?:'|&#39;)s index, under The host(?:'|&#39;)s state", page)) >= 3
    links = re.findall(r'href="([^"]+)"', page)
    assert len(links) >= 3 * len(NOTEBOOKS)
    for link in links:
        assert (tiny_run / link).is_file(), link
    assert "all notebooks ok" in page and "Executor timing" in page


@pytest.mark.parametrize(
    "args, fragment",
    [
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
        (["--run-id", "LATEST"], "invalid --run-id 'LATEST'"),
        (["--run-id", "a" * 240], "at most 100 letters"),
        (["--run-id", "a" * 300], "invalid --run-id 'aaaaaaaa"),
        (["-p", "seed=" + "1+" * 5000 + "1"], "invalid parameter seed='1+1+1+"),
        (["-p", "seed=" + "1+" * 400 + "1"], "invalid parameter seed='1+1+1+"),
        (["-p", "depths=" + "[" * 400 + "]" * 400], "invalid parameter depths="),
        (["-p", "layers=" + "9" * 100_000], "a value of at most 1,000 characters"),
        (["-p", "x" * 100_000 + "=1"], "invalid parameter xxxxxxx"),
        (["-p", "layers=1", "-p", "layers=2"], "one -p layers: it is given twice (first 1)"),
        (["-p", "layers=1", "-p", "layers=1"], "given twice"),
        (["-p", "sizes=['99999999999999x']"], "on this machine"),
        (["-p", "batch_size=10**9"], "invalid parameter batch_size='10**9'"),
        (["-p", "batch_size=1000000000"], "GiB of RAM"),
        (["-p", "seq_len=99999999"], "an integer up to"),
        (["-p", "output_dir=/tmp/x"], "the runner sets it; use --output-dir"),
    ],
)
def test_bad_input_rejected_before_any_notebook(tmp_path, args, fragment):
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "keep.txt").write_text("earlier run")
    proc = run_runner(*args, "--output-dir", str(tmp_path), timeout=120)
    assert proc.returncode == 2
    assert fragment in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr) < 800, proc.stderr[:2000]  # long values shortened
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier"]
    assert (earlier / "keep.txt").read_text() == "earlier run"


def test_unknown_parameter_lists_only_what_can_be_set(tmp_path):
    proc = run_runner("-p", "nonsense=1", "--output-dir", str(tmp_path), timeout=120)
    assert proc.returncode == 2 and "parameters of the selected notebooks: batch_size," in proc.stderr
    assert "output_dir" not in proc.stderr
    listed = run_runner("--list", timeout=120).stdout
    assert "output_dir" not in listed and "cache_mode" in listed


def _fake_run(run: Path, interrupted: str | None = None, names=("01_x", "02_y"), torch="2.9.1") -> Path:
    """A run folder as the runner leaves it (results, environment, summary, pages) for ``names``
    (01_x and 02_y); 02_y cut by ``interrupted`` when given."""
    from latency_lab.core import parameters as P
    from latency_lab.run import report

    run.mkdir(parents=True)
    p = P.validate(preset="tiny", device="cpu")
    env = {"cpu": "test CPU", "packages": {"torch": torch}}
    (run / "environment.json").write_text(json.dumps(env))
    outcomes = []
    for name in names:
        if name == "02_y" and interrupted:
            outcomes.append(notebook_run.Outcome(name, "interrupted", 2.0))
            continue
        results.save(run, name, p, env, results.key_table("t", [{"executor": "eager", "x": 1.0, "status": "ok"}]))
        outcomes.append(notebook_run.Outcome(name, "ok", 1.0))
    meta = {
        "run_id": run.name,
        "started": "now",
        "seconds": 3.0,
        "command": "runner.py",
        "environment": env,
        "parameters": {"given": {}, "resolved": p.to_dict()},
        "interrupted": interrupted,
    }
    report.write(run, report.summarize(run, meta, outcomes))
    return run


@pytest.mark.parametrize("inside", ["latest", "r", "r/sub", "published"])
def test_output_dir_inside_a_run_folder_is_refused(tmp_path, inside):
    """``--output-dir outputs/latest`` (or any run folder, or a published copy) would nest a run
    inside another: a setup error, nothing written."""
    from latency_lab.run import report

    run = _fake_run(tmp_path / "r")
    (tmp_path / "latest").symlink_to("r")
    report.publish(run, tmp_path / "published")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    proc = run_runner("--output-dir", str(tmp_path / inside), "--notebooks", "01", timeout=120)
    assert proc.returncode == 2 and "the run folder" in proc.stderr
    assert "give the folder that holds the runs" in proc.stderr
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("what", ["folder", "file"])
def test_latest_that_is_not_a_link_is_a_setup_error(tmp_path, what):
    """A real ``latest`` (``runner.py publish RUN DIR/latest`` made one before) is refused before any
    notebook runs, and left as it is; made while a run ran, it is left too and named."""
    latest = tmp_path / "latest"
    latest.mkdir() if what == "folder" else latest.write_text("mine")
    proc = run_runner("--output-dir", str(tmp_path), "--notebooks", "01", timeout=120)
    assert proc.returncode == 2 and f"its latest is a {what}, not the link" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest"] and latest.is_symlink() is False
    run = tmp_path / "r"
    run.mkdir()
    assert "is not a link; left as it is" in run_folder.point_latest(tmp_path, run)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "r"]  # no temporary link left


def test_empty_output_dir_is_rejected(tmp_path):
    proc = run_runner("--output-dir", "", timeout=120)
    assert proc.returncode == 2 and "invalid --output-dir ''" in proc.stderr


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda d: (d / "file").write_text("x") and d / "file", "is a file"),
        (lambda d: (d / "file").write_text("x") and d / "file" / "sub", "is a file"),
        (lambda d: Path("/proc"), "invalid --output-dir '/proc': not writable"),  # root too: nothing can be made there
    ],
)
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
    _notebook(
        nbdir / "01_ok.ipynb",
        "from latency_lab.core import parameters as P, results\n"
        "p = P.validate(preset=preset)\n"
        "results.save(output_dir, '01_ok', p, {}, results.key_table('ok', [{'x': 1}]))",
    )
    _notebook(nbdir / "02_fails.ipynb", "raise RuntimeError('deliberate failure')")
    _notebook(
        nbdir / "03_after.ipynb",
        "from latency_lab.core import parameters as P, results\n"
        "results.save(output_dir, '03_after', P.validate(), {}, results.key_table('after', [{'y': 2}]))",
    )
    proc = run_runner(
        "--notebook-dir", str(nbdir), "--output-dir", str(out), "--run-id", "r", "--preset", "tiny", timeout=600
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED: 02_fails" in proc.stdout
    assert "IPKernelApp" not in proc.stderr, proc.stderr  # no kernel log between the progress lines
    summary = json.loads((out / "r" / "summary.json").read_text())
    status = {n["name"]: n for n in summary["notebooks"]}
    assert status["01_ok"]["status"] == "ok" and status["03_after"]["status"] == "ok"
    assert status["02_fails"]["status"] == "failed"
    assert (
        status["02_fails"]["error"]["ename"] == "RuntimeError" and "deliberate" in status["02_fails"]["error"]["evalue"]
    )
    for f in ("01_ok.results.json", "03_after.results.json", "02_fails.ipynb", "02_fails.html", "index.html"):
        assert (out / "r" / f).is_file(), f
    page = (out / "r" / "index.html").read_text()
    assert "some notebooks failed" in page and "deliberate failure" in page


def test_progress_lines_reach_a_pipe_while_the_notebook_runs(tmp_path):
    """``runner.py | tee log``: a notebook's progress lines (``progress.say``, as the builds and timing
    rounds print them) come through the pipe as they are said, indented under the notebook's line;
    its other output stays in the notebook."""
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    _notebook(
        nbdir / "01_says.ipynb",
        "import time\nfrom latency_lab.core.progress import say\n"
        "print('a table row')\nsay('eager: building (first call: trace and compile) ...')\ntime.sleep(4)",
    )
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "runner.py"), "--notebook-dir", str(nbdir), "--output-dir", str(tmp_path / "out")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # the kernel imports this checkout's package, and what PYTHONPATH had (the GPU machine's bundle)
        env=cpu_environment(PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))),
    )
    lines = [(time.perf_counter(), line.rstrip("\n")) for line in proc.stdout]
    proc.wait(timeout=300)
    text = [line for _, line in lines]
    start, said, end = (
        next(i for i, t in enumerate(text) if t.startswith(prefix))
        for prefix in ("[1/1] 01_says ...", "    eager: building (first call", "[1/1] 01_says ok")
    )
    assert start < said < end, (text, proc.stderr.read())
    assert lines[end][0] - lines[said][0] > 2, "the line came only when the notebook ended"
    assert "a table row" not in "\n".join(text)


def test_list_into_a_reader_that_stops_early_ends_quietly():
    """``runner.py --list | head -1``: no BrokenPipeError traceback, exit 0."""
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "runner.py"), "--list"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cpu_environment(),
    )
    assert proc.stdout.readline().strip() == NOTEBOOKS[0].encode()
    proc.stdout.close()
    assert proc.wait(timeout=120) == 0
    err = proc.stderr.read().decode()
    assert "BrokenPipeError" not in err and "Traceback" not in err, err


def test_a_timeout_names_the_cells_first_line_not_its_source_as_a_list():
    """nbclient's timeout message previews a long cell as Python lists of its lines: the terminal line
    and the index show the cell's first line instead (the error's ``first_line``), on one line."""
    from nbclient.exceptions import CellTimeoutError

    from latency_lab.run import run_page

    source = "import plotly.express as px\n" + "\n".join(f"x{i} = {i}" for i in range(12))
    for cell in (source, "import time\ntime.sleep(60)"):
        e = CellTimeoutError.error_from_timeout_and_cell("Cell execution timed out", 5, nbformat.v4.new_code_cell(cell))
        error = {"cell": 3, "first_line": notebook_run.first_line(cell), "ename": type(e).__name__, "evalue": str(e)}
        line = notebook_run.error_line(error)
        first = cell.splitlines()[0]
        assert line == (
            "cell 3: CellTimeoutError: A cell timed out while it was being executed, after 5 seconds. "
            f"The message was: Cell execution timed out; the cell's first line: {first}"
        ), line
        assert run_page._error({"error": error}) == line


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
    with notebook_run.kernel_environment(CPU_ONLY):
        outcome = notebook_run.execute(tmp_path / "01_ok.ipynb", run_dir, {}, notebook_run.kernel_name(), 120, False)
    assert outcome.status == "failed" and outcome.error["ename"] == "HTMLExportError"
    assert "exporter broke" in outcome.error["evalue"] and outcome.files == {"ipynb": "01_ok.ipynb"}
    assert (run_dir / "01_ok.ipynb").is_file()


def test_dead_kernel_and_timeout_name_their_cell(tmp_path):
    nbdir, out = tmp_path / "nbs", tmp_path / "out"
    nbdir.mkdir()
    _notebook(nbdir / "01_dies.ipynb", "import os\nos._exit(1)")
    _notebook(nbdir / "02_hangs.ipynb", "import time\ntime.sleep(60)")
    proc = run_runner(
        "--notebook-dir", str(nbdir), "--output-dir", str(out), "--run-id", "r", "--timeout", "5", timeout=300
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    status = {n["name"]: n for n in json.loads((out / "r" / "summary.json").read_text())["notebooks"]}
    for name in ("01_dies", "02_hangs"):  # cells: parameters, papermill's injected parameters, the culprit
        assert status[name]["status"] == "failed" and status[name]["error"]["cell_index"] == 2, status[name]
        assert status[name]["error"]["cell"] == 3, status[name]  # its In [3], recorded or not
    assert "DeadKernel" in status["01_dies"]["error"]["ename"]
    assert "Timeout" in status["02_hangs"]["error"]["ename"] or "timed out" in status["02_hangs"]["error"]["evalue"]
    assert re.search(r"01_dies failed in [\d.]+ s: cell 3: DeadKernelError", proc.stdout), proc.stdout
    _assert_stopped_here(out / "r", status["01_dies"], "DeadKernelError: Kernel died")
    timed_out = "CellTimeoutError: A cell timed out while it was being executed, after 5 seconds"
    _assert_stopped_here(out / "r", status["02_hangs"], timed_out)
    assert "Traceback" not in proc.stderr and "zmq" not in proc.stderr, proc.stderr  # issue 19: after the timeout


@pytest.mark.parametrize("disk", ["tmpfs-64k", "fsize-300k", "fsize-2k"])
def test_full_disk_loses_nothing_and_leaves_no_temporaries(tmp_path, disk):
    """Issue 19's 64 KB tmpfs (where it can be mounted here), and a file-size limit (RLIMIT_FSIZE) on
    the runner and its kernels: files are whole or absent (never a 0-byte summary), no temporary
    file is left, the cache folder is gone, and one line says what could not be written."""
    import resource

    nbdir, out, temp = tmp_path / "nbs", tmp_path / "out", tmp_path / "temp"
    nbdir.mkdir(), out.mkdir(), temp.mkdir()
    _notebook(
        nbdir / "01_ok.ipynb",
        "from latency_lab.core import parameters as P, results\n"
        "results.save(output_dir, '01_ok', P.validate(preset=preset), {}, results.key_table('ok', [{'x': 1}]))",
    )
    limit = None
    if disk.startswith("tmpfs"):
        mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(out)], capture_output=True)
        if mount.returncode:
            pytest.skip("cannot mount a tmpfs here (needs root)")
    else:
        limit = {"fsize-300k": 300_000, "fsize-2k": 2_000}[disk]
    try:
        proc = subprocess.run(
            [
                sys.executable,
                str(ROOT / "runner.py"),
                "--notebook-dir",
                str(nbdir),
                "--output-dir",
                str(out),
                "--run-id",
                "r",
                "--preset",
                "tiny",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            env=cpu_environment(TMPDIR=str(temp)),
            preexec_fn=limit and (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))),
        )
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
        assert "runner.py: error: could not write " in proc.stderr and "report.html" in proc.stderr, proc.stderr
        files = {f.name: f for f in (out / "r").iterdir()}
        assert not [n for n in files if n.endswith(".tmp")], files
        for name, f in files.items():
            if name.endswith(".json"):
                json.loads(f.read_text())  # whole
        if "summary.json" in files:
            assert json.loads(files["summary.json"].read_text())["notebooks"][0]["name"] == "01_ok"
        else:
            assert "summary.json" in proc.stderr
        if run_folder.usable(out / "r"):
            assert (out / "latest").resolve() == (out / "r").resolve()
        else:  # its one results file did not fit (2 KB): no usable run to point latest at
            assert not os.path.lexists(out / "latest") and "there is no" in proc.stdout, proc.stdout
        assert list(temp.iterdir()) == []
    finally:
        if disk.startswith("tmpfs"):
            subprocess.run(["umount", str(out)], check=True)


# --- publish -------------------------------------------------------------------------------------------


def test_publish_says_what_it_publishes_and_needs_incomplete_for_an_interrupted_run(tmp_path):
    run = _fake_run(tmp_path / "cut", interrupted="SIGINT")
    proc = run_runner("publish", str(run), str(tmp_path / "pub"), timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert (
        "is incomplete (interrupted (SIGINT); 02_y interrupted); to publish it as it is, add --incomplete"
        in proc.stderr
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut"]
    proc = run_runner("publish", str(run), str(tmp_path / "pub"), "--incomplete", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "published run cut (interrupted (SIGINT); 02_y interrupted)" in proc.stdout
    assert "01_x ok · 02_y interrupted" in proc.stdout and "01_x.results.json, environment.json" in proc.stdout
    published = json.loads((tmp_path / "pub" / "summary.json").read_text())
    assert published["published"]["from"] == str(run.resolve()) and published["interrupted"] == "SIGINT"
    assert "interrupted (SIGINT)" in (tmp_path / "pub" / "index.html").read_text()


def test_runs_that_together_hold_the_suite_publish_as_one(tmp_path):
    """A suite run in two calls (01_x, then 02_y): one published folder, one index; a notebook in
    both runs, or runs on another stack, are refused with the reason and nothing written."""
    a, b = _fake_run(tmp_path / "a", names=("01_x",)), _fake_run(tmp_path / "b", names=("02_y",))
    proc = run_runner("publish", str(a), str(b), str(tmp_path / "pub"), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "published run a+b (complete)" in proc.stdout and "01_x ok · 02_y ok" in proc.stdout
    published = json.loads((tmp_path / "pub" / "summary.json").read_text())
    assert [n["name"] for n in published["notebooks"]] == ["01_x", "02_y"] and published["runs"] == ["a", "b"]
    assert sorted(p.name for p in (tmp_path / "pub").glob("*.results.json")) == [
        "01_x.results.json",
        "02_y.results.json",
    ]
    assert "01_x" in (tmp_path / "pub" / "index.html").read_text() and published["seconds"] == 6.0
    twice = run_runner("publish", str(a), str(_fake_run(tmp_path / "c")), str(tmp_path / "pub2"), timeout=120)
    assert twice.returncode == 2 and "notebook 01_x is in both" in twice.stderr, twice.stderr
    other = _fake_run(tmp_path / "d", names=("02_y",), torch="2.11.0")
    stack = run_runner("publish", str(a), str(other), str(tmp_path / "pub3"), timeout=120)
    assert stack.returncode == 2 and "ran on another stack" in stack.stderr and "packages differ" in stack.stderr
    assert not (tmp_path / "pub2").exists() and not (tmp_path / "pub3").exists()


@pytest.mark.parametrize(
    "damage, fragment",
    [
        ("no summary", "is not a run folder: summary.json: No such file"),
        ("truncated summary", "summary.json is not readable JSON (truncated?)"),
        ("summary of the wrong shape", "summary.json is not a run summary"),
        ("no environment.json", None),
    ],
)
def test_publish_of_a_damaged_run_is_an_error_or_says_what_it_did(tmp_path, damage, fragment):
    run = _fake_run(tmp_path / "r")
    summary = run / "summary.json"
    if damage == "no summary":
        summary.unlink()
    elif damage == "truncated summary":
        summary.write_text(summary.read_text()[:100])
    elif damage == "summary of the wrong shape":
        summary.write_text(json.dumps({"notebooks": [5]}))
    else:
        (run / "environment.json").unlink()
    proc = run_runner("publish", str(run), str(tmp_path / "pub"), timeout=120)
    assert "Traceback" not in proc.stderr
    if fragment:
        assert proc.returncode == 2 and fragment in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]  # no half-made destination: a retry can succeed
    else:  # the summary's environment record is published as environment.json
        assert proc.returncode == 0, proc.stderr
        assert json.loads((tmp_path / "pub" / "environment.json").read_text())["cpu"] == "test CPU"


@pytest.mark.parametrize(
    "dest, fragment",
    [
        ("latest", "'latest' is the name of the runner's link"),
        ("r/inside", "would lie inside the run folder"),
        ("r", "exists; publish into a new folder"),
    ],
)
def test_publish_refuses_destinations_that_would_break_runs(tmp_path, dest, fragment):
    run = _fake_run(tmp_path / "r")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    proc = run_runner("publish", str(run), str(tmp_path / dest), timeout=120)
    assert proc.returncode == 2 and fragment in proc.stderr, proc.stderr
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_publish_is_all_or_nothing(tmp_path):
    """A publish that fails part-way (a file-size limit: plotly.js does not fit) leaves no
    destination and no temporary folder; the same command then succeeds."""
    import resource

    run = _fake_run(tmp_path / "r")
    cmd = [sys.executable, str(ROOT / "runner.py"), "publish", str(run), str(tmp_path / "pub")]
    proc = subprocess.run(
        cmd,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (500_000, 500_000)),
    )
    assert proc.returncode == 2 and "File too large" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]
    assert subprocess.run(cmd, cwd=ROOT, capture_output=True, timeout=120).returncode == 0
    assert {p.name for p in (tmp_path / "pub").iterdir()} == {
        "01_x.results.json",
        "02_y.results.json",
        "summary.json",
        "environment.json",
        "index.html",
        "plotly.packed.js",
    }


# --- signals: Ctrl-C, SIGTERM, a closed terminal's SIGHUP, to runner.py and to tasks.py -------------------


def _interruptible(tmp_path: Path) -> tuple[Path, Path]:
    """Notebooks 01 (quick, writes results), 02 (writes its kernel's pid to the file returned, then
    sleeps) and 03; and that pid file."""
    nbdir, pid_file = tmp_path / "nbs", tmp_path / "kernel.pid"
    nbdir.mkdir()
    _notebook(
        nbdir / "01_quick.ipynb",
        "from latency_lab.core import parameters as P, results\n"
        "results.save(output_dir, '01_quick', P.validate(preset=preset), {}, results.key_table('q', [{'x': 1}]))",
    )
    _notebook(
        nbdir / "02_slow.ipynb",
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)",
    )
    _notebook(nbdir / "03_never.ipynb", "x = 3")
    (tmp_path / "temp").mkdir()  # the runner's temp folder: its compile cache and kernel connection files
    return nbdir, pid_file


def _start(tmp_path: Path, nbdir: Path, *prefix: str, run_id="r", args=(), **popen) -> subprocess.Popen:
    """``runner.py`` (or ``prefix``, e.g. tasks.py run) on ``nbdir`` into ``tmp_path/out/<run_id>``
    (``args`` added), with ``tmp_path/temp`` as its temp folder."""
    cmd = [
        *(prefix or (sys.executable, str(ROOT / "runner.py"))),
        "--notebook-dir",
        str(nbdir),
        "--output-dir",
        str(tmp_path / "out"),
        "--run-id",
        run_id,
        *args,
    ]
    popen = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **popen}
    return subprocess.Popen(cmd, cwd=ROOT, env=cpu_environment(TMPDIR=str(tmp_path / "temp")), **popen)


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert path.exists(), proc.communicate(timeout=60) if proc.stdout else proc.poll()


def _assert_marked(tmp_path: Path, signum: int) -> dict:
    """The run folder says it was interrupted by ``signum``, which notebooks finished, which was
    cut (with its time and partial files) and which never ran; ``latest`` points at it; the
    compile cache and the kernels' connection files are gone from the temp folder."""
    run = tmp_path / "out" / "r"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["interrupted"] == signal.Signals(signum).name and not summary["ok"]
    assert [(n["name"], n["status"]) for n in summary["notebooks"]] == [
        ("01_quick", "ok"),
        ("02_slow", "interrupted"),
        ("03_never", "not run"),
    ]
    cut = summary["notebooks"][1]
    assert cut["seconds"] > 0.5 and cut["files"] == {"ipynb": "02_slow.ipynb", "html": "02_slow.html"}, cut
    assert cut["error"]["ename"] == "Interrupted" and cut["error"]["cell_index"] == 2
    _assert_stopped_here(run, cut, f"Interrupted: {signal.Signals(signum).name}")
    page = (run / "index.html").read_text()
    assert f"interrupted ({signal.Signals(signum).name})" in page
    assert "the run was interrupted in this notebook" in page and "not run: the run stopped before it" in page
    assert "the notebook failed" not in page
    assert (tmp_path / "out" / "latest").resolve() == run.resolve()
    assert list((tmp_path / "temp").iterdir()) == []
    return summary


def _assert_stopped_here(run: Path, n: dict, what: str) -> None:
    """Notebook ``n`` (its summary entry) was cut short: its executed notebook and that notebook's HTML
    carry one marker cell, right after the cell it stopped in, saying ``what`` stopped it, that cell's
    number and first line and the seconds the index shows (with the same line); no cell after it ran."""
    nb = nbformat.read(run / n["files"]["ipynb"], as_version=4)
    marked = [i for i, c in enumerate(nb.cells) if notebook_run.STOPPED in c.metadata.get("tags", [])]
    assert len(marked) == 1 and marked[0] == n["error"]["cell_index"] + 1, (marked, n["error"])
    stopped_in, marker = nb.cells[marked[0] - 1], html.unescape(nb.cells[marked[0]].source)
    assert n["error"]["cell"] is not None and stopped_in.execution_count in (n["error"]["cell"], None), n["error"]
    said = f"The notebook stopped here, after {n['seconds']:.1f} s: cell {n['error']['cell']}: {what}"
    first = f"; the cell's first line: {notebook_run.first_line(stopped_in.source)}</b>"
    assert said in marker and first in marker and "The cells below did not run." in marker, marker
    assert all(c.get("execution_count") is None for c in nb.cells[marked[0] + 1 :] if c.cell_type == "code")
    page = html.unescape((run / n["files"]["html"]).read_text())
    assert '<div class="alert alert-danger"><b>' + said in page and first in page
    index = html.unescape((run / "index.html").read_text())  # its line for the notebook: the same facts
    assert said.split(" s: ", 1)[1] in index and first.removesuffix("</b>") in index


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_interrupt_stops_kills_the_kernel_and_marks_the_run(tmp_path, signum):
    nbdir, pid_file = _interruptible(tmp_path)
    proc = _start(tmp_path, nbdir, text=True)
    _wait_for(pid_file, proc)
    kernel = int(pid_file.read_text())
    time.sleep(1)  # the cut notebook runs a while: its seconds must say so
    sent = time.monotonic()
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=60)
    assert time.monotonic() - sent < 20
    assert proc.returncode == 128 + signum, stdout + stderr
    assert "INTERRUPTED" in stdout and "Traceback" not in stderr
    time.sleep(1)
    assert not psutil.pid_exists(kernel) or psutil.Process(kernel).status() == psutil.STATUS_ZOMBIE
    assert _assert_marked(tmp_path, signum)["notebooks"][1]["seconds"] >= 1


def test_a_run_whose_reader_leaves_stops_then_as_interrupted(tmp_path):
    """``runner.py | head``: once the pipe's reader has gone, the run stops within seconds (SIGPIPE, exit 141)
    and is marked as any interrupted run, rather than running on until its next line fails to print."""
    nbdir, pid_file = _interruptible(tmp_path)
    proc = _start(tmp_path, nbdir, text=True)
    _wait_for(pid_file, proc)
    time.sleep(1)
    left = time.monotonic()
    proc.stdout.close()  # the reader leaves while notebook 02 sleeps for 300 s
    proc.wait(timeout=60)
    assert time.monotonic() - left < 20 and proc.returncode == 128 + signal.SIGPIPE, proc.stderr.read()
    assert "Traceback" not in proc.stderr.read()
    _assert_marked(tmp_path, signal.SIGPIPE)


@pytest.mark.parametrize(
    "signum, when",
    [
        (signal.SIGINT, "before"),
        (signal.SIGTERM, "before"),
        (signal.SIGHUP, "before"),
        (signal.SIGINT, 0),
        (signal.SIGTERM, 0.005),
        (signal.SIGHUP, 0.05),
    ],
)
def test_signal_during_start_up_writes_nothing_or_marks_the_run(tmp_path, signum, when):
    """A signal before the run folder exists ends the runner with one line, nothing written; one as
    the folder appears (``when`` seconds after) finishes the run as interrupted, all notebooks not
    run: never an unmarked folder, a traceback or a compile-cache folder left behind."""
    nbdir, _ = _interruptible(tmp_path)
    proc = _start(tmp_path, nbdir, text=True)
    run = tmp_path / "out" / "r"
    if when == "before":
        time.sleep(0.5)  # importing torch
    else:
        deadline = time.monotonic() + 120
        while not run.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert run.exists()
        time.sleep(when)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum and "Traceback" not in stderr, stdout + stderr
    assert list((tmp_path / "temp").iterdir()) == []
    if when == "before":
        assert not (tmp_path / "out").exists()
        name = signal.Signals(signum).name
        assert stderr == f"runner.py: interrupted ({name}) before any notebook started; nothing written\n", stderr
        return
    summary = json.loads((run / "summary.json").read_text())
    assert summary["interrupted"] == signal.Signals(signum).name
    assert {n["status"] for n in summary["notebooks"]} <= {"not run", "interrupted"}
    assert (run / "index.html").is_file()
    assert not os.path.lexists(tmp_path / "out" / "latest")  # no notebook wrote results: no usable run to point at
    assert "no notebook of this run wrote results" in stdout


def test_stop_raises_until_held_and_keeps_the_first_signal():
    """``interrupts.Stop`` with real signals to this process: an ``Interrupted`` that library code
    swallowed is raised again by the next signal; held, a signal is only recorded, and ``arm``
    raises it; the exit status is the first signal's."""
    from latency_lab.run import interrupts

    previous = signal.getsignal(signal.SIGINT)
    with interrupts.Stop().installed() as stop:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except BaseException:  # as a library's bare except would
            pass
        with pytest.raises(interrupts.Interrupted) as err:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        assert err.value.code == 128 + signal.SIGTERM
        stop.hold()
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.2)  # recorded, not raised
        with pytest.raises(interrupts.Interrupted):
            stop.arm()
    assert signal.getsignal(signal.SIGINT) is previous


def test_what_an_interruption_leaves_half_made_ends_without_a_traceback(capfd):
    """A CI failure of 2026-12-08: SIGHUP landed inside asyncio's event loop constructor, and the half-made loop's
    finalizer printed "Exception ignored in ... Traceback" on the runner's stderr. Before a stop such an error
    is printed (the hook is Python's); once one is received it is not."""
    from latency_lab.run import interrupts

    class HalfMade:
        def __del__(self):
            raise AttributeError("'HalfMade' object has no attribute '_ssock'")

    seen, hook = [], sys.unraisablehook
    sys.unraisablehook = seen.append  # as Python's own hook, which prints (pytest's hook stands in for it)
    try:
        HalfMade()
        assert len(seen) == 1
        with interrupts.Stop().installed():
            with pytest.raises(interrupts.Interrupted):
                os.kill(os.getpid(), signal.SIGHUP)
                time.sleep(5)
            HalfMade()
        assert len(seen) == 1 and capfd.readouterr().err == ""
    finally:
        sys.unraisablehook = hook


def test_a_signal_inside_an_event_loop_callback_or_task_stops_the_loop():
    """The CI failure of stop 29: the SIGINT that should cut a kernel's start landed in one of
    papermill's asyncio callbacks, which dropped the exception, and the run went on. Raised from a
    callback, then from a background task, ``Interrupted`` leaves ``asyncio.run``."""
    import asyncio

    from latency_lab.run import interrupts

    def kill() -> None:
        os.kill(os.getpid(), signal.SIGINT)

    async def background() -> None:
        kill()

    async def main(where: str) -> None:
        if where == "callback":
            asyncio.get_running_loop().call_soon(kill)
        else:
            asyncio.ensure_future(background())  # nobody awaits it
        await asyncio.sleep(5)

    for where in ("callback", "task"):
        with interrupts.Stop().installed(), pytest.raises(interrupts.Interrupted):
            asyncio.run(main(where))


def _kernel_started(pid: int) -> bool:
    for child in psutil.Process(pid).children():
        try:
            if "ipykernel" in " ".join(child.cmdline()):
                return True
        except psutil.Error:  # gone meanwhile
            pass
    return False


def test_interrupt_while_a_kernel_starts_leaves_no_connection_file(tmp_path):
    """A signal as the first kernel starts (its manager never gets to clean up): the kernel's
    connection file, in the runner's temp folder, is removed with the kernel."""
    nbdir, _ = _interruptible(tmp_path)
    proc = _start(tmp_path, nbdir, text=True)
    deadline = time.monotonic() + 120
    while not _kernel_started(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    assert proc.poll() is None, proc.communicate(timeout=60)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in stderr, stdout + stderr
    assert list((tmp_path / "temp").iterdir()) == []
    summary = json.loads((tmp_path / "out" / "r" / "summary.json").read_text())
    assert [n["status"] for n in summary["notebooks"]] == ["interrupted", "not run", "not run"]


TINY_CPU = ("--preset", "tiny", "--device", "cpu")
REFERENCE = ROOT / "outputs" / "reference-h100"


def test_a_run_cut_before_any_results_leaves_latest_compare_and_the_start_page_at_the_last_usable_run(tmp_path, capsys):
    """Issue 24: one Ctrl-C before any notebook of a run wrote results. ``latest`` stays at the last run
    that did, and ``compare REFERENCE latest`` (the README's command) and the start page take that run;
    the cut run, named itself, is a one-line error that says why."""
    out = tmp_path / "out"
    (tmp_path / "temp").mkdir()
    full = run_runner(*TINY_CPU, "--notebooks", "01", "--output-dir", str(out), "--run-id", "full", timeout=300)
    assert full.returncode == 0, full.stdout + full.stderr
    proc = _start(tmp_path, notebook_run.NOTEBOOK_DIR, run_id="cut", args=(*TINY_CPU, "--notebooks", "01"), text=True)
    deadline = time.monotonic() + 120
    while not _kernel_started(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and not run_folder.usable(out / "cut"), stdout + stderr
    assert f"{out / 'latest'} stays at full, the last usable run" in stdout, stdout
    assert (out / "latest").resolve() == (out / "full").resolve() == run_folder.last_usable(out).resolve()
    capsys.readouterr()
    assert compare.main([str(REFERENCE), "latest", "--all", "--output-dir", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"B: full ({(out / 'full').resolve()})" in said and "02_executor_timing: only in A (reference-h100)" in said
    assert compare.main(["full", "cut", "--output-dir", str(out)]) == 2
    assert "holds no *.results.json file: no notebook of that run finished" in capsys.readouterr().err
    page = start_page.text(outputs=out)
    assert "*here*: this machine's last usable run, `outputs/latest` (full: tiny preset, cpu)" in page, page
    seconds = json.loads((out / "full" / "summary.json").read_text())["notebooks"][0]["seconds"]
    assert re.search(rf"\(01_model_setup\.ipynb\) \| [^|]+ \| {seconds:.0f} s \|", page), page


def test_a_run_of_08_alone_is_never_latest(tmp_path):
    """``runner.py ab`` writes a run of 08 alone: however recent, ``latest`` (and so ``compare latest``
    and the start page) stays at the investigation's last run; a whole run that includes 08 is it."""
    for name, files, when in (("suite", ["02_executor_timing"], 100), ("ab", ["08_ab_builds"], 200)):
        (tmp_path / name).mkdir()
        for stem in files:
            f = tmp_path / name / f"{stem}{results.SUFFIX}"
            f.write_text("{}")
            os.utime(f, (when, when))
    assert run_folder.last_usable(tmp_path) == tmp_path / "suite"
    (tmp_path / "whole").mkdir()
    for stem, when in (("02_executor_timing", 300), ("08_ab_builds", 310)):
        f = tmp_path / "whole" / f"{stem}{results.SUFFIX}"
        f.write_text("{}")
        os.utime(f, (when, when))
    assert run_folder.last_usable(tmp_path) == tmp_path / "whole"


def test_the_interactive_scratch_folder_is_never_latest_nor_a_run_id(tmp_path):
    """A notebook run by hand writes into ``outputs/interactive``: however recent, it is not the last
    usable run, and ``--run-id interactive`` is refused; when a run that wrote nothing moves the link
    (it named another folder), the note says where it points now."""
    for name, when in (("seed", 100), ("interactive", 200)):
        (tmp_path / name).mkdir()
        f = tmp_path / name / f"01_model_setup{results.SUFFIX}"
        f.write_text("{}")
        os.utime(f, (when, when))
    assert run_folder.last_usable(tmp_path) == tmp_path / "seed"
    with pytest.raises(run_folder.SetupError, match="not 'latest' or 'interactive'"):
        run_folder.check_run_id("Interactive")
    link = tmp_path / "latest"
    assert "there is no" in run_folder.latest_moved(tmp_path / "none", None, None)
    link.symlink_to("interactive")
    assert run_folder.point_latest(tmp_path, tmp_path / "seed") is None
    said = run_folder.latest_moved(tmp_path, "interactive", tmp_path / "seed")
    assert said == f"{link} now points at seed, the last usable run (it pointed at interactive)", said
    assert run_folder.latest_moved(tmp_path, "seed", tmp_path / "seed") == f"{link} stays at seed, the last usable run"


def test_a_run_cut_in_its_second_notebook_is_the_last_usable_run_and_compares_on_the_first(tmp_path, capsys):
    """Issue 24: Ctrl-C while 02 runs, 01 done. The run is the last usable one (``latest``, the start page)
    and compares on 01, 02 named as skipped; 02's executed notebook and HTML say where it stopped."""
    out = tmp_path / "out"
    (tmp_path / "temp").mkdir()
    proc = _start(
        tmp_path, notebook_run.NOTEBOOK_DIR, run_id="cut", args=(*TINY_CPU, "--notebooks", "01,02"), text=True
    )
    executed, deadline = out / "cut" / "02_executor_timing.ipynb", time.monotonic() + 180
    while (notebook_run.last_started_cell(executed)["cell_index"] or 0) < 3 and proc.poll() is None:
        assert time.monotonic() < deadline  # 02 past its parameters cells
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    summary = json.loads((out / "cut" / "summary.json").read_text())
    assert [(n["name"], n["status"]) for n in summary["notebooks"]] == [
        ("01_model_setup", "ok"),
        ("02_executor_timing", "interrupted"),
    ]
    _assert_stopped_here(out / "cut", summary["notebooks"][1], "Interrupted: SIGINT")
    assert (out / "latest").resolve() == (out / "cut").resolve() and "not moved" not in stdout
    capsys.readouterr()
    assert compare.main([str(REFERENCE), "latest", "--output-dir", str(out)]) == 0
    report = json.loads((out / "compare-reference-h100-vs-cut.json").read_text())
    assert report["notebooks"] == ["01_model_setup"], report["notebooks"]
    assert "02_executor_timing: only in A (reference-h100)" in report["skipped"], report["skipped"]
    page = start_page.text(outputs=out)
    assert "last usable run, `outputs/latest` (cut: tiny preset, cpu, interrupted (SIGINT))" in page, page


def test_the_start_page_shows_the_reference_runs_time_per_notebook(tmp_path):
    """Issue 24: each notebook's seconds in the published reference (00-08), the column headed and the
    folder named below the table; a notebook it lacks reads as a dash."""
    page = start_page.text(outputs=tmp_path)
    summary = json.loads((REFERENCE / "summary.json").read_text())
    seconds = {n["name"]: n["seconds"] for n in summary["notebooks"]}
    assert "| notebook | answers | here | reference |" in page
    for name in notebook_run.discover():
        there = f"{seconds[name]:.0f} s" if name in seconds else "—"
        assert re.search(rf"\({name}\.ipynb\) \| [^|]+ \| — \| {there} \|", page), (name, page)
    assert set(seconds) == set(notebook_run.discover())  # every notebook has its time there
    assert f"*reference*: `outputs/reference-h100` ({summary['run_id']}: seed preset, cuda)" in page
    partial = tmp_path / "ref"
    partial.mkdir()
    summary["notebooks"] = [n for n in summary["notebooks"] if n["name"] != "07_levers"]
    (partial / "summary.json").write_text(json.dumps(summary))
    assert re.search(
        r"\(07_levers\.ipynb\) \| [^|]+ \| — \| — \|", start_page.text(outputs=tmp_path, reference=partial)
    )


def _tasks(*args: str) -> list[str]:
    if not tasks.is_set_up():
        pytest.skip(f"{tasks.VENV} is not set up: tasks.py would install it first")
    return [sys.executable, str(ROOT / "tasks.py"), *args]


@pytest.mark.parametrize("signum, to_group", [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGHUP, False)])
def test_signals_to_tasks_py_run_reach_the_runner_which_marks_the_run(tmp_path, signum, to_group):
    """As in issue 19: ``setsid python3 tasks.py run ...; kill -INT -- -PGID``; and SIGTERM or SIGHUP
    to tasks.py alone. tasks.py passes the signal on, waits, and exits with the runner's status."""
    nbdir, pid_file = _interruptible(tmp_path)
    proc = _start(tmp_path, nbdir, *_tasks("run"), text=True, start_new_session=True)
    _wait_for(pid_file, proc)
    time.sleep(1)
    if to_group:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, stdout + stderr
    assert "INTERRUPTED" in stdout and "Traceback" not in stderr
    _assert_marked(tmp_path, signum)


def _wait_status(pid: int, stopped: bool, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while (psutil.Process(pid).status() == psutil.STATUS_STOPPED) != stopped and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (psutil.Process(pid).status() == psutil.STATUS_STOPPED) == stopped, psutil.Process(pid).status()


def test_ctrl_c_in_a_terminal_stops_tasks_py_run_cleanly(tmp_path):
    """Ctrl-C typed on the terminal ``python3 tasks.py run`` runs in (a pseudo-terminal here): exit
    130, a marked run folder, ``latest`` moved, no cache folder, no traceback. Before it, Ctrl-Z
    stops tasks.py and the runner, and a SIGCONT to tasks.py (the shell's ``fg``) resumes both."""
    import fcntl
    import termios
    import threading

    nbdir, pid_file = _interruptible(tmp_path)
    master, slave = os.openpty()
    proc = _start(
        tmp_path,
        nbdir,
        *_tasks("run"),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
    )  # the terminal becomes tasks.py's
    os.close(slave)
    shown = bytearray()

    def read():
        try:
            while chunk := os.read(master, 4096):
                shown.extend(chunk)
        except OSError:  # the terminal closed
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        _wait_for(pid_file, proc)
        runner = psutil.Process(proc.pid).children()[0]
        os.write(master, b"\x1a")  # Ctrl-Z
        _wait_status(runner.pid, stopped=True)
        _wait_status(proc.pid, stopped=True)
        os.kill(proc.pid, signal.SIGCONT)  # fg
        _wait_status(runner.pid, stopped=False)
        time.sleep(1)
        os.write(master, b"\x03")  # Ctrl-C
        assert proc.wait(timeout=60) == 130, shown.decode(errors="replace")
    finally:
        proc.kill() if proc.poll() is None else None
        reader.join(timeout=5)
        os.close(master)
    text = shown.decode(errors="replace")
    assert "INTERRUPTED (SIGINT)" in text and "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert "Kernel died while waiting" not in text, text  # nbclient's log line: the runner says what stopped it
    _assert_marked(tmp_path, signal.SIGINT)


CHILD = """import os, signal, sys, time
got = []
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, lambda n, f: got.append(signal.Signals(n).name))
open(sys.argv[1], "w").write(str(os.getpid()))
end = time.monotonic() + 3
while time.monotonic() < end:
    time.sleep(0.05)
open(sys.argv[1], "w").write(" ".join(got))
sys.exit(len(got))
"""


@pytest.mark.parametrize("signum, to_group", [(signal.SIGINT, True), (signal.SIGTERM, True), (signal.SIGHUP, False)])
def test_tasks_py_passes_each_signal_on_once_and_waits(tmp_path, signum, to_group):
    """``tasks.run_task``, the one way tasks.py starts run, test and lab, in a real process: the task
    gets the signal once whether it was sent to tasks.py's group or to tasks.py alone; tasks.py
    waits for it to end and exits with its status."""
    record = tmp_path / "record"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, tasks; sys.exit(tasks.run_task(sys.argv[1:]))",
            sys.executable,
            "-c",
            CHILD,
            str(record),
        ],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(record, proc, 60)
    time.sleep(0.3)
    os.killpg(proc.pid, signum) if to_group else proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=30)
    assert record.read_text() == signal.Signals(signum).name and proc.returncode == 1, stderr


def test_tasks_py_test_and_lab_end_with_their_task(tmp_path):
    """SIGTERM to ``tasks.py test`` and ``tasks.py lab``: pytest and JupyterLab get it, tasks.py
    exits once they have, with their status; neither runs on as an orphan."""
    test = tmp_path / "test_sleeps.py"
    test.write_text(
        f"import os, time\n\ndef test_sleeps():\n"
        f"    open({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))\n    time.sleep(120)\n"
    )
    lab_port = None  # the OS picks it (none taken by another xdist worker first): the server's info file names it
    for args, started in (
        (("test", str(test), "-p", "no:cacheprovider"), tmp_path / "pid"),
        (
            (
                "lab",
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                "--ServerApp.port=0",
                "--ServerApp.token=",
            ),
            None,
        ),
    ):
        proc = subprocess.Popen(
            _tasks(*args),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=cpu_environment(JUPYTER_RUNTIME_DIR=str(tmp_path / "rt")),  # the server's info file goes there
            start_new_session=True,
        )
        if started:
            _wait_for(started, proc)
        else:
            deadline = time.monotonic() + 120
            while not (lab_port and port_open(lab_port)) and proc.poll() is None and time.monotonic() < deadline:
                lab_port = lab_port or server_port(tmp_path / "rt")
                time.sleep(0.5)
            assert lab_port and port_open(lab_port), proc.communicate(timeout=30)
        task = psutil.Process(proc.pid).children()[0]
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
        assert not task.is_running() or task.status() == psutil.STATUS_ZOMBIE, output
        assert proc.returncode in (0, 143), output  # JupyterLab stops cleanly (0); pytest dies of it (143)
        assert "Traceback" not in output
    assert not port_open(lab_port)


def server_port(runtime_dir: Path) -> int | None:
    """The port of the Jupyter server whose info file is in ``runtime_dir``; None before it wrote one."""
    for info in runtime_dir.glob("jpserver-*.json"):
        try:
            return json.loads(info.read_text())["port"]
        except (OSError, ValueError, KeyError):  # half written
            pass
    return None


def port_open(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_latest_is_replaced_atomically_by_concurrent_runs(tmp_path):
    runs = [tmp_path / f"r{i}" for i in range(8)]
    for r in runs:
        r.mkdir()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        problems = list(pool.map(lambda r: [run_folder.point_latest(tmp_path, r) for _ in range(50)], runs))
    assert problems == [[None] * 50] * 8
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
        nb.cells = [
            params,
            nbformat.v4.new_code_cell(
                "from latency_lab.core import parameters as P, results\n"
                "p = P.from_namespace(globals())\n"
                f"results.save(output_dir, {name!r}, p, {{}}, results.key_table('t', [{{'x': 1}}]))"
            ),
        ]
        nbformat.write(nb, nbdir / f"{name}.ipynb")
    proc = run_runner(
        "--notebook-dir",
        str(nbdir),
        "--output-dir",
        str(out),
        "--run-id",
        "r",
        "--preset",
        "tiny",
        "-p",
        "layers=2",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "note: -p layers is not a parameter of 02_without" in proc.stdout
    ran = {n["name"]: n["params"] for n in json.loads((out / "r" / "summary.json").read_text())["notebooks"]}
    assert ran["01_with"]["layers"] == 2 and ran["02_without"]["layers"] == 1
    assert ran["01_with"]["preset"] == ran["02_without"]["preset"] == "tiny"


@pytest.mark.parametrize("argv, missing", [(["a"], "run_b"), ([], "run_a, run_b")])
def test_compare_names_only_the_runs_it_needs(argv, missing, capsys):
    """``RUN`` (more runs) is optional: a compare short of runs names only ``run_a``/``run_b``."""
    with pytest.raises(SystemExit) as e:
        compare.main(argv)
    assert e.value.code == 2
    assert capsys.readouterr().err.endswith(f"error: the following arguments are required: {missing}\n")


def _stepping_notebook(nbdir: Path, pid_file: Path) -> Path:
    """A notebook whose second cell says a step and ends, and whose third says another, writes its
    kernel's pid to ``pid_file`` and sleeps."""
    nbdir.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('preset = "seed"\noutput_dir = ""')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        params,
        nbformat.v4.new_code_cell("from latency_lab.core.progress import say\nsay('loading the model')"),
        nbformat.v4.new_code_cell(
            f"import os, time\nsay('rounds: 2 of 5 done')\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
            "time.sleep(300)"
        ),
    ]
    nbformat.write(nb, nbdir / "01_steps.ipynb")
    return nbdir / "01_steps.ipynb"


def test_ctrl_c_mid_notebook_says_in_one_line_what_stopped_in_which_step_and_where_its_outputs_are(tmp_path):
    """Issue 37: Ctrl-C (SIGINT to the runner's process group) while a notebook's step runs: one line
    says which notebook stopped, in which cell and step, after how long, and where its partial outputs
    are; no traceback. The cut cell's marker and the index name the step running, not only the cell's
    first line."""
    pid_file = tmp_path / "kernel.pid"
    _stepping_notebook(tmp_path / "nbs", pid_file)
    (tmp_path / "temp").mkdir()
    proc = _start(tmp_path, tmp_path / "nbs", text=True, start_new_session=True)
    _wait_for(pid_file, proc)
    time.sleep(1)  # the runner forwards the step's line
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in stdout + stderr, stdout + stderr
    run = tmp_path / "out" / "r"
    (n,) = json.loads((run / "summary.json").read_text())["notebooks"]
    assert n["error"]["step"] == "rounds: 2 of 5 done", n["error"]
    said = [line for line in stdout.splitlines() if "stopped 01_steps" in line]
    assert said == [
        f"SIGINT stopped 01_steps in cell {n['error']['cell']} (the step running: rounds: 2 of 5 done) after "
        f"{n['seconds']:.1f} s; its partial outputs: {run / '01_steps.ipynb'}, {run / '01_steps.html'}"
    ], stdout
    _assert_stopped_here(run, n, "Interrupted: SIGINT; the step running: rounds: 2 of 5 done")


def test_the_step_running_ends_with_the_cell_that_said_it(tmp_path):
    """A step said in a cell that ended is over: a notebook cut in a later cell names no step."""
    path = _stepping_notebook(tmp_path / "nbs", tmp_path / "kernel.pid")
    nb = nbformat.read(path, as_version=4)
    nb.cells[2].source = "x = 1"
    nbformat.write(nb, path)
    out = io.StringIO()
    with notebook_run.forwarded_progress(out):
        assert notebook_run.execute(path, tmp_path, {}, notebook_run.kernel_name(), 120, False).status == "ok"
    assert out.getvalue() == "    loading the model\n" and notebook_run.HEARD.step is None
    assert "step" not in notebook_run.stopped_in(tmp_path / "01_steps.ipynb")


def test_a_parameters_cell_edit_is_named_as_ignored_in_the_terminal_and_on_the_index(tmp_path):
    """Issue 37: a run injects the package's values over a notebook's parameters cell; one whose values
    differ from them (an edit in JupyterLab) is named, with the parameters whose edits are ignored and
    the -p arguments that pass them, in one line of the runner's output and on the index."""
    nbdir, out = tmp_path / "nbs", tmp_path / "out"
    nbdir.mkdir()
    for name in ("01_edited", "02_as_is"):
        _notebook(
            nbdir / f"{name}.ipynb",
            "from latency_lab.core import parameters as P, results\n"
            f"results.save(output_dir, {name!r}, P.validate(preset=preset), {{}}, results.key_table('q', []))",
        )
    nb = nbformat.read(nbdir / "01_edited.ipynb", as_version=4)
    nb.cells[0].source += '\nlayers = 3\nexecutors = "eager"\nplanted_pct = [1, 5]'
    nbformat.write(nb, nbdir / "01_edited.ipynb")
    proc = run_runner(
        *("--notebook-dir", str(nbdir), "--output-dir", str(out), "--run-id", "r", *TINY_CPU), timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sentence = (
        "its parameters cell's edits of layers, executors, planted_pct are ignored (a run injects the package's "
        "values); to run with them: -p layers=3 -p executors=eager -p 'planted_pct=[1, 5]'"
    )
    said = [line for line in proc.stdout.splitlines() if sentence in line]
    assert len(said) == 1 and said[0].startswith("note: 01_edited "), proc.stdout
    assert not [line for line in proc.stdout.splitlines() if line.startswith("note: 02_as_is")]  # the package's cell
    assert f"01_edited: {sentence}" in html.unescape((out / "r" / "index.html").read_text())
