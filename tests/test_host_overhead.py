"""latency_lab.host_overhead and profiler_timeline: timeline metrics on fake profiler events (the
GPU-only logic), closure arithmetic, and notebook 05 end to end on CPU (tiny preset)."""

from __future__ import annotations

import gzip
import json
import math

import pytest

from latency_lab import host_overhead as ho
from latency_lab import profiler_timeline as pt
from latency_lab.registry import REGISTRY
from conftest import run_runner

S = pt.Span


def fake_step(offset: float = 0.0, label: str = "step", i: int = 0) -> list[pt.Span]:
    """One profiled GPU step from 0 to 1000 µs: three launches and their kernels, a copy, a device-side
    user annotation, nested CPU ops and an inductor kernel launched after the last aten op."""
    o = offset
    return [
        S(f"{pt.MARK}|{label}|{i}", "annotation", o + 0, o + 1000, tid=1),
        S("aten::linear", "cpu_op", o + 100, o + 420, tid=1),
        S("aten::addmm", "cpu_op", o + 250, o + 400, tid=1),          # nested: not top level
        S("cudaLaunchKernel", "runtime", o + 300, o + 310, correlation=1 + 10 * i, tid=1),
        S("cudaMemcpyAsync", "runtime", o + 410, o + 415, correlation=2 + 10 * i, tid=1),
        S("## Call CompiledFxGraph ##", "annotation", o + 450, o + 720, tid=1),
        S("cuLaunchKernel", "runtime", o + 500, o + 510, correlation=3 + 10 * i, tid=1),
        S("cuLaunchKernel", "runtime", o + 700, o + 710, correlation=4 + 10 * i, tid=1),
        S("sm90_gemm", "kernel", o + 320, o + 400, correlation=1 + 10 * i),
        S("Memcpy HtoD (Pageable -> Device)", "memcpy", o + 420, o + 425, correlation=2 + 10 * i),
        S("## Call CompiledFxGraph ##", "gpu_annotation", o + 300, o + 900),
        S("triton_poi_fused_add_0", "kernel", o + 520, o + 560, correlation=3 + 10 * i),
        S("nvfuser_pointwise_f0_c1", "kernel", o + 720, o + 800, correlation=4 + 10 * i),
    ]


def test_kernel_filter_excludes_copies_and_annotations():
    kernels = [s.name for s in fake_step() if pt.is_kernel(s)]
    assert kernels == ["sm90_gemm", "triton_poi_fused_add_0", "nvfuser_pointwise_f0_c1"]
    assert not pt.is_kernel(S("Memset (Device)", "kernel", 0, 1))  # a copy by name, even when filed as a kernel
    assert not pt.is_kernel(S("Torch-Compiled Region: 0/0", "kernel", 0, 1))  # an annotation's range by name


def test_step_metrics_from_fake_gpu_events():
    [w] = pt.windows(fake_step())
    m = pt.window_metrics(w)
    assert m["host_us"] == 1000 and m["kernels"] == 3 and m["copies"] == 1
    assert m["kernel_us"] == 80 + 40 + 80
    assert m["first_kernel_us"] == 320
    assert m["gpu_idle_us"] == (800 - 320) - 200  # gaps 400-520 and 560-720
    assert m["host_tail_us"] == 1000 - 710        # after the launch of the last kernel
    assert m["wall_us"] == 1000
    # top level: linear (320) and the compiled-graph annotation (270); addmm and its launch are nested
    assert m["host_ops"] == 2 and m["host_in_ops_us"] == 320 and m["host_in_annotations_us"] == 270
    assert m["host_in_runtime_us"] == 0


def test_kernels_belong_to_the_step_they_start_in_and_may_outlast_it():
    spans = fake_step(0, i=0) + fake_step(2000, i=1) + [S("late_kernel", "kernel", 2990, 3100, correlation=99)]
    ws = pt.windows(spans)
    assert [(w.label, w.repeat) for w in ws] == [("step", 0), ("step", 1)]
    first, second = (pt.window_metrics(w) for w in ws)
    assert first["kernels"] == 3 and second["kernels"] == 4
    assert second["wall_us"] == 1100 and second["first_kernel_us"] == 320
    assert second["host_tail_us"] == 1000 - 710  # the late kernel has no launch in the step: fall back to the last one matched


