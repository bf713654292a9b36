"""latency_lab.run.scheduler (``runner.py --gpus``): the option's values, CPU shares, start order and the
run loop with fake devices and fake notebook executions; then real workers and kernels on this CPU,
under GPU ids no machine has (so no kernel sees a GPU), pinned to one core each."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import nbformat
import psutil
import pytest

import runner
from latency_lab.run import notebook_run
from latency_lab.run import scheduler as S
from latency_lab.run.notebook_run import Outcome

README_H200 = {
    "00_explorer": 33,
    "01_model_setup": 16,
    "02_executor_timing": 180,
    "03_trace_counters": 109,
    "04_op_microbenchmarks": 45,
    "05_host_overhead": 130,
    "06_scaling": 207,
}  # seconds, README's H200 run


@pytest.mark.parametrize(
    "spec, count, gpus",
    [("all", 4, [0, 1, 2, 3]), (" all ", 0, []), ("2,0", 4, [2, 0]), ("0", 1, [0]), ("1, 3", 4, [1, 3])],
)
def test_gpus_values(spec, count, gpus):
    assert S.parse_gpus(spec, count) == gpus


@pytest.mark.parametrize(
    "spec, count, fragment",
    [
        ("9", 1, "no GPU 9 here; allowed all or a comma list of distinct GPU indices 0..0"),
        ("x", 4, "invalid --gpus 'x': allowed all or a comma list of distinct GPU indices 0..3"),
        ("0,0", 4, "0 given twice"),
        ("", 4, "invalid --gpus ''"),
        ("1,,2", 4, "invalid --gpus '1,,2'"),
        ("-1", 4, "invalid --gpus '-1'"),
        ("0", 0, "allowed all (this machine has no CUDA GPU)"),
    ],
)
def test_bad_gpus_values_name_the_allowed_ones(spec, count, fragment):
    with pytest.raises(ValueError, match="invalid --gpus") as e:
        S.parse_gpus(spec, count)
    assert fragment in str(e.value)


CORES = [(0, 8), (1, 9), (2, 10), (3, 11), (4, 12)]  # five cores, two hyperthreads each


def test_cpu_shares_are_whole_disjoint_cores():
    assert S.cpu_shares(2, CORES) == [(0, 1, 2, 8, 9, 10), (3, 4, 11, 12)]
    assert S.cpu_shares(5, CORES) == [core for core in CORES]
    with pytest.raises(ValueError, match="6 GPUs side by side need 6 CPU cores, this process may use 5"):
        S.cpu_shares(6, CORES)


def test_physical_cores_of_this_machine_cover_every_cpu_once():
    cpus = os.sched_getaffinity(0)
    cores = S.physical_cores(cpus)
    assert sorted(c for core in cores for c in core) == sorted(cpus)


def test_plan_changes_nothing_without_several_gpus(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert S.plan(None, "cpu") == [S.Slot("cpu")]
    assert S.plan(None, "cuda:1", count=2) == [S.Slot("1")]
    assert S.plan("all", "cpu", count=0) == [S.Slot("cpu")]
    assert S.plan("0,1", "cpu", count=4) == [S.Slot("cpu")]  # --device cpu: the GPUs stay unused
    assert S.plan("all", "cuda", count=1) == [S.Slot("0")]  # one GPU: as without the option
    # one GPU chosen: one after another on it
    assert S.plan("2", "cuda", count=4) == [S.Slot("2", env={"CUDA_VISIBLE_DEVICES": "2"})]
    with pytest.raises(ValueError, match="no GPU 9 here"):
        S.plan("9", "cpu", count=1)  # bad values are errors even where the option would change nothing


def test_plan_side_by_side_maps_through_the_visible_gpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    slots = S.plan("all", "cuda", count=4, cpus=range(16))
    assert [s.gpu for s in slots] == ["4", "5", "6", "7"]
    assert [s.env for s in slots] == [{"CUDA_VISIBLE_DEVICES": g} for g in "4567"]
    shares = [set(s.cpus) for s in slots]
    assert set().union(*shares) == set(range(16)) and sum(map(len, shares)) == 16
    assert S.plan("1,3", "cuda:0", count=4, cpus=range(4))[1].gpu == "7"
    with pytest.raises(ValueError, match="--device cuda:2 and --gpus 0,1 disagree"):
        S.plan("0,1", "cuda:2", count=4, cpus=range(4))
    assert S.device_label("cuda:2") == "6" and S.device_label("cuda") == "4" and S.device_label("cpu") == "cpu"


def test_start_order_longest_chain_first_with_the_dependencies_before():
    names = list(README_H200)
    assert S.start_order(names, {}) == ["02_executor_timing", *[n for n in names if n != "02_executor_timing"]]
    # 02 + 03 (289 s) is the longest chain, then 06, 05, ...
    assert S.start_order(names, README_H200) == [
        "02_executor_timing",
        "06_scaling",
        "05_host_overhead",
        "03_trace_counters",
        "04_op_microbenchmarks",
        "00_explorer",
        "01_model_setup",
    ]
    assert S.start_order(["03_trace_counters", "04_op_microbenchmarks"], {}) == [
        "03_trace_counters",
        "04_op_microbenchmarks",
    ]
    with pytest.raises(ValueError, match="cycle"):
        S.start_order(["a", "b"], {}, runs_after={"a": ("b",), "b": ("a",)})


def test_previous_seconds_reads_the_last_usable_run(tmp_path):
    assert S.previous_seconds(tmp_path) == {}
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "summary.json").write_text(
        json.dumps(
            {
                "notebooks": [
                    {"name": "01_a", "status": "ok", "seconds": 12.5},
                    {"name": "02_b", "status": "failed", "seconds": 1.0},
                ]
            }
        )
    )
    assert S.previous_seconds(tmp_path) == {}  # no results: not a usable run
    for f in ("01_a.ipynb", "01_a.results.json"):  # an executed notebook: a run folder, not a published copy
        (tmp_path / "r" / f).write_text("{}")
    assert S.previous_seconds(tmp_path) == {"01_a": 12.5}


def test_ran_on_text():
    assert S.ran_on(None) == "" and S.ran_on("cpu") == "cpu" and S.ran_on("2") == "GPU 2"
    assert S.ran_on("3", [8, 9, 10, 11, 20, 22, 23]) == "GPU 3 · CPU cores 8-11,20,22-23"


class Fake:
    """A notebook execution that ends after ``polls`` polls with ``status``; what happens is logged."""

    def __init__(self, name, slot, log, polls=3, status="ok"):
        self.name, self.slot, self.log, self.polls, self.status = name, slot, log, polls, status
        log.append(("start", name, slot.gpu))

    def poll(self):
        self.polls -= 1
        if self.polls > 0:
            return None
        self.log.append(("end", self.name, self.slot.gpu))
        return Outcome(self.name, self.status, 1.5, {"ename": "E", "evalue": "x"} if self.status != "ok" else None)

    def kill(self):
        self.log.append(("kill", self.name, self.slot.gpu))


SLOTS = [S.Slot("0", (0,)), S.Slot("1", (1,))]


def test_run_keeps_every_slot_busy_honours_runs_after_and_orders_the_outcomes(capsys):
    names = ["01_a", "02_executor_timing", "03_trace_counters", "04_fails", "05_e"]
    log, outcomes = [], []
    polls = {"02_executor_timing": 6}
    S.run(
        names,
        SLOTS,
        lambda n, s: Fake(n, s, log, polls.get(n, 2), "failed" if n == "04_fails" else "ok"),
        outcomes,
        poll_s=0,
    )
    running, most = set(), 0
    for event, name, _ in log:
        running = running | {name} if event == "start" else running - {name}
        most = max(most, len(running))
    assert most == 2 and not any(e == "kill" for e, _, _ in log)
    starts = [n for e, n, _ in log if e == "start"]
    assert starts[0] == "02_executor_timing" and sorted(starts) == names
    assert at(log, "start", "03_trace_counters") > at(log, "end", "02_executor_timing")
    ordered = S.in_order(names, outcomes)
    assert [o.name for o in ordered] == names
    assert [o.status for o in ordered] == ["ok", "ok", "ok", "failed", "ok"]  # a failure stops nothing else
    assert all(o.gpu in ("0", "1") and o.cpus == (int(o.gpu),) for o in ordered)
    out = capsys.readouterr().out
    assert "[1/5] 02_executor_timing on GPU 0 · CPU cores 0 ..." in out and "04_fails failed in 1.5 s on GPU" in out


def at(log: list, event: str, name: str) -> int:
    return next(i for i, (e, n, _) in enumerate(log) if (e, n) == (event, name))


class Interrupting(Fake):
    def poll(self):
        raise KeyboardInterrupt  # as the runner's SIGINT / SIGTERM handler raises in its main thread


def test_an_interrupt_kills_the_running_ones_and_marks_them():
    names = ["01_a", "02_b", "03_c", "04_d"]
    log, outcomes = [], []

    def start(name, slot):
        return (Interrupting if name == "03_c" else Fake)(name, slot, log, polls=10**9)

    with pytest.raises(KeyboardInterrupt):
        S.run(names, [*SLOTS, S.Slot("2", (2,))], start, outcomes, poll_s=0)
    assert sorted(n for e, n, _ in log if e == "kill") == ["01_a", "02_b", "03_c"]
    assert [(o.name, o.status) for o in S.in_order(names, outcomes)] == [
        ("01_a", "interrupted"),
        ("02_b", "interrupted"),
        ("03_c", "interrupted"),
        ("04_d", "not run"),
    ]


# --- real workers and kernels -----------------------------------------------------------------------------

RECORD = (
    "import os, time, types\nfrom latency_lab.core import results\nstarted = time.time()\n{body}\n"
    "results.save(output_dir, {name!r}, types.SimpleNamespace(to_dict=dict), {{}},"
    " results.key_table('t', [{{'x': 1}}]),"
    " seen={{'gpu': os.environ.get('CUDA_VISIBLE_DEVICES'), 'cpus': sorted(os.sched_getaffinity(0)),"
    " 'tmp': os.environ.get('TMPDIR'), 'pid': os.getpid(), 'started': started, 'ended': time.time()}})"
)


def notebook(folder: Path, name: str, body: str = "", record: bool = True) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('preset = "seed"\noutput_dir = ""')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(RECORD.format(body=body, name=name) if record else body)]
    folder.mkdir(exist_ok=True)
    nbformat.write(nb, folder / f"{name}.ipynb")


def two_cores() -> list[int]:
    cpus = sorted(os.sched_getaffinity(0))
    if len(S.physical_cores(cpus)) < 2:
        pytest.skip("side by side needs two CPU cores")
    return [core[0] for core in S.physical_cores(cpus)[:2]]


def test_runner_gpus_runs_notebooks_side_by_side_each_on_its_gpu_and_cores(tmp_path, monkeypatch, capsys):
    """runner.py --gpus all on two fake GPUs: kernels see only their GPU id and their core; 03 starts
    after 02 ends; a failure stops nothing; summary, index and outcome order as a sequential run's."""
    cores = two_cores()
    nbdir, out = tmp_path / "nbs", tmp_path / "out"
    notebook(nbdir, "01_first", "time.sleep(4)")
    notebook(nbdir, "02_executor_timing", "time.sleep(6)")
    notebook(nbdir, "03_trace_counters")
    notebook(nbdir, "04_fails", "raise RuntimeError('deliberate failure')", record=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "90,91")  # ids no machine has: the kernels see no GPU
    real = S.plan
    monkeypatch.setattr(S, "plan", lambda spec, device, cpu_slots: real(spec, "cuda", count=2, cpus=cores))
    code = runner.main(
        ["--notebook-dir", str(nbdir), "--output-dir", str(out), "--run-id", "r", "--device", "cpu", "--gpus", "all"]
    )
    printed = capsys.readouterr().out
    assert code == 1, printed
    assert "GPUs 90, 91 side by side" in printed and "04_fails failed in" in printed
    summary = json.loads((out / "r" / "summary.json").read_text())
    names = ["01_first", "02_executor_timing", "03_trace_counters", "04_fails"]
    assert [n["name"] for n in summary["notebooks"]] == names
    by = {n["name"]: n for n in summary["notebooks"]}
    assert [by[n]["status"] for n in names] == ["ok", "ok", "ok", "failed"]
    assert "deliberate failure" in by["04_fails"]["error"]["evalue"]
    seen = {n: json.loads((out / "r" / f"{n}.results.json").read_text())["seen"] for n in names[:3]}
    for name, s in seen.items():
        gpu = by[name]["gpu"]
        assert gpu in ("90", "91") and s["gpu"] == gpu, (name, s)
        assert s["cpus"] == by[name]["cpus"] == [cores[("90", "91").index(gpu)]]
        assert s["tmp"].endswith(f"gpu{gpu}")  # nvFuser's kernel DB: one per GPU
        assert (out / "r" / f"{name}.html").is_file()
    first, timing, traces = seen["01_first"], seen["02_executor_timing"], seen["03_trace_counters"]
    assert first["started"] < timing["ended"] and timing["started"] < first["ended"]  # side by side
    assert traces["started"] >= timing["ended"]  # 03 reads 02's results
    page = (out / "r" / "index.html").read_text()
    assert "ran on" in page and "GPU 90 · CPU cores" in page and (out / "r" / "notebook.css").is_file()


