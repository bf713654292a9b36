"""Notebook files never change a batch run: each parameters cell mirrors the package's defaults, the
runner injects the package's values whatever a cell holds, git stores notebooks without outputs (the
clean filter tasks.py installs), and a run records notebooks that differ from the committed ones."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, run_runner

import tasks
from latency_lab.core import catalog
from latency_lab.core import parameters as P
from latency_lab.run import notebook_changes, notebook_run

sys.path.insert(0, str(ROOT / "tools"))
import strip_notebook_outputs as strip  # noqa: E402

NOTEBOOKS = notebook_run.discover()


def parameters_cell(nb) -> str:
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    return cell.source


def cell_values(source: str) -> dict:
    """The parameters cell's assignments as values (every right-hand side is a literal)."""
    return {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
    }


def committed_text(path: Path) -> str:
    """What git stores for ``path`` (its index entry), or the file where this is no git checkout."""
    rel = path.resolve().relative_to(ROOT.resolve()).as_posix()
    proc = subprocess.run(["git", "-C", str(ROOT), "show", f":{rel}"], capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else path.read_text()


@pytest.mark.parametrize("name", list(NOTEBOOKS))
def test_parameters_cell_mirrors_the_package_defaults(name):
    values = cell_values(parameters_cell(nbformat.read(NOTEBOOKS[name], as_version=4)))
    defaults = P.notebook_defaults(name)
    assert set(values) <= set(defaults), f"{name} declares {set(values) - set(defaults)}, not in parameters.SCHEMA"
    differ = {k: (v, defaults[k]) for k, v in values.items() if v != defaults[k]}
    assert not differ, (
        f"{name}: cell value vs package default {differ}: change its catalog entry's defaults or the cell"
    )
    missing = set(catalog.entry(name).defaults) - set(values)
    assert not missing, f"{name} has its own default for {missing} but its cell does not show it"
    P.for_notebook(name, {"device": "cpu"})  # the package's defaults validate


@pytest.mark.parametrize("name", list(NOTEBOOKS))
def test_papermill_reads_every_parameter(name):
    """papermill's reader (``--help-notebook``, JupyterLab's parameter lists) skips a line it cannot parse, e.g. a
    comment with parentheses: every assignment of the cell must come back."""
    from papermill.translators import PythonTranslator

    source = parameters_cell(nbformat.read(NOTEBOOKS[name], as_version=4))
    read = PythonTranslator.inspect({"source": source})
    assert [x.name for x in read] == list(cell_values(source)), name
    skipped = PythonTranslator.inspect({"source": "workers = None  # slots (<= 12, fits)\n"})
    assert skipped == []  # what the check catches


@pytest.mark.parametrize("name", list(NOTEBOOKS))
def test_committed_notebooks_have_no_outputs_and_name_the_suite_kernel(name):
    text = committed_text(NOTEBOOKS[name])
    nb = nbformat.reads(text, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{name} has outputs"
    assert nb.metadata["kernelspec"]["name"] == tasks.KERNEL
    assert strip.strip(text) == text  # the filter leaves a committed notebook as it is


def run_notebook_text() -> str:
    """A notebook as JupyterLab saves it after a run: outputs, counts, run metadata, widget state."""
    nb = nbformat.read(NOTEBOOKS["01_model_setup"], as_version=4)
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = i + 1
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"out {i}\n")]
        cell.metadata["execution"] = {"iopub.status.busy": "2026-12-03T10:00:00"}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7", "mimetype": "text/x-python"}
    return nbformat.writes(nb) + "\n"


def test_filter_strips_outputs_counts_and_run_metadata():
    cleaned = json.loads(strip.strip(run_notebook_text()))
    code = [c for c in cleaned["cells"] if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None and "execution" not in c["metadata"] for c in code)
    assert "widgets" not in cleaned["metadata"] and cleaned["metadata"]["language_info"] == {"name": "python"}
    assert [c["source"] for c in cleaned["cells"]] == [c["source"] for c in json.loads(run_notebook_text())["cells"]]
    assert strip.strip("not a notebook") == "not a notebook"


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def make_repo(root: Path, notebooks: tuple[str, ...] = ("01_model_setup",)) -> Path:
    """A git repository with the project's filter script, .gitattributes and ``notebooks``, committed
    with the clean filter that ``tasks.py`` installs."""
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    (root / "notebooks").mkdir(parents=True)
    (root / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "strip_notebook_outputs.py", root / "tools")
    shutil.copy(ROOT / ".gitattributes", root)
    for name in notebooks:
        shutil.copy(NOTEBOOKS[name], root / "notebooks")
    git(root, "init", "-q")
    git(root, "config", "user.email", "test@example.com")
    git(root, "config", "user.name", "test")
    assert tasks.install_git_filter(root)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "notebooks")
    return root


