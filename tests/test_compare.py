"""runner.py compare: two run folders side by side, spreads, differences at the top, clear errors."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from conftest import ROOT, run_runner

from latency_lab.core import metrics, results, run_to_run
from latency_lab.core.parameters import resolved
from latency_lab.instruments import counts
from latency_lab.run.compare import command as C
from latency_lab.run.compare import many as compare_many
from latency_lab.run.compare import page as compare_page
from latency_lab.run.compare import pair as compare_pair
from latency_lab.run.compare import rows as compare_rows

# Run-to-run effects given to ``compare`` explicitly, so that no verdict here depends on run_to_run.json.
EFFECTS = {k: {"sigma": 0.02, "min_effect": 0.05} for k in run_to_run.KINDS if k != run_to_run.COUNT}
ROW_KEYS = [
    *("notebook", "row", "metric", "kind", "a", "b", "ratio", "resolution", "a_q1_q3", "b_q1_q3"),
    *("a_interval", "b_interval", "min_effect", "p", "verdict", "decided"),
]


def timing_notebook(
    run: Path, walls: dict[str, tuple], kernels: dict[str, float], cache_mode="seed", torch="2.9.1", counted=None
):
    """A results file shaped like 02's: key table and rows in the vocabulary's names (``metrics``),
    each statistic with its q1/q3 columns; ``counted``: its counts section (executor -> ``Counts.to_dict()``)."""
    env = {"collected": "now", "cpu": "x", "packages": {"torch": torch}}
    rows = [
        {
            "executor": n,
            "label": n.upper(),
            "wall_ms": w[0],
            "wall_q1_ms": w[1],
            "wall_q3_ms": w[2],
            "kernels_per_step": kernels.get(n),
            "host_ms": w[0] / 2,
            "host_q1_ms": w[0] / 2,
            "host_q3_ms": w[0] / 2,
            "status": "ok",
            "reason": None,
        }
        for n, w in walls.items()
    ]
    table = results.key_table("timing", rows, ["label", "wall_ms", "kernels_per_step", "status", "reason"])
    results.save(
        run,
        "02_executor_timing",
        resolved(preset="tiny", cache_mode=cache_mode, output_dir=str(run)),
        env,
        table,
        rows=rows,
        **({"counts": counted} if counted else {}),
    )
    (run / "environment.json").write_text(json.dumps(env))


def op_notebook(run: Path, ms: float, q: tuple[float, float]):
    """A results file shaped like 04's: op, size and executor per row, quartile columns beside."""
    rows = [
        {
            "op": "add",
            "size": "seed",
            "executor": "eager",
            "status": "ok",
            "wall_ms": ms,
            "wall_q1_ms": q[0],
            "wall_q3_ms": q[1],
            "first_call_s": 0.1,
            "reason": None,
        }
    ]
    results.save(
        run,
        "04_op_microbenchmarks",
        resolved(preset="tiny", output_dir=str(run)),
        {},
        results.key_table("add", rows),
        rows=rows,
    )


@pytest.fixture
def runs(tmp_path) -> Path:
    a, b = tmp_path / "a", tmp_path / "b"
    timing_notebook(a, {"eager": (10, 9, 11), "torch.compile": (5, 4, 6)}, {"eager": 12})
    timing_notebook(
        b, {"eager": (20, 19, 21), "torch.compile": (5.5, 5, 6.5)}, {"eager": 12}, cache_mode="none", torch="2.11.0"
    )
    op_notebook(a, 0.02, (0.019, 0.021))
    op_notebook(b, 0.03, (0.029, 0.031))
    return tmp_path


def written_last(run: Path) -> None:
    """``run``'s results files as if written after every other run's: ``run`` is the last usable run."""
    later = time.time() + 10
    for f in run.glob(f"*{results.SUFFIX}"):
        os.utime(f, (later, later))


def entries(report: dict) -> dict:
    return {(e["notebook"], e["row"], e["metric"]): e for e in report["rows"]}


def test_ratios_and_verdicts(runs, tmp_path):
    """Ratios and spreads per number; another stack (torch 2.9.1 against 2.11.0) makes every number not
    comparable, saying why; with the same stack and parameters each number is judged by its kind."""
    report = C.compare(C.load_run(runs / "a"), C.load_run(runs / "b"), effects=EFFECTS)
    got = entries(report)
    eager = got[("02_executor_timing", "eager", "wall_ms")]
    assert list(eager) == ROW_KEYS
    assert eager["a"] == 10 and eager["b"] == 20 and eager["ratio"] == 2 and eager["kind"] == run_to_run.TIME
    assert eager["a_q1_q3"] == (9, 11) and eager["b_q1_q3"] == (19, 21)
    compiled = got[("02_executor_timing", "torch.compile", "wall_ms")]
    assert compiled["ratio"] == pytest.approx(1.1)
    kernels = got[("02_executor_timing", "eager", "kernels_per_step")]
    assert kernels["ratio"] == 1 and kernels["a_q1_q3"] is None and kernels["kind"] == run_to_run.COUNT
    host = got[("02_executor_timing", "eager", "host_ms")]  # from the rows section
    assert host["a_q1_q3"] == (5, 5) and host["ratio"] == 2
    add = got[("04_op_microbenchmarks", "add · seed · eager", "wall_ms")]
    assert add["ratio"] == pytest.approx(1.5)
    assert not any(m.startswith("seed") or "q1" in m for _, _, m in got)
    assert report["stack"] == ["packages.torch 2.9.1 -> 2.11.0"]
    assert {(e["verdict"], e["decided"]) for e in report["rows"]} == {
        ("not comparable", "not comparable: another stack")
    }  # 04 too: the stack is the run's
    assert {d["name"]: (d["a"], d["b"]) for d in report["parameters"]} == {"cache_mode": ("seed", "none")}
    assert {d["name"]: (d["a"], d["b"]) for d in report["environment"]} == {"packages.torch": ("2.9.1", "2.11.0")}
    assert report["skipped"] == [] and report["effects"] == EFFECTS
    c = tmp_path / "c"  # A's stack and parameters
    timing_notebook(c, {"eager": (20, 19, 21), "torch.compile": (5.5, 5, 6.5)}, {"eager": 13})
    judged = entries(C.compare(C.load_run(runs / "a"), C.load_run(c), effects=EFFECTS))
    assert judged[("02_executor_timing", "eager", "kernels_per_step")]["verdict"] == "changed"  # a count: exact
    wall = judged[("02_executor_timing", "eager", "wall_ms")]
    assert (wall["verdict"], wall["decided"]) == ("not judged", "not judged: no interval in both runs")
    assert judged[("02_executor_timing", "eager", "host_ms")]["decided"] == "not judged: no interval in both runs"


