"""The study catalog (``latency_lab/core/catalog.py``): it names every notebook, in order; each entry's
key columns and kinds of number are those its results hold; and a study added as CONTRIBUTING.md's worked
example shows, in four files, runs end to end through ``runner.py`` and appears on the start page and in
``--list``."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
from conftest import ROOT, cpu_environment

from latency_lab.core import catalog, parameters, results, run_to_run
from latency_lab.run import notebook_run
from latency_lab.run.compare import rows as compare_rows

REFERENCE = ROOT / "outputs" / "reference-h100"
EXAMPLE = {  # CONTRIBUTING.md's worked example: the four files of a study
    "latency_lab/studies/throwaway.py",
    "notebooks/09_throwaway.ipynb",
    "latency_lab/core/catalog.py",
    "tests/test_throwaway.py",
}


def test_the_catalog_names_every_notebook_in_order():
    assert catalog.NAMES == tuple(notebook_run.discover()) == results.NOTEBOOKS
    assert all(re.fullmatch(r"[0-9]{2}_[a-z0-9_]+", name) for name in catalog.NAMES)
    assert catalog.READS_FROM == {results.TRACE_COUNTERS: (results.EXECUTOR_TIMING,)}
    outside = catalog.entry("99_draft")
    assert (outside.question, outside.defaults, outside.models_held(parameters.resolved())) == ("", {}, ())


def test_every_entry_declares_parameters_of_the_schema_and_every_metric_one_kind():
    kinds: dict[str, set[str]] = {}
    for entry in catalog.CATALOG:
        assert {*entry.defaults, *entry.cpu_defaults} <= set(parameters.SCHEMA), entry.name
        order = [catalog.KEY_COLUMNS.index(c) for c in entry.key_columns]  # the union keeps each entry's order
        assert order == sorted(order), entry.name
        for k, metrics in entry.kinds.items():
            for metric in metrics:
                kinds.setdefault(metric, set()).add(k)
    assert {m: k for m, k in kinds.items() if len(k) > 1} == {}
    assert set(run_to_run.KINDS) == {k for ks in kinds.values() for k in ks}
    assert run_to_run.kind("wall_ms") == run_to_run.TIME and run_to_run.kind("allocated_mib") is None


def held(run: Path) -> dict[str, tuple[set[str], set[str]]]:
    """Per notebook of a run: the key columns its rows use, and the metrics compare reads in them that
    have a kind."""
    out = {}
    for path in sorted(run.glob(f"*{results.SUFFIX}")):
        name = path.name.removesuffix(results.SUFFIX)
        rows = compare_rows.read_rows(name, results.load(path))
        keys = {c for r in rows for c in catalog.KEY_COLUMNS if r.get(c) is not None}
        out[name] = keys, set(compare_rows.metric_names(rows))
    return out


def check_declared(found: dict[str, tuple[set[str], set[str]]]) -> None:
    """Each notebook's rows use only its entry's key columns, and each metric of a kind is its entry's."""
    for name, (keys, metrics) in found.items():
        entry = catalog.entry(name)
        declared = {m for ms in entry.kinds.values() for m in ms}
        assert keys <= set(entry.key_columns), (name, keys - set(entry.key_columns))
        assert {m for m in metrics if run_to_run.kind(m)} <= declared, (name, metrics - declared)


def test_the_published_runs_results_hold_what_their_entries_declare():
    found = held(REFERENCE)
    assert len(found) == 9 and found[results.SCALING][0] > {"executor"}  # 00-08; 06 keys its points by more
    check_declared(found)


def test_a_tiny_runs_results_hold_what_their_entries_declare(tiny_run: Path):
    found = held(tiny_run)
    assert set(found) == set(catalog.NAMES)
    check_declared(found)


# --- a study added in four files --------------------------------------------------------------------