def test_launches_by_name_when_events_carry_no_correlation():
    spans = [S(f"{pt.MARK}|x|0", "annotation", 0, 100, tid=1), S("cudaLaunchKernel", "runtime", 10, 20, tid=1),
             S("cudaLaunchKernel", "runtime", 40, 50, tid=1), S("k", "kernel", 30, 35), S("k", "kernel", 60, 62)]
    m = pt.window_metrics(pt.windows(spans)[0])
    assert m["host_tail_us"] == 50 and m["gpu_idle_us"] == 25 and m["first_kernel_us"] == 30


def test_cpu_step_has_no_kernel_metrics():
    spans = [S(f"{pt.MARK}|step|0", "annotation", 0, 50, tid=1), S("aten::add", "cpu_op", 5, 15, tid=1)]
    m = pt.window_metrics(pt.windows(spans)[0])
    assert m["kernels"] == 0 and m["first_kernel_us"] is None and m["gpu_idle_us"] is None
    assert m["host_in_ops_us"] == 10


def test_union_and_top_level():
    spans = [S("a", "kernel", 0, 10), S("b", "kernel", 5, 20), S("c", "kernel", 30, 40)]
    assert pt.union_us(spans) == 30
    assert [s.name for s in pt.top_level([S("o", "cpu_op", 0, 10), S("i", "cpu_op", 2, 5), S("n", "cpu_op", 10, 12)])] == ["o", "n"]


def test_chrome_trace_parsing_and_window_export(tmp_path):
    trace = {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        {"ph": "X", "cat": "user_annotation", "name": f"{pt.MARK}|step|0", "ts": 100.0, "dur": 50.0, "tid": 7},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 110.0, "dur": 5.0, "tid": 7, "args": {"correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "k0", "ts": 120.0, "dur": 10.0, "args": {"correlation": 3}},
        {"ph": "X", "cat": "python_function", "name": "ignored", "ts": 101.0, "dur": 1.0},
        {"ph": "f", "cat": "ac2g", "name": "flow", "ts": 120.0},
        {"ph": "X", "cat": "user_annotation", "name": f"{pt.MARK}|step|1", "ts": 500.0, "dur": 50.0, "tid": 7},
    ]}
    spans = pt.spans_from_chrome(trace)
    assert [(s.kind, s.correlation) for s in spans] == [("annotation", None), ("runtime", 3), ("kernel", 3), ("annotation", None)]
    first = pt.windows(spans)[0]
    assert pt.window_metrics(first)["host_tail_us"] == 150 - 115
    path = tmp_path / "t.json.gz"
    pt.write_trace(trace, first, path)
    kept = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    assert [e["name"] for e in kept] == ["process_name", f"{pt.MARK}|step|0", "cudaLaunchKernel", "k0", "ignored", "flow"]


def test_closure_adds_up_exactly_and_keeps_a_negative_remainder():
    rows = ho.closure(1000.0, [("a", 123.456, "m"), ("b", 0.1 + 0.2, "m"), ("c", 500.0, "m")])
    assert rows[-1]["part"] == ho.REMAINDER
    assert math.isclose(math.fsum(r["us"] for r in rows), 1000.0, rel_tol=1e-12)
    assert math.isclose(sum(r["share of host time (%)"] for r in rows), 100.0, rel_tol=1e-12)
    over = ho.closure(100.0, [("a", 80.0, "m"), ("b", 30.0, "m")])
    assert over[-1]["us"] == pytest.approx(-10.0)


def test_closure_parts_of_thunder_and_of_a_profiled_step():
    thunder = {"host": {"median": 1.0},  # ms
               "phases": {"rows": [{"phase": "cache lookup + prologue", "us": 200.0, "method": "alone: x"},
                                   {"phase": "cache lookup + prologue", "us": 260.0, "method": "in the call: y"},
                                   {"phase": "computation function", "us": 300.0, "method": "alone: x"},
                                   {"phase": "epilogue", "us": 10.0, "method": "alone: x"}]},
               "regions": {"rows": [{"kind": "nvFusion", "host_us": 50.0}, {"kind": "nvFusion", "host_us": 60.0},
                                    {"kind": "op", "host_us": 30.0}, {"kind": "nvFuser execute (inside the region above)", "host_us": 40.0},
                                    ]}}
    total, _, parts = ho.closure_parts(thunder)
    assert total == 1000.0
    assert [(n, us) for n, us, _ in parts] == [("cache lookup + prologue", 200.0), ("nvFusion regions (2 calls)", 110.0),
                                               ("ops outside fusions (1 calls)", 30.0),
                                               ("computation function's own Python (dels, unpacking, returns)", 300.0 - 140.0),
                                               ("epilogue", 10.0)]
    failed = {**thunder, "regions": {"rows": thunder["regions"]["rows"] + [{"kind": "op", "error": "boom"}]}}
    assert not any("own Python" in n for n, _, _ in ho.closure_parts(failed)[2])  # a call missing: no derived glue
    other = {"timeline": {"step": {"host_us": 500.0, "host_in_ops_us": 300.0, "host_in_annotations_us": 50.0,
                                   "host_in_runtime_us": 20.0}}}
    closed = ho.closures({"eager": other, "none": {}})
    assert list(closed) == ["eager"] and closed["eager"]["rows"][-1]["us"] == 130.0


