"""latency_lab.instruments.profiler_timeline: timeline metrics on fake profiler events (the GPU-only logic) and
Chrome traces."""

from __future__ import annotations

import gzip
import json

from latency_lab.instruments import profiler_timeline as pt

S = pt.Span


def fake_step(offset: float = 0.0, label: str = "step", i: int = 0) -> list[pt.Span]:
    """One profiled GPU step from 0 to 1000 µs: three launches and their kernels, a copy, a device-side
    user annotation, nested CPU ops and an inductor kernel launched after the last aten op."""
    o = offset
    return [
        S(f"{pt.MARK}|{label}|{i}", "annotation", o + 0, o + 1000, tid=1),
        S("aten::linear", "cpu_op", o + 100, o + 420, tid=1),
        S("aten::addmm", "cpu_op", o + 250, o + 400, tid=1),  # nested: not top level
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
    assert m["host_tail_us"] == 1000 - 710  # after the launch of the last kernel
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
    assert (
        second["host_tail_us"] == 1000 - 710
    )  # the late kernel has no launch in the step: fall back to the last one matched


def test_launches_by_name_when_events_carry_no_correlation():
    spans = [
        S(f"{pt.MARK}|x|0", "annotation", 0, 100, tid=1),
        S("cudaLaunchKernel", "runtime", 10, 20, tid=1),
        S("cudaLaunchKernel", "runtime", 40, 50, tid=1),
        S("k", "kernel", 30, 35),
        S("k", "kernel", 60, 62),
    ]
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
    assert [
        s.name for s in pt.top_level([S("o", "cpu_op", 0, 10), S("i", "cpu_op", 2, 5), S("n", "cpu_op", 10, 12)])
    ] == ["o", "n"]


def test_chrome_trace_parsing_and_window_export(tmp_path):
    trace = {
        "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
            {"ph": "X", "cat": "user_annotation", "name": f"{pt.MARK}|step|0", "ts": 100.0, "dur": 50.0, "tid": 7},
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "ts": 110.0,
                "dur": 5.0,
                "tid": 7,
                "args": {"correlation": 3},
            },
            {"ph": "X", "cat": "kernel", "name": "k0", "ts": 120.0, "dur": 10.0, "args": {"correlation": 3}},
            {"ph": "X", "cat": "python_function", "name": "ignored", "ts": 101.0, "dur": 1.0},
            {"ph": "f", "cat": "ac2g", "name": "flow", "ts": 120.0},
            {"ph": "X", "cat": "user_annotation", "name": f"{pt.MARK}|step|1", "ts": 500.0, "dur": 50.0, "tid": 7},
        ]
    }
    spans = pt.spans_from_chrome(trace)
    assert [(s.kind, s.correlation) for s in spans] == [
        ("annotation", None),
        ("runtime", 3),
        ("kernel", 3),
        ("annotation", None),
    ]
    first = pt.windows(spans)[0]
    assert pt.window_metrics(first)["host_tail_us"] == 150 - 115
    path = tmp_path / "t.json.gz"
    pt.write_chrome_trace(trace, first, path)
    kept = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    assert [e["name"] for e in kept] == [
        "process_name",
        f"{pt.MARK}|step|0",
        "cudaLaunchKernel",
        "k0",
        "ignored",
        "flow",
    ]