def example_files() -> dict[str, str]:
    """CONTRIBUTING.md's worked example: each Python block of its "Adding a study" section, by the path its
    first line names, without that line."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("\n## Adding a study\n", 1)[1].split("\n## ", 1)[0]
    out = {}
    for block in re.findall(r"```python\n(.*?)```", section, flags=re.S):
        first, _, body = block.partition("\n")
        out[first.removeprefix("# ").split(",")[0]] = body
    return out


def notebook_of(percent: str) -> nbformat.NotebookNode:
    """A notebook from the percent format (a ``# %%`` line opens each cell; ``[markdown]``: its lines less
    their ``# ``; ``tags=[...]``: its tags), with the suite's notebooks' metadata (their kernel)."""
    metadata = nbformat.read(ROOT / "notebooks" / f"{results.MODEL_SETUP}.ipynb", as_version=4).metadata
    nb = nbformat.v4.new_notebook(metadata=metadata)
    for chunk in re.split(r"^# %%", percent, flags=re.M)[1:]:
        header, _, body = chunk.partition("\n")
        body = body.strip("\n")
        if "[markdown]" in header:
            nb.cells.append(nbformat.v4.new_markdown_cell("\n".join(line[2:] for line in body.splitlines())))
            continue
        nb.cells.append(nbformat.v4.new_code_cell(body))
        if tags := re.search(r"tags=(\[.*\])", header):
            nb.cells[-1].metadata["tags"] = json.loads(tags.group(1))
    return nb


def with_last_entry(source: str, entry: str) -> str:
    """``catalog.py``'s ``source`` with ``entry`` (an ``Entry(...)``'s lines) the last of ``CATALOG``."""
    node = next(
        n.value for n in ast.parse(source).body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "CATALOG"
    )
    lines = source.splitlines(keepends=True)
    return "".join([*lines[: node.end_lineno - 1], entry, *lines[node.end_lineno - 1 :]])


def tree_copy(dest: Path) -> None:
    """The tree's files that git tracks or would (not those it ignores), as they are now, copied to ``dest``."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)


def test_a_study_added_in_four_files_runs_end_to_end(tmp_path):
    """CONTRIBUTING.md's worked example added to a copy of the tree, exactly its four files: the runner
    runs the new notebook on the tiny preset with its catalog defaults and writes its results and key table;
    ``--list`` and the start page show it; its own test and the check of its parameters cell pass there."""
    tree, out = tmp_path / "tree", tmp_path / "out"
    tree_copy(tree)
    example = example_files()
    assert set(example) == EXAMPLE
    for path, text in example.items():
        target = tree / path
        if target.suffix == ".ipynb":
            nbformat.write(notebook_of(text), target)
        elif target.exists():
            target.write_text(with_last_entry(target.read_text(encoding="utf-8"), text), encoding="utf-8")
        else:
            target.write_text(text, encoding="utf-8")
    env = cpu_environment(PYTHONPATH=os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")])))

    def python(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done

    args = ("--preset", "tiny", "--device", "cpu", "--notebooks", "09", "--output-dir", str(out), "--run-id", "r")
    ran, run = python("runner.py", *args), out / "r"
    assert "09_throwaway ok" in ran.stdout, ran.stdout
    summary = json.loads((run / "summary.json").read_text())
    assert [(n["name"], n["status"]) for n in summary["notebooks"]] == [("09_throwaway", "ok")]
    data = results.load(run / f"09_throwaway{results.SUFFIX}")
    assert data["params"]["iters"] == 100 and data["params"]["preset"] == "tiny"  # its catalog default, injected
    table = data["key_table"]
    assert table["title"] == "One Python call" and table["columns"] == ["executor", "status", "wall_ms"]
    assert [r[:2] for r in table["rows"]] == [["python", "ok"]]
    shutil.copytree(run, out / "again")  # the same numbers as a second run: compare judges them the same
    python("runner.py", "compare", str(run), str(out / "again"), "--out", str(tmp_path / "compared"))
    report = json.loads(next((tmp_path / "compared").glob("compare-*.json")).read_text())
    judged = [(e["notebook"], e["row"], e["metric"], e["verdict"]) for e in report["rows"]]
    assert judged == [("09_throwaway", "python", "wall_ms", "same")]  # its rows read back as StepRows, judged
    listed = python("runner.py", "--list", "--notebooks", "09").stdout
    assert listed.startswith("09_throwaway\n") and re.search(r"iters\s+= 100 ", listed), listed
    python("-m", "latency_lab.run.start_page", str(tree / "notebooks" / "START.md"))
    start = (tree / "notebooks" / "START.md").read_text(encoding="utf-8")
    assert "| [09 · Throwaway](09_throwaway.ipynb) | How long does one Python call take? |" in start, start
    mirrored = "tests/test_notebook_files.py::test_parameters_cell_mirrors_the_package_defaults[09_throwaway]"
    python("-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/test_throwaway.py", mirrored)