def test_conclusion_decides_hypotheses_from_numbers_only():
    base = {"status": "ok", "host (µs/step)": 1000.0, "nvFusion host µs/kernel (median)": None}
    summary = [{**base, "executor": "eager", "call to first kernel (µs)": 40.0},
               {**base, "executor": "thunder", "call to first kernel (µs)": 340.0, "nvFusion host µs/kernel (median)": 25.0}]
    graphs = [{"with graphs": "thunder:cudagraphs", "without": "thunder", "host removed (%)": 90.0, "wall removed (%)": 70.0,
               "wall with (µs)": 300.0, "wall without (µs)": 1000.0}]
    text = " ".join(ho.conclusion(summary, {}, graphs, "cuda"))
    assert "holds here" in text and "thunder 300 µs" in text and "(holds)" in text
    assert "holds: 25 µs of host time per kernel" in text and "(thunder 25 µs)" in text
    over = {"thunder": {"total_us": 100.0, "total": "host", "rows": ho.closure(100.0, [("a", 150.0, "m")])}}
    assert "more than the step (remainder -50%)" in " ".join(ho.conclusion(summary, over, graphs, "cuda"))
    cpu = " ".join(ho.conclusion([{**base, "executor": "eager", "call to first kernel (µs)": None}], {}, [], "cpu"))
    assert cpu.count("needs CUDA") == 3 and "holds" not in cpu


def test_safe_file_names():
    assert ho.safe_name("torch.compile:reduce-overhead") == "torch.compile_reduce-overhead"
    assert ho.safe_name("thunder/../x y") == "thunder_.._x_y"


CPU_EXECUTORS = [n for n in ("eager", "torch.compile", "thunder:torch", "thunder:torchcompile", "thunderfx") if n in REGISTRY]


@pytest.fixture(scope="module")
def run05(tmp_path_factory):
    out = tmp_path_factory.mktemp("out05")
    proc = run_runner("--preset", "tiny", "--device", "cpu", "--notebooks", "05", "--output-dir", str(out),
                      "--run-id", "r", "-p", f"executors={','.join(CPU_EXECUTORS)}")
    assert proc.returncode == 0, f"runner failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return out / "r", json.loads((out / "r" / f"{ho.NOTEBOOK}.results.json").read_text())


def test_05_every_cpu_executor_is_measured_and_closes(run05):
    folder, res = run05
    rows = {r["executor"]: r for r in res["summary"]}
    assert list(rows) == [n for n in REGISTRY if n in CPU_EXECUTORS]
    for name, r in rows.items():
        assert r["status"] == "ok", (name, r["reason"])
        assert r["host (µs/step)"] > 0 and r["wall (µs/step)"] > 0
        c = res["closure"][name]
        parts = [x for x in c["rows"] if x["part"] != ho.REMAINDER]
        [remainder] = [x for x in c["rows"] if x["part"] == ho.REMAINDER]
        assert parts and all(x["us"] >= 0 for x in parts if not x["method"].startswith("derived"))
        assert math.isclose(math.fsum(x["us"] for x in parts) + remainder["us"], c["total_us"], rel_tol=1e-9)
        assert math.isclose(r["remainder (µs)"], remainder["us"])
        trace = json.loads(gzip.decompress((folder / r["trace"]).read_bytes()))
        marks = [e for e in trace["traceEvents"] if e.get("name", "").startswith(f"{pt.MARK}|step|")]
        assert len(marks) == 1 and any(e.get("cat") == "cpu_op" for e in trace["traceEvents"])
        assert r["call to first kernel (µs)"] is None and "need CUDA" in r["reason"]
    thunder_total = res["closure"]["thunder:torch"]
    assert thunder_total["total_us"] == pytest.approx(rows["thunder:torch"]["host (µs/step)"])
    assert any(x["part"].startswith("ops outside fusions") for x in thunder_total["rows"])