def test_partial_report_says_what_was_skipped(runs, tmp_path):
    c = tmp_path / "c"
    timing_notebook(c, {"torch.compile": (5, 4, 6), "thunder": (3, 2, 4)}, {})  # no kernels, no 04
    report = C.compare(C.load_run(runs / "a"), C.load_run(c))
    skipped = "\n".join(report["skipped"])
    assert "04_op_microbenchmarks: only in A" in skipped
    assert "row 'eager' only in A" in skipped and "row 'thunder' only in B" in skipped
    assert "metric 'kernels_per_step' only in A" in skipped  # B measured no kernels
    assert [(e["row"], e["metric"]) for e in report["rows"]] == [
        ("torch.compile", "wall_ms"),
        ("torch.compile", "host_ms"),
    ]


def test_rows_that_share_a_key_are_skipped_not_paired(runs):
    path = runs / "b" / "02_executor_timing.results.json"
    data = json.loads(path.read_text())
    data["rows"].append(dict(data["rows"][0]))
    path.write_text(json.dumps(data))
    report = C.compare(C.load_run(runs / "a"), C.load_run(runs / "b"))
    assert "02_executor_timing: row 'eager' appears more than once in B" in report["skipped"]
    assert {e["row"] for e in report["rows"] if e["notebook"] == "02_executor_timing"} == {"torch.compile"}


def test_status_change_is_a_row_and_not_comparable_across_stacks(runs, tmp_path):
    """A row whose status differs is a row of its own: changed between runs of one stack, not comparable
    between stacks (torch 2.9.1 against 2.11.0), where the tally lists it apart."""
    c = tmp_path / "c"  # A's stack and parameters
    timing_notebook(c, {"eager": (20, 19, 21), "torch.compile": (5.5, 5, 6.5)}, {"eager": 12})
    for run in (runs / "b", c):
        path = run / "02_executor_timing.results.json"
        data = json.loads(path.read_text())
        data["rows"][1].update({"status": "failed", "wall_ms": None, "reason": "boom"})
        path.write_text(json.dumps(data))
    report = C.compare(C.load_run(runs / "a"), C.load_run(c), effects=EFFECTS)
    got = entries(report)
    status = got[("02_executor_timing", "torch.compile", "status")]
    assert (
        status["b"] == "failed"
        and status["verdict"] == "changed"
        and status["decided"] == "changed: status ok -> failed"
    )
    wall = got[("02_executor_timing", "torch.compile", "wall_ms")]
    assert wall["b"] is None and wall["ratio"] is None and wall["verdict"] == "not judged"
    assert wall["decided"] == "not judged: measured in one run only"
    numbers = [e for e in report["rows"] if e["metric"] != "status"]
    assert C.tally(report).startswith(f"{len(numbers)} numbers: ") and len(numbers) == len(report["rows"]) - 1
    assert "; 1 rows changed status." in C.tally(report)
    apart = C.compare(C.load_run(runs / "a"), C.load_run(runs / "b"), effects=EFFECTS)
    status = entries(apart)[("02_executor_timing", "torch.compile", "status")]
    assert (status["a"], status["b"], status["verdict"]) == ("ok", "failed", "not comparable")
    assert "; 1 rows differ in status, not compared." in C.tally(apart) and "changed status" not in C.tally(apart)
    assert "changed: none" in C.text(apart)


def test_lists_print_as_lists_and_only_spreads_as_ranges(runs, tmp_path):
    c = tmp_path / "c"
    timing_notebook(c, {"eager": (10, 9, 11), "torch.compile": (5, 4, 6)}, {"eager": 12})
    path = c / "02_executor_timing.results.json"
    data = json.loads(path.read_text())
    data["params"]["executors"] = ["eager", "thunder"]
    path.write_text(json.dumps(data))
    a = runs / "a" / "02_executor_timing.results.json"
    data = json.loads(a.read_text())
    data["params"]["executors"] = ["eager", "thunder", "torch.compile"]
    a.write_text(json.dumps(data))
    out = C.text(C.compare(C.load_run(runs / "a"), C.load_run(c), effects=EFFECTS), every_row=True)
    assert "executors: [eager, thunder, torch.compile] -> [eager, thunder]" in out, out
    eager = next(
        line
        for line in out.splitlines()
        if line.startswith("02_executor_timing") and "eager" in line and "wall_ms" in line
    )
    # A, the q1-q3 spread as a range, B, its spread, B / A; no interval and no resolution: blank
    assert eager.split()[3:8] == ["10", "9-11", "10", "9-11", "1.00"], eager
    assert eager.endswith("  not comparable: parameters differ")  # the verdict says why


def test_only_the_parameters_a_notebook_takes_are_compared(runs):
    """02 takes no ``depths`` or ``prompt_lengths`` (06's sweeps), though its results file holds them."""
    path = runs / "b" / "02_executor_timing.results.json"
    data = json.loads(path.read_text())
    data["params"].update(depths=[7], prompt_lengths=[9], seq_len=12)
    path.write_text(json.dumps(data))
    report = C.compare(C.load_run(runs / "a"), C.load_run(runs / "b"))
    assert {d["name"]: d["notebooks"] for d in report["parameters"]} == {
        "cache_mode": ["02_executor_timing"],
        "seq_len": ["02_executor_timing"],
    }


def test_environment_differences_read_as_lines(runs):
    """A GPU's record and the list of quieted messages as plain text, not Python's dicts and lists."""
    for run, gpu, quieted in (("a", "NVIDIA H200", ["TF32 settings", "No CUDA runtime"]), ("b", "NVIDIA L40S", [])):
        env = {"gpu": {"name": gpu, "count": 1}, "quieted_noise": [{"message": m, "why": "noise"} for m in quieted]}
        (runs / run / "environment.json").write_text(json.dumps(env))
    report = C.compare(C.load_run(runs / "a"), C.load_run(runs / "b"))
    out = C.text(report, every_row=True)
    assert "  gpu.name: NVIDIA H200 -> NVIDIA L40S" in out, out
    assert "  quieted_noise: TF32 settings; No CUDA runtime -> []" in out
    assert "{" not in out and "'" not in out.split("\nenvironment that differs:\n")[1].split("skipped")[0]
    assert "<td>NVIDIA L40S</td>" in C.to_html(report)