def test_runner_cpu_slots_runs_notebooks_side_by_side_each_on_its_cores(tmp_path, capsys):
    """runner.py --cpu-slots 2 on a CPU: two kernels at once, each pinned to its own half of the cores, 03
    after 02; summary and outcome order as a sequential run's."""
    two_cores()
    shares = [list(slot.cpus) for slot in S.plan(None, "cpu", count=0, cpu_slots=2)]  # this machine's two halves
    nbdir, out = tmp_path / "nbs", tmp_path / "out"
    notebook(nbdir, "01_first", "time.sleep(4)")
    notebook(nbdir, "02_executor_timing", "time.sleep(6)")
    notebook(nbdir, "03_trace_counters")
    args = ["--notebook-dir", str(nbdir), "--output-dir", str(out), "--run-id", "r", "--device", "cpu"]
    code = runner.main([*args, "--cpu-slots", "2"])
    printed = capsys.readouterr().out
    assert code == 0 and "2 shares of the CPU cores side by side" in printed, printed
    summary = json.loads((out / "r" / "summary.json").read_text())
    names = ["01_first", "02_executor_timing", "03_trace_counters"]
    assert [n["name"] for n in summary["notebooks"]] == names
    seen = {n: json.loads((out / "r" / f"{n}.results.json").read_text())["seen"] for n in names}
    for n in summary["notebooks"]:
        assert n["gpu"] == "cpu" and n["cpus"] in shares and seen[n["name"]]["cpus"] == n["cpus"], n
    assert seen[names[0]]["cpus"] != seen[names[1]]["cpus"]  # the two at once, each on its own share
    first, timing, traces = (seen[n] for n in names)
    assert first["started"] < timing["ended"] and timing["started"] < first["ended"]  # side by side
    assert traces["started"] >= timing["ended"]  # 03 reads 02's results