def test_05_thunder_phases_and_regions(run05):
    _, res = run05
    phases = [p for p in res["phases"] if p["executor"] == "thunder:torch"]
    methods = {(p["phase"], p["method"].split(":")[0]) for p in phases}
    for phase in ("cache lookup + prologue", "computation function"):
        assert {(phase, "in the call"), (phase, "alone")} <= methods
    assert all(p["us"] is not None for p in phases)
    calls = [r for r in res["regions"] if r["executor"] == "thunder:torch"]
    assert any(r["call"] == "torch.nn.functional.linear" and r["host_us"] > 0 for r in calls)
    assert all("error" not in r for r in calls), [r for r in calls if "error" in r]
    tc = [r for r in res["regions"] if r["executor"] == "thunder:torchcompile"]
    assert any(r["kind"] == "TorchCompile" and r["host_us"] > 0 for r in tc)
    eager = [r for r in res["regions"] if r["executor"] == "eager"]
    assert len(eager) == 1 and "not a thunder.jit callable" in eager[0]["reason"]


def test_05_graphs_and_conclusion_on_cpu(run05):
    _, res = run05
    assert [g["with graphs"] for g in res["graphs"]] == [g for g, _ in ho.GRAPH_PAIRS]
    assert all(g["reason"] for g in res["graphs"])
    text = " ".join(res["findings"])
    assert "needs CUDA" in text and "thunder:torch" in text
    assert res["key_table"]["rows"]


def test_nvfuser_region_runs_alone_and_through_its_definition(monkeypatch):
    """The nvFusion path with a fake FusionDefinitionWrapper: fd.execute alone gets its own row, and a
    call that fails alone is a row with its error (CPU: no kernel columns)."""
    import torch
    from latency_lab import thunder_breakdown as tb

    class FakeFd:
        def execute(self, inputs, device=None):
            return [inputs[0] + inputs[1]]

    class FakeWrapper:
        last_used, _selected = FakeFd(), None

        def __call__(self, *args):
            return self.last_used.execute(list(args))

    x = torch.ones(4)
    region = tb.Call(0, "nvFusion0", "nvFusion", FakeWrapper(), (x, x), {}, tb.NVFUSER_INPUTS)
    only = tb.execute_only(region)
    assert only.kind.startswith("nvFuser execute") and "last_repro_script absent" in only.inputs
    assert tb.execute_only(tb.Call(1, "linear", "op", torch.nn.functional.linear, (), {})) is None
    broken = tb.Call(2, "torch.nn.functional.linear", "op", torch.nn.functional.linear, (x,), {})
    rows = tb.measure_calls([region, only, broken], "cpu", 3)
    assert [r["call"] for r in rows] == ["nvFusion0", "nvFusion0 fd.execute", "torch.nn.functional.linear"]
    assert rows[0]["host_us"] > 0 and rows[1]["host_us"] > 0 and "kernels" not in rows[0]
    assert "error" in rows[2] and "host_us" not in rows[2]


def test_thunder_calls_are_recorded_with_their_inputs_and_phases_measured():
    pytest.importorskip("thunder")
    import torch
    from latency_lab import thunder_breakdown as tb
    from latency_lab.registry import prepare

    class Small(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            return torch.nn.functional.silu(self.lin(x)) * 2

    kwargs = {"x": torch.randn(2, 8)}
    p = prepare(REGISTRY["thunder:torch"], Small().eval(), kwargs, "cpu")
    assert p.ok, p.reason
    calls = tb.record_calls(p.fn, kwargs)
    names = [c.name for c in calls]
    assert "torch.nn.functional.linear" in names and all(c.kind in ("op", "bookkeeping") for c in calls)
    linear = calls[names.index("torch.nn.functional.linear")]
    assert linear.args[0] is kwargs["x"]
    expected = p.fn(**kwargs)
    x = linear.fn(*linear.args, **linear.kwargs)
    for c in calls[names.index("torch.nn.functional.linear") + 1:]:
        x = c.fn(x, *c.args[1:], **c.kwargs)
    torch.testing.assert_close(x, expected)
    rows = tb.phases(p.fn, kwargs, "cpu", 3)
    assert {r["method"].split(":")[0] for r in rows} == {"in the call", "alone", "derived"}
    assert all(r["us"] > 0 for r in rows if r["phase"] != "cache search")
    assert tb.thunder_functions(Small()) == []