@pytest.mark.parametrize("b", ["a", "latest", "A_PATH"])
def test_one_run_named_twice_is_an_error_naming_both(runs, capsys, b):
    written_last(runs / "a")  # latest: the last usable run
    b = str(runs / "a") if b == "A_PATH" else b
    assert C.main(["a", b, "--output-dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"run A 'a' and run B {b!r} are the same folder ({runs / 'a'})" in err, err


WRONG_SHAPES = {
    "a number": "5",
    "a list": "[1, 2]",
    "key_table null": None,
    "params a list": None,
    "rows of the wrong length": None,
    "column names not text": None,
    "measured a list": None,
    "truncated": None,
    "nested too deep": "[" * 100_000 + "]" * 100_000,
    "not UTF-8": None,
}


@pytest.mark.parametrize("shape", WRONG_SHAPES)
def test_results_of_the_wrong_shape_are_unreadable_not_a_traceback(runs, shape, capsys):
    """A hand-edited or truncated results file: a warning that names it first, in the terminal and on the
    page, and exit 1, while the other notebooks compare; when it was the only notebook in common, a
    one-line error that says so (exit 2)."""
    path = runs / "b" / "02_executor_timing.results.json"
    data = json.loads(path.read_text())
    if shape == "key_table null":
        data["key_table"] = None
    elif shape == "params a list":
        data["params"] = [1]
    elif shape == "rows of the wrong length":
        data["key_table"]["rows"][0] = data["key_table"]["rows"][0][:2]
    elif shape == "column names not text":
        data["key_table"]["columns"][0] = 5
    elif shape == "measured a list":
        data["measured"] = [1, 2]
    text = WRONG_SHAPES[shape] or json.dumps(data)
    if shape == "truncated":
        text = text[: len(text) // 2]
    path.write_bytes(b"\xff\xfe" + text.encode() if shape == "not UTF-8" else text.encode())
    code = C.main(["a", "b", "--output-dir", str(runs)])
    out = capsys.readouterr().out
    if shape == "measured a list":  # a section compare does not read may hold anything
        assert code == 0 and "ran on: not recorded -> not recorded (02_executor_timing, 04_op_microbenchmarks)" in out
        return
    warning = "warning: run B (b): could not read 02_executor_timing.results.json: "
    assert code == 1 and out.startswith(warning), out
    page = (runs / "compare-a-vs-b.html").read_text()
    assert warning in page and page.index(warning) < page.index("Changed, largest first")
    assert "ran on: not recorded -> not recorded (04_op_microbenchmarks)" in out  # 04 compared
    (runs / "a" / "04_op_microbenchmarks.results.json").unlink()
    assert C.main(["a", "b", "--output-dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "have no notebook in common; unreadable in b: 02_executor_timing.results.json" in err
    if shape == "truncated":
        assert "not a readable JSON file (truncated?)" in err


def test_a_warning_is_wrapped_to_the_terminal_not_cut_before_its_reason(runs, capsys, monkeypatch):
    path = runs / "b" / "02_executor_timing.results.json"
    path.write_text(path.read_text()[:500])
    monkeypatch.setenv("COLUMNS", "80")
    assert C.main(["a", "b", "--output-dir", str(runs)]) == 1
    out = capsys.readouterr().out
    said = out.split("\nA: ")[0]  # the warning, before what was compared
    assert "(truncated?)" in " ".join(said.split()) and all(len(line) <= 80 for line in said.splitlines()), out


def test_a_run_of_unreadable_files_only_is_named_so(runs, capsys):
    (runs / "b" / "02_executor_timing.results.json").write_text("{")
    (runs / "b" / "04_op_microbenchmarks.results.json").write_text("5")
    assert C.main(["a", "b", "--output-dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert "no readable results file: 02_executor_timing.results.json: not a readable JSON file" in err
    assert "04_op_microbenchmarks.results.json: a results file is a JSON object, this holds a int" in err


def test_nothing_is_written_into_a_published_copy(runs, tmp_path, capsys):
    """``compare X outputs/reference-h100``: the report goes beside X, never into the committed reference;
    with two published copies it needs --out, and --out cannot be one either."""
    reference = ROOT / "outputs" / "reference-h100"
    before = sorted(p.name for p in reference.iterdir())
    timing_notebook(tmp_path / "x", {"eager": (10, 9, 11)}, {"eager": 12})
    assert C.main([str(tmp_path / "x"), str(reference)]) == 0
    assert (tmp_path / "compare-x-vs-reference-h100.json").is_file()
    assert C.main([str(reference), str(tmp_path / "x")]) == 0
    assert (tmp_path / "compare-reference-h100-vs-x.json").is_file()
    capsys.readouterr()
    shutil.copytree(reference, tmp_path / "ref2")  # a second published copy
    assert C.main([str(reference), str(tmp_path / "ref2")]) == 2
    assert "both runs are published copies" in capsys.readouterr().err
    timing_notebook(tmp_path / "y", {"eager": (10, 9, 11)}, {"eager": 12})
    assert C.main([str(tmp_path / "x"), str(tmp_path / "y"), "--out", str(reference)]) == 2
    assert "is a published copy of a run; nothing writes into one" in capsys.readouterr().err
    assert sorted(p.name for p in reference.iterdir()) == before


def test_runs_on_other_devices_are_not_sent_to_runner_py_ab():
    """ab times two builds on one machine: it cannot hold a GPU run against a CPU run."""
    assert "runner.py ab" in compare_page.next_step(["packages.torch 2.9.1 -> 2.11.0"])
    assert "runner.py ab" not in compare_page.next_step(["device cuda -> cpu", "packages.torch 2.9.1 -> 2.11.0"])
    assert "different devices" in compare_page.next_step(["gpu.name NVIDIA H100 80GB HBM3 -> NVIDIA H200"])


def test_cli_prints_and_writes_the_report_beside_the_runs(runs):
    written_last(runs / "b")
    short = run_runner("compare", "a", "latest", "--output-dir", str(runs), timeout=300, env={"COLUMNS": "72"})
    assert short.returncode == 0, short.stderr
    lines = short.stdout.splitlines()
    assert len(lines) <= 40 and all(len(t) <= 72 for t in lines[:-2]), short.stdout  # the last two: the files
    assert lines[0].startswith("A: a (") and lines[1].startswith("B: b (") and lines[-2].startswith("report: ")
    assert "changed: none" in lines and "7 not comparable: another stack" in lines
    proc = run_runner("compare", "a", "latest", "--all", "--output-dir", str(runs), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "parameters that differ:" in proc.stdout and "cache_mode: seed -> none" in proc.stdout
    assert "packages.torch: 2.9.1 -> 2.11.0" in proc.stdout
    # another stack: whatever run_to_run.json holds, nothing is judged; no interval, so no resolution
    line = next(t for t in proc.stdout.splitlines() if t.startswith("02_executor_timing") and "wall_ms" in t)
    assert re.search(r"19-21 +2\.00 +not comparable: another stack$", line), line
    said = " ".join(proc.stdout.split())
    assert "7 numbers: 0 changed (0 higher in B, 0 lower), 0 same, 7 not comparable, 0 not judged." in said
    assert "(packages.torch 2.9.1 -> 2.11.0); time both builds in one run on one machine: runner.py ab." in said
    page, data = runs / "compare-a-vs-b.html", runs / "compare-a-vs-b.json"
    assert not list((runs / "b").glob("compare-*"))  # a run's folder holds the run alone
    written = json.loads(data.read_text())
    assert written["notebooks"] == ["02_executor_timing", "04_op_microbenchmarks"]
    assert written["stack"] == ["packages.torch 2.9.1 -> 2.11.0"] and {"effects", "effects_source"} <= set(written)
    html = page.read_text()
    assert "Parameters that differ" in html and "cache_mode" in html
    assert '<tr><td>eager</td><td>wall_ms</td><td class="num">10</td>' in html
    assert '<td class="num">2.00</td><td></td><td>not comparable: another stack</td>' in html
    assert '<tr class="beyond">' not in html  # nothing changed: no row marked


@pytest.mark.parametrize(
    "a, b, fragment",
    [
        ("a", "nope", "run 'nope' not found"),
        ("a", "empty", "holds no *.results.json file"),
        ("a", "other", "have no notebook in common"),
    ],
)
def test_bad_runs_are_one_line_errors(runs, capsys, a, b, fragment):
    (runs / "empty").mkdir()
    results.save(runs / "other", "03_trace_counters", resolved(), {}, results.key_table("t", [{"executor": "x"}]))
    assert C.main([a, b, "--output-dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and err.startswith("runner.py compare: error:")


def test_out_folder(runs, capsys):
    assert C.main([str(runs / "a"), str(runs / "b"), "--out", str(runs / "reports")]) == 0
    assert (runs / "reports" / "compare-a-vs-b.json").is_file() and not (runs / "compare-a-vs-b.json").exists()


def test_real_tiny_run_against_itself(tiny_run, tmp_path, capsys):
    """Every notebook's real results parse; a run against itself gives ratios of 1, nothing beyond
    its spread, and the wall times carry the spread 02 measured."""
    copy = tmp_path / "copy"  # the same folder twice is an error
    shutil.copytree(tiny_run, copy, ignore=shutil.ignore_patterns("*.ipynb", "*.html", "*.js", "*.css"))
    assert C.main([str(tiny_run), str(copy), "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / f"compare-{tiny_run.name}-vs-copy.json").read_text())
    assert set(report["notebooks"]) == {p.name[: -len(results.SUFFIX)] for p in tiny_run.glob("*.results.json")}
    assert report["parameters"] == [] and report["environment"] == [] and report["stack"] == []
    assert report["skipped"] and all(
        "not judged, of no kind the run-to-run pairs measure: " in s for s in report["skipped"]
    )
    # whatever run_to_run.json holds (the CLI reads it), a run against itself changes nothing
    assert all(e["ratio"] in (1, None) and e["verdict"] in ("same", "not judged") for e in report["rows"])
    walls = [e for e in report["rows"] if e["notebook"] == "02_executor_timing" and e["metric"] == "wall_ms"]
    assert walls and all(e["a_q1_q3"] for e in walls)
    judged = C.compare(C.load_run(tiny_run), C.load_run(copy), effects=EFFECTS)  # every kind measured
    verdicts = {e["verdict"] for e in judged["rows"]}
    assert verdicts <= {"same", "not judged"} and "same" in verdicts, verdicts
    counted = [e for e in judged["rows"] if e["kind"] == run_to_run.COUNT]
    assert all(  # the step's counts: same, or not judged where a CPU cannot count them (or a step's two differed)
        e["verdict"] == "same" or e["decided"].startswith(("not judged: unavailable", "not judged: steps n and n + 1"))
        for e in counted
    )
    assert {(e["notebook"], e["verdict"]) for e in counted if e["metric"] == "python_c_calls_per_step"} >= {
        ("02_executor_timing", "same"),
        ("05_host_overhead", "same"),
    }
    walls = [e for e in judged["rows"] if e["notebook"] == "02_executor_timing" and e["metric"] == "wall_ms"]
    assert all(  # 02's walls carry their interval: same, or too noisy where it spans over half the value
        e["verdict"] == "same" or e["decided"].startswith("too noisy to judge") for e in walls if e["a_interval"]
    )


def test_published_reference_against_a_fresh_tiny_run(tiny_run, tmp_path, capsys):
    """The committed H100 reference is a run compare reads; against this machine's tiny run the
    report names the parameters and environment that differ, and compares what both measured."""
    reference = ROOT / "outputs" / "reference-h100"
    assert sum(p.stat().st_size for p in reference.iterdir()) < 4e6  # every block of eight notebooks: 3.6 MB
    summary = json.loads((reference / "summary.json").read_text())
    assert summary["published"] and {n["status"] for n in summary["notebooks"]} == {"ok"}  # complete
    assert C.main([str(reference), str(tiny_run), "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / f"compare-reference-h100-vs-{tiny_run.name}.json").read_text())
    differing = {e["name"] for e in report["parameters"]}
    assert {"preset", "device"} <= differing, report["parameters"]
    assert any(e["name"] == "gpu" or "gpu" in str(e) for e in report["environment"]), report["environment"]
    walls = [e for e in report["rows"] if e["notebook"] == "02_executor_timing" and e["metric"] == "wall_ms"]
    ratios = {e["row"]: e["ratio"] for e in walls}
    assert ratios["eager"] > 0 and ratios["torch.compile"] > 0  # measured in both runs
    assert ratios["thunder"] is None  # no nvFuser on a CPU: a row without a number, not a ratio
    assert "02_executor_timing: the step's counts only in B" in report["skipped"]  # saved before counts existed
    assert "preset" in capsys.readouterr().out


def test_publish_keeps_what_compare_and_the_index_need(tiny_run, tmp_path):
    from latency_lab.run import report

    files = {p.name for p in report.publish(tiny_run, tmp_path / "pub")[1]}
    assert {"summary.json", "environment.json", "index.html", "plotly.packed.js"} <= files
    assert {p.name for p in tiny_run.glob("*.results.json")} <= files and not any(
        f.endswith((".ipynb", ".html")) and f != "index.html" for f in files
    )
    page = (tmp_path / "pub" / "index.html").read_text()
    for link in re.findall(r'href="([^"]+)"', page):
        assert (tmp_path / "pub" / link).is_file(), link
    assert C.main([str(tmp_path / "pub"), str(tiny_run), "--out", str(tmp_path)]) == 0


def test_a_time_without_an_interval_is_not_judged_and_a_kernel_time_is_judged_by_its_kind(tmp_path):
    """Within-run quartiles of ~4% and hosts whose reference loop sits 1.6x apart: how far the hosts
    moved no longer decides anything. A host-bound time without an interval is not judged; a kernel
    time (device time, no interval) is judged against its kind's measured run-to-run spread."""
    for name, wall, reference in (("a", 1.00, 1.00), ("b", 1.30, 1.60)):
        run = tmp_path / name
        run.mkdir()
        row = {
            "executor": "eager",
            "status": "ok",
            "wall_ms": wall,
            "wall_q1_ms": wall * 0.98,
            "wall_q3_ms": wall * 1.02,
            "kernel_ms": wall / 5,
            "kernel_q1_ms": wall / 5 * 0.99,
            "kernel_q3_ms": wall / 5 * 1.01,
        }
        results.save(
            run,
            "02_executor_timing",
            resolved(output_dir=str(run)),
            {},
            results.key_table("t", [row]),
            rows=[row],
            host_reference={"stat": {"median": reference}, "drift_pct": 5.0},
        )
    report = C.compare(C.load_run(tmp_path / "a"), C.load_run(tmp_path / "b"), effects=EFFECTS)
    got = {e["metric"]: e for e in report["rows"]}
    assert "hosts_apart" not in report
    assert got["wall_ms"]["ratio"] == pytest.approx(1.3) and got["wall_ms"]["verdict"] == "not judged"
    assert got["wall_ms"]["decided"] == "not judged: no interval in both runs" and got["wall_ms"]["resolution"] is None
    kernel = got["kernel_ms"]
    assert kernel["kind"] == run_to_run.KERNEL and kernel["verdict"] == "changed" and kernel["p"] < 0.05
    assert kernel["resolution"] == pytest.approx(max(0.05, run_to_run.Z95 * 0.02))  # sigma alone: no interval
    assert "1 changed (1 higher in B, 0 lower), 0 same, 0 not comparable, 1 not judged" in C.tally(report)
    a, b = C.load_run(tmp_path / "a"), C.load_run(tmp_path / "b")
    a["environment"]["machine"] = b["environment"]["machine"] = "m1"  # one machine: its device's effects
    unmeasured = C.compare(a, b, effects={})
    assert {e["metric"]: e["verdict"] for e in unmeasured["rows"]} == {
        "wall_ms": "not judged",
        "kernel_ms": "not judged",
    }
    assert "measured on this device: only kernel counts and the step's counts are judged." in C.tally(unmeasured)


# --- N runs: A against each other run, one page ---------------------------------------------------------


def seed_timing(run: Path, scale: float, interval: bool = True, gpu: str | None = None):
    """02's results of the seed's step on a GPU (``headline.seed_step``): wall and kernel time, kernels
    and the host time with an interval, as the seed's tables and the fleet page read them; on GPU
    ``gpu`` (default: the run's name)."""
    gpu = gpu or run.name
    rows = [
        {
            "executor": n,
            "label": n.upper(),
            "status": "ok",
            "wall_ms": w * scale,
            "wall_q1_ms": w * scale * 0.99,
            "wall_q3_ms": w * scale * 1.01,
            "kernel_ms": w / 4,
            "kernels_per_step": 20,
            "cpu_overhead_ms": w * scale - w / 4,
            "host_ms": w * scale * 0.9,
            **({"host_lo_ms": w * scale * 0.85, "host_hi_ms": w * scale * 0.95} if interval else {}),
        }
        for n, w in (("eager", 1.0), ("torch.compile", 0.5))
    ]
    results.save(
        run,
        "02_executor_timing",
        resolved(preset="seed", device="cuda", output_dir=str(run)),
        {"gpu": {"name": gpu}},
        results.key_table("timing", rows),
        rows=rows,
    )
    (run / "environment.json").write_text(json.dumps({"gpu": {"name": gpu}, "cpu": "x"}))


def test_many_runs_set_a_against_each_other_run_on_one_page(tmp_path, capsys, monkeypatch):
    """Four runs: each line has A's number and, per other run, its number, range, ratio and the
    verdict ``compare A B`` gives that pair (same, changed, and not comparable on another GPU); the
    seed's tables get one column per run; the CLI writes ``compare-A-vs-B-vs-...`` beside the last run's
    folder."""
    monkeypatch.setattr(run_to_run, "effects", lambda device, across=False: EFFECTS)  # not run_to_run.json's
    names = ("H100", "H100-2", "H100-3", "L40S")
    for name, scale in zip(names, (1.0, 1.02, 2.0, 2.0)):
        seed_timing(tmp_path / name, scale, gpu=name.split("-")[0])
    runs = [C.load_run(tmp_path / n) for n in names]
    report = compare_many.compare_many(runs)
    pairs = [C.compare(runs[0], other) for other in runs[1:]]
    by = {(e["row"], e["metric"]): e for e in report["rows"]}
    for i, pair in enumerate(pairs):
        for e in pair["rows"]:
            other = by[(e["row"], e["metric"])]["others"][i]
            assert (other["b"], other["verdict"], other["decided"]) == (e["b"], e["verdict"], e["decided"])
    host = by[("eager", "host_ms")]
    assert host["a_interval"] == pytest.approx((0.85, 0.95))  # as stored: no floor
    assert [o["verdict"] for o in host["others"]] == ["same", "changed", "not comparable"]
    assert host["others"][2]["decided"] == "not comparable: another stack"
    assert [o["verdict"] for o in by[("eager", "kernels_per_step")]["others"]] == ["same", "same", "not comparable"]
    assert [d["runs"] for d in report["ran_on"]] == [["not recorded"] * 4]
    [gpu] = report["environment"]
    assert (gpu["name"], gpu["a"], gpu["others"]) == ("gpu.name", "H100", ["= A", "= A", "L40S"])
    wall = next(t for t in report["seed_tables"] if t["title"].startswith("Wall time per step: seed (DGX H100"))
    assert wall["columns"] == ["executor", "seed DGX H100 (ms)", *(f"{n} (ms)" for n in names)]
    assert wall["rows"][0][:6] == ["EAGER", 1.014, 1.0, 1.02, 2.0, 2.0]
    assert C.main([str(tmp_path / n) for n in names]) == 0
    out = capsys.readouterr().out
    assert all(f"{n} against H100: " in out for n in names[1:])
    changed = host["others"][1]["decided"]
    assert changed.startswith("changed: B higher by 100% (p ") and changed in out
    page = (tmp_path / "compare-H100-vs-H100-2-vs-H100-3-vs-L40S.html").read_text()
    assert "<th>L40S verdict</th>" in page and "seed DGX H100 (ms)" in page
    assert page.count("<style") == 1 and ' style="' not in page  # the pages' one stylesheet
    assert f'<td class="differs">{changed}</td>' in page
    assert json.loads((tmp_path / "compare-H100-vs-H100-2-vs-H100-3-vs-L40S.json").read_text())["notebooks"] == [
        "02_executor_timing"
    ]


def test_many_runs_name_a_run_given_twice_and_a_run_without_common_notebooks(runs, capsys):
    assert C.main(["a", "b", "a", "--output-dir", str(runs)]) == 2
    assert f"runs 'a' and 'a' are the same folder ({runs / 'a'}): give each run once" in capsys.readouterr().err
    results.save(runs / "other", "03_trace_counters", resolved(), {}, results.key_table("t", [{"executor": "x"}]))
    assert C.main(["a", "b", "other", "--output-dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "have no notebook in common" in err


def test_06_points_are_compared_with_their_intervals_not_the_key_tables_bare_values():
    """06 keeps its per-point rows (intervals included) in ``points``; its key table carries none of
    them. Compare reads the points, each number with its interval."""

    def data(host: float) -> dict:
        point = {"executor": "thunder", "step": "prefill", "layers": 1, "tokens": 6, "status": "ok"}
        point.update(host_ms=host, host_q1_ms=host, host_q3_ms=host, host_lo_ms=0.9 * host, host_hi_ms=1.1 * host)
        table = results.key_table("t", [point], ["executor", "step", "layers", "tokens", "host_ms", "status"])
        return {"points": [point], "key_table": {**table, "intervals": {}}}

    [row] = compare_rows.read_rows(results.SCALING, data(1.5))
    assert compare_rows.key(row) == "prefill · 1 · 6 · thunder" and row["status"] == "ok"
    host = compare_rows.stat(row, "host_ms")
    assert host.interval == pytest.approx((1.35, 1.65)) and host.spread == (1.5, 1.5)
    same, _ = compare_pair.compare_notebook(data(1.5), data(1.55), compare_pair.Judging(results.SCALING, EFFECTS))
    far, _ = compare_pair.compare_notebook(data(1.5), data(1.9), compare_pair.Judging(results.SCALING, EFFECTS))
    assert [e["verdict"] for e in same if e["metric"] == "host_ms"] == ["same"]
    assert [e["a_interval"] for e in same if e["metric"] == "host_ms"] == [pytest.approx((1.35, 1.65))]
    assert [e["verdict"] for e in far if e["metric"] == "host_ms"] == ["changed"]


def test_within_round_ratios_are_compared_beside_the_rows_they_come_from():
    """05's CUDA-graph ratios (``graphs``, keyed by both executors: the row of the graphed executor
    keeps its own key) and 07's combination ratios are headline numbers too: compare judges them as
    within-round numbers, by their intervals, each notebook reading the sections its catalog entry names."""
    step = [{"executor": e, "status": "ok", "host_ms": 1.0, "host_lo_ms": 0.9, "host_hi_ms": 1.1} for e in "ab"]

    def data(notebook: str, ratio: float) -> dict:
        if notebook == results.HOST_OVERHEAD:
            graphs = {"with_graphs": "b", "without": "a", "wall_ratio_x": ratio, "wall_ratio_q1_x": ratio}
            graphs.update(wall_ratio_q3_x=ratio, wall_ratio_lo_x=0.9 * ratio, wall_ratio_hi_x=1.1 * ratio)
            return {"key_table": results.key_table("t", step), "graphs": [graphs]}
        combination = {"executor": "a+b", "layers": 1, "vs_baseline_x": ratio, "vs_baseline_lo_x": 0.9 * ratio}
        combination["vs_baseline_hi_x"] = 1.1 * ratio
        return {"rows": step, "combination": [combination]}

    for notebook, ratio_row, metric in (
        (results.HOST_OVERHEAD, "b · a", "wall_ratio_x"),
        (results.LEVERS, "1 · a+b", "vs_baseline_x"),
    ):
        judging = compare_pair.Judging(notebook, EFFECTS)
        same, skipped = compare_pair.compare_notebook(data(notebook, 0.215), data(notebook, 0.205), judging)
        assert skipped == [] and {e["row"] for e in same} == {"a", "b", ratio_row}
        assert [(e["metric"], e["kind"], e["verdict"]) for e in same if e["row"] == ratio_row] == [
            (metric, run_to_run.WITHIN, "same")
        ]
        far, _ = compare_pair.compare_notebook(data(notebook, 0.215), data(notebook, 0.30), judging)
        assert {e["verdict"] for e in far if e["row"] == ratio_row} == {"changed"}


# --- reading a results row: each metric once, as a metrics.Stat --------------------------------------------


@pytest.mark.parametrize("with_interval", [True, False])
@pytest.mark.parametrize("fast_only", [True, False, None])
def test_a_stats_flat_columns_read_back_as_what_it_measured(with_interval, fast_only):
    """``Stat.from_flat`` is ``Stat.flat``'s inverse: the median, q1, q3, interval and ``fast_only``
    come back from the row's columns; a statistic without an interval reads back with none."""
    stat = metrics.Stat.of([1.0, 2.0, 3.0, 4.0, 10.0])
    if with_interval:
        stat = dataclasses.replace(stat, lo=1.5, hi=4.5)
    stat = dataclasses.replace(stat, fast_only=fast_only)
    row = {"executor": "eager", **stat.flat("wall_ms"), "kernels_per_step": 12}
    got = metrics.Stat.from_flat(row, "wall_ms")
    assert (got.median, got.q1, got.q3, got.lo, got.hi, got.fast_only) == (
        stat.median,
        stat.q1,
        stat.q3,
        stat.lo,
        stat.hi,
        fast_only,
    )
    assert got.spread == (stat.q1, stat.q3)
    assert got.interval == ((1.5, 4.5) if with_interval else None) and (got.lo is None) is not with_interval
    count = metrics.Stat.from_flat(row, "kernels_per_step")  # a count: a number alone
    assert count.median == 12 and count.spread is None and count.interval is None and count.n is None
    assert metrics.Stat.from_flat(row, "host_ms") is None  # no such column


def test_a_spread_or_interval_needs_both_ends_and_a_value_needs_a_number():
    row = {"host_ms": "n/a", "host_q1_ms": 1.0, "host_q3_ms": None, "host_lo_ms": 0.9, "host_hi_ms": 1.1}
    got = metrics.Stat.from_flat(row, "host_ms")
    assert got.median is None and got.spread is None and got.interval == (0.9, 1.1)
    assert got.with_interval(None, 2.0).interval is None and got.with_interval(1, 2).interval == (1, 2)


def test_key_table_rows_take_their_intervals_and_a_headline_its_flag_from_the_rounds_record():
    """05's key table (``HostStepRow``s): its rows carry the intervals of its ``intervals`` section; a
    headline without a ``_fast_only`` column takes the flag its executor's rounds record holds."""
    step = [
        {
            "executor": "eager",
            "status": "ok",
            "host_ms": 1.0,
            "host_lo_ms": 0.9,
            "host_hi_ms": 1.1,
            "kernels_per_step": 3,
        },
        {"executor": "thunder", "status": "ok", "host_ms": 2.0, "kernels_per_step": 4},
    ]
    data = {
        "key_table": results.key_table("t", step, ["executor", "host_ms", "kernels_per_step", "status"]),
        "rounds": {"eager": {"host": {"fast_only": True}}, "thunder": {"host": "not a record"}},
    }
    eager, thunder = compare_rows.read_rows(results.HOST_OVERHEAD, data)
    host = compare_rows.stat(eager, "host_ms")
    assert (host.median, host.interval, host.spread, host.fast_only) == (1.0, (0.9, 1.1), None, True)
    assert compare_rows.stat(thunder, "host_ms") == metrics.Stat(2.0, *[None] * 7)
    assert compare_rows.stat(eager, "kernels_per_step").median == 3
    assert compare_rows.stat(eager, "wall_ms") == compare_rows.NOTHING
    assert compare_rows.metric_names([eager, thunder]) == ["host_ms", "kernels_per_step"]


def test_runs_of_two_machines_are_judged_only_with_effects_measured_across_machines(runs, tmp_path):
    """The machine each run records (``environment.machine``): runs of one machine are judged with
    the effects of that device (run_to_run.json's ``cpu``); of two machines, or where one recorded
    none, only with effects measured across machines (none here: only the counts are judged)."""
    c = tmp_path / "c"  # A's stack and parameters
    timing_notebook(c, {"eager": (20, 19, 21), "torch.compile": (5.5, 5, 6.5)}, {"eager": 13})
    a, b = C.load_run(runs / "a"), C.load_run(c)
    a["environment"]["machine"], b["environment"]["machine"] = "m1", "m2"
    apart = C.compare(a, b)
    got = entries(apart)
    assert got[("02_executor_timing", "eager", "kernels_per_step")]["verdict"] == "changed"
    assert got[("02_executor_timing", "eager", "wall_ms")]["decided"] == (
        "not judged: another machine (m1 -> m2), no cross-machine effect measured for host and wall time"
    )
    assert apart["machines"] == {"a": "m1", "b": "m2", "apart": "another machine (m1 -> m2)"}
    assert "No effects were measured across machines of this device" in C.tally(apart)
    b["environment"]["machine"] = "m1"
    one = entries(C.compare(a, b))
    assert one[("02_executor_timing", "eager", "wall_ms")]["decided"] == "not judged: no interval in both runs"
    del b["environment"]["machine"]
    assert C.compare(a, b)["machines"]["apart"] == "not known to be one machine (B recorded none)"


def test_first_calls_are_judged_only_between_runs_that_started_their_own_compile_caches(runs, tmp_path):
    a, b = C.load_run(runs / "a"), C.load_run(runs / "a")
    per_run = "per run, shared by its notebooks (Inductor cache, nvFuser kernel DB)"
    a["environment"]["compile_cache"] = b["environment"]["compile_cache"] = per_run
    first = ("04_op_microbenchmarks", "add · seed · eager", "first_call_s")
    assert entries(C.compare(a, b, effects=EFFECTS))[first]["verdict"] == "same"
    b["environment"]["compile_cache"] = "not per run: Inductor's machine-wide cache, no nvFuser kernel DB"
    decided = entries(C.compare(a, b, effects=EFFECTS))[first]["decided"]
    assert decided.startswith("not judged: first calls follow the compile caches, which differ (per run"), decided
    a["environment"]["compile_cache"] = b["environment"]["compile_cache"]
    decided = entries(C.compare(a, b, effects=EFFECTS))[first]["decided"]
    assert decided.startswith("not judged: first calls follow the compile caches, whose state is not known"), decided


def test_many_numbers_are_held_to_a_false_discovery_rate():
    """Benjamini-Hochberg over the judged numbers: a p of 0.01 passes alone but not among 200 numbers
    with nothing else moving, and reads same, saying why; a p of 1e-9 stays changed; counts (no p) and
    numbers not judged are left alone."""

    def row(verdict, p, b=1.2):
        return {"verdict": verdict, "p": p, "a": 1.0, "b": b, "decided": f"{verdict}: ..."}

    rows = [row("same", 0.5, 1.0) for _ in range(200)] + [row("changed", 0.01), row("changed", 1e-9)]
    rows += [row("changed", None), row("not judged", None)]
    done = run_to_run.hold_false_discoveries(rows)
    assert done == {"method": "Benjamini-Hochberg", "false_discovery_rate": 0.05, "judged": 202, "held": 1}
    assert [r["verdict"] for r in rows[200:]] == ["same", "changed", "changed", "not judged"]
    assert rows[200]["decided"] == (
        "same: B higher by 20%, p 0.01: within chance among 202 numbers judged at once (Benjamini-Hochberg, 5% "
        "false discoveries)"
    )
    alone = [row("changed", 0.01)]
    assert run_to_run.hold_false_discoveries(alone)["held"] == 0 and alone[0]["verdict"] == "changed"


def test_a_notebook_the_catalog_lacks_is_read_from_its_key_table_as_it_stands():
    """A draft notebook (not catalogued): compare reads its key table's rows as ``rows.Columns``, each
    column as it is, keyed by its executor."""
    table = results.key_table("t", [{"executor": "x", "status": "ok", "wall_ms": 1.0}])
    [row] = compare_rows.read_rows("99_draft", {"key_table": table})
    assert compare_rows.key(row) == "x" and dict(row) == {"executor": "x", "status": "ok", "wall_ms": 1.0}
    assert compare_rows.metric_names([row]) == ["wall_ms"] and compare_rows.stat(row, "wall_ms").median == 1.0
    [keyless] = compare_rows.read_rows("99_draft", {"key_table": results.key_table("t", [{"size": "s", "n": 2}])})
    assert compare_rows.key(keyless) == "s"  # no key column: its first value


# --- the step's counts (02's and 05's counts sections): exact, on another machine too --------------------------


def helper():
    """The function a counted step calls more often in B."""


def count_record(extra: int = 0, every_other: bool = False) -> dict:
    """One executor's step counted for real (``counts.count_step``), as 02 and 05 save it (``Counts.to_dict``): a
    step calling ``helper`` ``extra`` times, and once more on every other call where ``every_other`` (its
    counted steps n and n + 1 then differ)."""
    import torch

    calls = itertools.count()

    def step(x):
        for _ in range(extra + (every_other and next(calls) % 2)):
            helper()
        return x + 1

    return counts.count_step(step, {"x": torch.ones(2)}, "cpu").to_dict()


def counted_runs(tmp_path: Path, a: dict, b: dict, torch_b: str = "2.9.1") -> tuple[dict, dict]:
    """Runs A and B of 02 with these counts sections, loaded; on two machines."""
    for name, counted, torch in (("a", a, "2.9.1"), ("b", b, torch_b)):
        timing_notebook(tmp_path / name, {e: (10, 9, 11) for e in counted}, {}, torch=torch, counted=counted)
    run_a, run_b = C.load_run(tmp_path / "a"), C.load_run(tmp_path / "b")
    run_a["environment"]["machine"], run_b["environment"]["machine"] = "m1", "m2"
    return run_a, run_b


def test_counts_are_judged_exactly_on_another_machine_and_a_changed_count_names_its_function(tmp_path):
    """B's step calls ``helper`` twice more: its Python function starts read changed by exactly +2 per step,
    naming that function on the page, in the text and in the data; its C calls read same; what a CPU cannot
    count is not judged, saying why; times of another machine stay not judged."""
    a, b = counted_runs(tmp_path, {"eager": count_record()}, {"eager": count_record(extra=2)})
    report = C.compare(a, b)
    got = entries(report)
    starts = got[("02_executor_timing", "eager", "python_function_starts_per_step")]
    assert (starts["kind"], starts["verdict"], starts["b"] - starts["a"]) == (run_to_run.COUNT, "changed", 2)
    assert starts["decided"] == f"changed: +2 per step ({200 / starts['a']:+.3g}% of A)"
    [(function, change)] = starts["functions"].items()
    assert function.endswith("test_compare.py:helper") and change == 2 and starts["functions_changed"] == 1
    c_calls = got[("02_executor_timing", "eager", "python_c_calls_per_step")]
    assert (c_calls["verdict"], c_calls["decided"]) == ("same", "same: equal counts")
    kernels = got[("02_executor_timing", "eager", "kernel_launches_per_step")]
    assert (
        kernels["decided"] == "not judged: unavailable in A and B: no CUDA device: no kernels or runtime calls on a CPU"
    )
    assert got[("02_executor_timing", "eager", "wall_ms")]["decided"].startswith(
        "not judged: another machine (m1 -> m2)"
    )
    assert "only kernel counts and the step's counts are judged" in C.tally(report)
    assert f"    {function}: +2 per step" in C.text(report, width=500).splitlines()
    page, data = C.write(report, tmp_path / "report")
    assert "Functions whose starts changed" in page.read_text() and f"<code>{function}: +2 per step</code>" in (
        page.read_text()
    )
    saved = entries(json.loads(data.read_text()))[("02_executor_timing", "eager", "python_function_starts_per_step")]
    assert saved["functions"] == {function: 2}
    many = compare_many.compare_many([a, b, a])  # A against B and against itself: B's functions only
    assert [(f["run"], f["lines"]) for f in many["functions"]] == [("b", [f"{function}: +2 per step"])]
    assert f"  {function}: +2 per step" in compare_many.many_text(many).splitlines()
    assert f"<li><code>{function}: +2 per step</code></li>" in compare_many.many_html(many)


def test_equal_counts_read_same_an_unsteady_counter_not_judged_and_another_stacks_not_comparable(tmp_path):
    """Equal counts: same. A step whose counted steps n and n + 1 differ in A: not judged, with both steps.
    B on another torch: every count not comparable. A run saved before counts existed: no count numbers."""
    a, b = counted_runs(
        tmp_path,
        {"eager": count_record(extra=1), "thunder": count_record(every_other=True)},
        {"eager": count_record(extra=1), "thunder": count_record()},
    )
    got = entries(C.compare(a, b))
    eager = got[("02_executor_timing", "eager", "python_function_starts_per_step")]
    assert (eager["verdict"], eager["decided"], eager["ratio"]) == ("same", "same: equal counts", 1)
    assert "functions" not in eager
    wobbly = got[("02_executor_timing", "thunder", "python_function_starts_per_step")]
    n = wobbly["b"]
    assert wobbly["a"] == n + 1 and wobbly["decided"] == (
        f"not judged: steps n and n + 1 differed in A (A {n + 1} -> {n}, B {n})"
    )
    assert wobbly["verdict"] == "not judged" and "functions" not in wobbly
    a, b = counted_runs(tmp_path / "stacks", {"eager": count_record()}, {"eager": count_record()}, torch_b="2.11.0")
    apart = [e for e in C.compare(a, b)["rows"] if e["kind"] == run_to_run.COUNT]
    assert apart and {e["decided"] for e in apart} == {"not comparable: another stack"}
    timing_notebook(tmp_path / "old", {"eager": (10, 9, 11)}, {})  # saved before counts existed
    report = C.compare(C.load_run(tmp_path / "old"), C.load_run(tmp_path / "b"), effects=EFFECTS)
    assert not [e for e in report["rows"] if e["metric"].endswith("_per_step")]
    assert "02_executor_timing: the step's counts only in B" in report["skipped"]