@pytest.mark.parametrize(
    "device, n, fragment",
    [
        ("cpu", 0, "invalid --cpu-slots 0: allowed 1..8 (the physical cores this process may use)"),
        ("cpu", 9, "invalid --cpu-slots 9: allowed 1..8"),
        ("cuda", 2, "invalid --cpu-slots 2: allowed only on a CPU run (--device cpu); GPUs side by side: --gpus"),
    ],
)
def test_bad_cpu_slots_name_the_allowed_values(device, n, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        S.plan(None, device, count=0, cpus=range(100, 108), cpu_slots=n)  # CPUs no machine has: one core each


def test_cpu_slots_are_whole_disjoint_shares_and_one_changes_nothing():
    slots = S.plan(None, "cpu", count=0, cpus=range(100, 108), cpu_slots=3)
    assert [(s.gpu, s.cpus) for s in slots] == [("cpu", (100, 101, 102)), ("cpu", (103, 104, 105)), ("cpu", (106, 107))]
    assert S.plan(None, "cpu", count=0, cpus=range(100, 108), cpu_slots=1) == [S.Slot("cpu")]


def test_a_bad_gpus_beside_cpu_slots_is_still_an_error():
    with pytest.raises(ValueError, match="invalid --gpus 'x'"):
        S.plan("x", "cpu", count=0, cpus=range(100, 108), cpu_slots=2)


def test_bad_cpu_slots_on_the_command_line_write_nothing(tmp_path, capsys):
    code = runner.main(["--preset", "tiny", "--device", "cpu", "--output-dir", str(tmp_path), "--cpu-slots", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "invalid --cpu-slots 0: allowed 1.." in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_interrupt_kills_every_worker_and_kernel(tmp_path):
    cores = two_cores()
    nbdir, run_dir = tmp_path / "nbs", tmp_path / "run"
    run_dir.mkdir()
    for name in ("01_slow", "02_slow"):
        notebook(nbdir, name, f"open({str(tmp_path / name)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)")
    notebook(nbdir, "03_never")
    notebooks = notebook_run.discover(nbdir)

    class Stop(BaseException):
        pass

    def stop(signum, frame):
        raise Stop

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    ready = [tmp_path / "01_slow", tmp_path / "02_slow"]
    sender = threading.Thread(target=lambda: (_wait_for(ready), os.kill(os.getpid(), signal.SIGTERM)), daemon=True)
    previous = signal.signal(signal.SIGTERM, stop)
    outcomes = []
    try:
        sender.start()
        with pytest.raises(Stop):
            S.run_side_by_side(
                notebooks,
                {n: {"output_dir": str(run_dir)} for n in notebooks},
                [S.Slot("90", (cores[0],)), S.Slot("91", (cores[1],))],
                run_dir,
                notebook_run.kernel_name(),
                120,
                outcomes,
            )
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not any(alive(int(p.read_text())) for p in ready)  # the kernels
    assert not [p for p in psutil.Process().children(recursive=True) if p.pid not in before and alive(p.pid)]
    assert [(o.name, o.status) for o in S.in_order(list(notebooks), outcomes)] == [
        ("01_slow", "interrupted"),
        ("02_slow", "interrupted"),
        ("03_never", "not run"),
    ]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_for(paths: list[Path], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not all(p.is_file() and p.read_text() for p in paths) and time.monotonic() < deadline:
        time.sleep(0.2)


def test_gpus_on_a_cpu_changes_nothing_and_the_summary_says_cpu(tmp_path, monkeypatch, capsys):
    notebook(tmp_path / "nbs", "01_only")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    code = runner.main(
        [
            "--notebook-dir",
            str(tmp_path / "nbs"),
            "--output-dir",
            str(tmp_path / "out"),
            "--run-id",
            "r",
            "--device",
            "cpu",
            "--gpus",
            "all",
        ]
    )
    assert code == 0 and "· device cpu ·" in capsys.readouterr().out
    [entry] = json.loads((tmp_path / "out" / "r" / "summary.json").read_text())["notebooks"]
    assert (entry["status"], entry["gpu"], entry["cpus"]) == ("ok", "cpu", None)
    assert json.loads((tmp_path / "out" / "r" / "01_only.results.json").read_text())["seen"]["gpu"] == ""


@pytest.mark.parametrize(
    "gpus, fragment",
    [
        ("x", "invalid --gpus 'x'"),
        ("0,0", "0 given twice"),
        ("9", "no GPU 9 here; allowed all or a comma list of distinct GPU indices 0..0"),
        ("0,1", "no GPU 1 here"),
    ],
)
def test_bad_gpus_are_setup_errors_and_write_nothing(tmp_path, monkeypatch, capsys, gpus, fragment):
    monkeypatch.setattr(S, "gpu_count", lambda: 1)
    code = runner.main(
        ["--preset", "tiny", "--device", "cpu", "--notebooks", "01", "--output-dir", str(tmp_path), "--gpus", gpus]
    )
    err = capsys.readouterr().err
    assert code == 2 and fragment in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_compare_says_where_each_notebook_ran(tmp_path):
    from latency_lab.core import results
    from latency_lab.core.parameters import resolved
    from latency_lab.run.compare import command as C

    for run, gpu in (("a", "0"), ("b", "2")):
        results.save(tmp_path / run, "02_x", resolved(), {}, results.key_table("t", [{"executor": "eager", "ms": 1.0}]))
        (tmp_path / run / "summary.json").write_text(json.dumps({"notebooks": [{"name": "02_x", "gpu": gpu}]}))
    results.save(tmp_path / "c", "02_x", resolved(), {}, results.key_table("t", [{"executor": "eager", "ms": 1.0}]))
    report = C.compare(C.load_run(tmp_path / "a"), C.load_run(tmp_path / "b"))
    assert report["ran_on"] == [{"name": "02_x", "a": "GPU 0", "b": "GPU 2"}]
    assert "ran on: GPU 0 -> GPU 2 (02_x)" in C.text(report) and "<td>GPU 2</td>" in C.to_html(report)
    older = C.compare(C.load_run(tmp_path / "c"), C.load_run(tmp_path / "a"))  # a run without summary.json
    assert older["ran_on"] == [{"name": "02_x", "a": "not recorded", "b": "GPU 0"}]


def test_the_run_cache_counts_the_kernels_of_every_gpus_nvfuser_db():
    from latency_lab.core import compile_cache

    root = compile_cache.make("gpus")
    for folder in ("tmp", "tmp/gpu0", "tmp/gpu1"):
        (root / folder / "nvfuser_kernel_db").mkdir(parents=True)
        (root / folder / "nvfuser_kernel_db" / "kernel_0.cubin").write_bytes(b"\0")
    assert compile_cache.close(root)["nvfuser_kernels"] == 3
