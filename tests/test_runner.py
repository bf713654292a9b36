"""End to end: runner.py runs the notebooks through papermill in a real kernel and writes a
complete run folder; bad input is rejected early; a failing notebook leaves the others intact."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from latency_lab import executors as E, notebook_run, results
from conftest import ROOT, run_runner  # noqa: E402

NOTEBOOKS = list(notebook_run.discover())


def test_notebooks_committed_without_outputs():
    for path in notebook_run.discover().values():
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name} has outputs"
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, f"{path.name} needs exactly one cell tagged parameters"


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


def test_notebooks_ran_in_a_real_kernel_with_injected_parameters(tiny_run: Path):
    for name in NOTEBOOKS:
        nb = nbformat.read(tiny_run / f"{name}.ipynb", as_version=4)
        assert nb.metadata["papermill"]["parameters"]["preset"] == "tiny"
        assert any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells)
        counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
        assert counts == list(range(1, len(counts) + 1)), f"{name} did not run every cell in order"


def test_model_setup_results(tiny_run: Path):
    data = results.load(tiny_run / "01_model_setup.results.json")
    rows = {r["executor"]: r for r in data["executors"]}
    assert list(rows) == list(E.REGISTRY)
    for name, row in rows.items():
        if row["status"] == "ok":
            assert row["passed"] is True and row["first_call_s"] > 0 and row["rel_err"] <= row["tolerance"]
        else:
            assert row["reason"], f"{name} has neither numbers nor a reason"
    assert rows["eager"]["status"] == "ok" and rows["thunder:torch"]["status"] == "ok"
    assert "CUDA" in rows["thunder"]["reason"]
    assert data["cost"]["parameters"] > 0 and data["cost"]["floor_ms_measured"] is None
    assert data["environment"]["device"] == "cpu"


def test_executor_timing_results(tiny_run: Path):
    data = results.load(tiny_run / "02_executor_timing.results.json")
    assert data["key_table"]["columns"][:6] == ["Execution Type", "Wall Clock Time (ms)", "CPU Overhead (ms)",
                                               "Kernel Time (ms)", "Kernels", "Overhead / Kernel (us)"]
    rows = {r["executor"]: r for r in data["rows"]}
    assert list(rows) == list(E.REGISTRY)
    for name, r in rows.items():
        if r["status"] == "ok":
            assert r["Wall Clock Time (ms)"] > 0 and r["host submit (ms)"] > 0 and r["first call (s)"] > 0
            assert r["pass 2 / pass 1"] > 0 and r["%timeit (ms)"]
            t = data["measured"][name]["timeit"]
            assert t["mean_ms"] > 0 and t["runs"] == data["params"]["repeats"] and t["loops"] == data["params"]["iters"]
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