def test_git_stores_notebooks_without_outputs(tmp_path):
    repo = make_repo(tmp_path / "repo")
    path = repo / "notebooks" / "01_model_setup.ipynb"
    path.write_text(run_notebook_text())  # a run in JupyterLab, autosaved: outputs only
    assert git(repo, "diff") == "" and notebook_changes.change(path) is None
    git(repo, "add", "-A")  # (git status lists the file until then: its size differs from the index's)
    assert git(repo, "status", "--porcelain") == ""  # nothing to commit
    nb = nbformat.read(path, as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    params.source = params.source.replace('preset = "seed"', 'preset = "tiny"')
    nbformat.write(nb, path)  # an edit of the parameters cell
    assert git(repo, "status", "--porcelain").strip() == "M notebooks/01_model_setup.ipynb"
    git(repo, "-C", "notebooks", "add", "01_model_setup.ipynb")  # from a subfolder: git runs the filter at the top
    staged = nbformat.reads(git(repo, "show", ":notebooks/01_model_setup.ipynb"), as_version=4)
    assert all(not c.outputs for c in staged.cells if c.cell_type == "code") and 'preset = "tiny"' in parameters_cell(
        staged
    )
    index = [c.source for c in staged.cells].index(params.source)
    assert (
        notebook_changes.change(path) == f"cell {index + 1} of {len(staged.cells)} differs from the committed notebook "
        f"({git(repo, 'rev-parse', '--short', 'HEAD').strip()})"
    )
    (repo / "notebooks" / "07_new.ipynb").write_text(run_notebook_text())
    assert notebook_changes.change(repo / "notebooks" / "07_new.ipynb") == "not committed"
    assert notebook_changes.change(tmp_path / "elsewhere.ipynb") is None  # no git checkout: nothing to compare


def test_install_git_filter_outside_a_checkout(tmp_path):
    assert tasks.install_git_filter(tmp_path) is False


def synthetic(path: Path, cell: str, code: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell(cell)
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(code)]
    nbformat.write(nb, path)


def test_runner_injects_the_package_values_not_the_cells(tmp_path):
    """A notebook named like 05 whose cell was edited: the run uses 05's package defaults, -p values,
    and threads (not declared by the cell) reaches it; --list shows the package's defaults too."""
    nbdir, out = tmp_path / "nbs", tmp_path / "out"
    nbdir.mkdir()
    synthetic(
        nbdir / "05_host_overhead.ipynb",
        'preset = "seed"\nlayers = 3\nrepeats = 8\nexecutors = "eager"\noutput_dir = ""',
        "import torch\nfrom latency_lab.core import environment, harness, parameters as P, results\n"
        "p = P.from_namespace(globals())\nharness.set_up(p)\n"
        "results.save(output_dir, '05_host_overhead', p, environment.collect(p.device), "
        "results.key_table('t', [{'threads': torch.get_num_threads()}]))",
    )
    listed = run_runner("--list", "--notebook-dir", str(nbdir), timeout=120)
    assert listed.returncode == 0 and "repeats        = 10 " in listed.stdout and "layers         = 1 " in listed.stdout
    assert "threads        = None" in listed.stdout
    proc = run_runner(
        "--notebook-dir",
        str(nbdir),
        "--output-dir",
        str(out),
        "--run-id",
        "r",
        "--preset",
        "tiny",
        "--device",
        "cpu",
        "-p",
        "threads=2",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((out / "r" / "05_host_overhead.results.json").read_text())
    ran = data["params"]
    assert (ran["layers"], ran["repeats"], ran["threads"], ran["preset"]) == (
        1,
        catalog.entry("05_host_overhead").defaults["repeats"],
        2,
        "tiny",
    )
    default = P.validate(executors=catalog.entry("05_host_overhead").defaults["executors"], device="cpu").executors
    assert ran["executors"] == list(default)  # 05's package default, not the cell's eager
    assert data["key_table"]["rows"] == [[2]] and data["environment"]["threads"] == 2
    summary = json.loads((out / "r" / "summary.json").read_text())
    assert summary["notebook_changes"] == {  # no git checkout to compare with; the edited cell is named
        "05_host_overhead": "its parameters cell's edits of layers, repeats, executors are ignored (a run injects "
        "the package's values); to run with them: -p layers=3 -p repeats=8 -p executors=eager"
    }
    env = json.loads((out / "r" / "environment.json").read_text())
    assert env["threads"] == 2 and len(env["load_average"]) == 3
    assert {q["message"] for q in env["quieted_noise"]} >= {"No CUDA runtime is found", "TF32 settings"}


def test_run_records_notebooks_that_differ_from_the_committed_ones(tmp_path):
    repo = make_repo(tmp_path / "repo", ("00_explorer",))
    path = repo / "notebooks" / "00_explorer.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[-1].source += "\nprint('edited')"
    nbformat.write(nb, path)
    proc = run_runner(
        "--notebook-dir",
        str(repo / "notebooks"),
        "--output-dir",
        str(tmp_path / "out"),
        "--run-id",
        "r",
        "--preset",
        "tiny",
        "--device",
        "cpu",
        "-p",
        "executors=eager",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        f"note: 00_explorer is not the committed notebook: cell {len(nb.cells)} of {len(nb.cells)} differs"
        in proc.stdout
    )
    summary = json.loads((tmp_path / "out" / "r" / "summary.json").read_text())
    assert summary["notebook_changes"]["00_explorer"].startswith(f"cell {len(nb.cells)} of")
    page = (tmp_path / "out" / "r" / "index.html").read_text()
    assert "Not the committed notebooks" in page and "00_explorer: cell" in page
