"""What only a GPU shows, in this process on CUDA device 0: the profiler's kernel counts against modules
whose kernels are known, nvFuser's regions in a Thunder trace of the tiny model and their host µs in
place, steady-state host time against CUDA-event walls, the memory CUDA graphs hold, the CUDA-graph
executors' outputs, and a Thunder CUDA graph beside torch.compile's in one process (the cuBLAS
workspace hazard).
Skipped, with the reason, where CUDA is absent (tests/conftest.py)."""

from __future__ import annotations

import pytest
import torch

from latency_lab.core import failures, harness, timing
from latency_lab.core import model as llama
from latency_lab.core import parameters as P
from latency_lab.core import registry as E
from latency_lab.instruments import thunder_breakdown, trace_row

pytestmark = pytest.mark.gpu

GRAPH_EXECUTORS = ("torch.compile:reduce-overhead", "thunder:cudagraphs")


class Pointwise(torch.nn.Module):
    """Three pointwise ops: three kernels in eager, one fused Triton kernel under torch.compile."""

    def forward(self, x):
        return ((x + 1) * 2).sin()


@pytest.fixture(scope="module")
def tiny():
    """The tiny preset's model on the GPU (the seed's call, one layer) and eager's logits."""
    setup = llama.build(P.validate(preset="tiny", device="cuda"))
    return setup, llama.logits_of(setup.model(**setup.kwargs)).clone()


def logits(fn, kwargs) -> torch.Tensor:
    """A copy of the call's logits (a CUDA graph's replay overwrites its outputs)."""
    return llama.logits_of(fn(**kwargs)).clone()


@pytest.mark.parametrize("name, kernels", [("eager", 3), ("torch.compile", 1)])
def test_profiler_counts_the_known_kernels_of_a_pointwise_module(name, kernels):
    kwargs = {"x": torch.randn(1 << 16, device="cuda")}
    prepared = harness.prepare(E.REGISTRY[name], Pointwise(), kwargs, "cuda")
    assert prepared.ok, prepared.reason
    got = timing.profile_kernels(prepared.fn, kwargs, "cuda", steps=5)
    assert got["kernels_per_step"] == kernels, got["top_kernels"]
    assert got["copies_per_step"] == 0 and got["kernel_ms"] > 0
    assert sum(k["calls_per_step"] for k in got["top_kernels"]) == kernels
    if name == "torch.compile":  # one Triton kernel; the region annotations it puts on the device are not kernels
        assert "triton" in got["top_kernels"][0]["name"]


def test_steady_state_host_time_never_exceeds_the_wall_on_a_gpu(tiny):
    """Blocks of back-to-back calls: perf_counter inside the CUDA events, so host <= wall (up to the
    events' own few µs), for a host-bound Thunder step and a GPU-bound graph replay alike."""
    setup, _ = tiny
    prepared = {
        n: harness.prepare(E.REGISTRY[n], setup.model, setup.kwargs, "cuda")
        for n in ("eager", "torch.compile:reduce-overhead", "thunder")
    }
    assert all(p.ok for p in prepared.values()), {n: p.reason for n, p in prepared.items()}
    timed = harness.rounds(
        harness.entries(prepared, setup.kwargs), "cuda", warmup=5, iters=20, repeats=2, progress=lambda text: None
    )
    for name, t in timed.entries.items():
        assert t.error is None and all(h <= w * 1.05 for h, w in zip(t.host_ms, t.wall_ms)), (
            name,
            t.host_ms,
            t.wall_ms,
        )


def test_nvfusion_regions_are_taken_apart_in_place(tiny):
    setup, _ = tiny
    p = harness.prepare(E.REGISTRY["thunder"], setup.model, setup.kwargs, "cuda")
    ins, why = thunder_breakdown.insitu_probe(p, setup.kwargs, 10)
    assert why is None and any(s.kind == "nvFusion" for s in ins.statements)
    blocks = [ins.block(10) for _ in range(3)]
    summary = thunder_breakdown.summarize(ins, blocks, [b["call_us"] / 1e3 for b in blocks])
    assert summary["kinds"]["nvFusion"].median > 0 and summary["startup_us"].median > 0
    alone = thunder_breakdown.alone(p.fn, setup.kwargs, "cuda", 5, "thunder")
    assert any(r["kind"] == "nvFusion" and r.get("kernels", 0) >= 1 for r in alone)


def test_memory_a_cuda_graph_holds_is_never_negative(tiny):
    setup, _ = tiny
    before = harness.memory("cuda", empty=True)
    p = harness.prepare(E.REGISTRY["torch.compile:reduce-overhead"], setup.model, setup.kwargs, "cuda")
    timing.warm_up(p.fn, setup.kwargs, 3)
    held = harness.memory_held(before, harness.memory("cuda", empty=True))
    assert all(v is None or v >= 0 for k, v in held.items() if k != "reason")
    assert harness.release([p], "cuda")["allocated_mib"] >= 0


def test_thunder_trace_of_the_tiny_model_has_nvfuser_regions_and_leaves_the_linears_to_torch(tiny):
    setup, _ = tiny
    row = trace_row.build_row(E.REGISTRY["thunder"], setup.model, setup.kwargs, "cuda")
    assert row["status"] == "ok", row["reason"]
    top = [g for g in row["regions"] if g["inside"] is None]
    assert top and all(g["kind"] == "nvFusion" and g["executor"] == "nvfuser" and g["n_ops"] > 0 for g in top)
    assert row["composition"]["nvFusion regions"] == len(top)
    assert all(f"{g['region']}(" in row["trace"] for g in top)
    # The seed's finding: nvFuser takes no matmul; the layer's 7 linears and the lm_head run in torch.
    assert row["unfused"]["linear"] == {"count": 8, "executors": ["torch"]}
    assert not any(g["ops"].get("linear") for g in row["regions"])


@pytest.mark.parametrize("name", GRAPH_EXECUTORS)
def test_cuda_graph_executor_replays_match_eager(tiny, name):
    setup, reference = tiny
    prepared = harness.prepare(E.REGISTRY[name], setup.model, setup.kwargs, "cuda")
    assert prepared.ok, prepared.reason
    timing.warm_up(prepared.fn, setup.kwargs, 3)  # torch.compile records its graph on the second or third call
    for _ in range(3):
        check = llama.compare_to_eager(logits(prepared.fn, setup.kwargs), reference, setup.params.dtype)
        assert check["passed"], check
    assert failures.cuda_context_error("cuda") is None


def test_thunder_and_torch_compile_cuda_graphs_in_one_process(tiny):
    """Built in registry order (torch.compile's graphs recorded first), then called alternately, as
    notebook 02 times them: no replay faults and both stay correct (executors.THUNDER_CUDAGRAPHS_HAZARD)."""
    setup, reference = tiny
    names = [n for n in E.REGISTRY if n in GRAPH_EXECUTORS]
    assert names == list(GRAPH_EXECUTORS)
    fns = []
    for name in names:
        prepared = harness.prepare(E.REGISTRY[name], setup.model, setup.kwargs, "cuda")
        assert prepared.ok, prepared.reason
        timing.warm_up(prepared.fn, setup.kwargs, 3)
        fns.append(prepared.fn)
    for _ in range(10):
        for name, fn in zip(names, fns):
            check = llama.compare_to_eager(logits(fn, setup.kwargs), reference, setup.params.dtype)
            assert check["passed"], (name, check)
    torch.cuda.synchronize()
    assert failures.cuda_context_error("cuda") is None
