"""Unit tests of latency_lab.microbench on CPU with real executors (eager, thunder:torch), small shapes."""

from __future__ import annotations

import math

import pytest
import torch

from latency_lab import registry, microbench as mb, model as llama, parameters as P, results

TINY = llama.config_dict("tiny", 1)
SEED = llama.config_dict("seed", 1)
EXECUTORS = ["eager", "torch.compile:reduce-overhead", "thunder", "thunder:torch"]  # registry order


def tiny_params(**kw) -> P.Params:
    base = dict(preset="tiny", device="cpu", ops=["add", "rms_norm"], sizes=["seed", "2x"],
                executors=EXECUTORS, warmup=1, iters=3, repeats=2)
    return P.validate(**{**base, **kw})


@pytest.fixture(scope="module")
def rows():
    return mb.run(tiny_params(), TINY, log=lambda *a: None)


def test_size_labels_scale_tokens():
    assert [mb.size_tokens(s, 6) for s in ("seed", "4x", "64x")] == [6, 24, 384]
    assert mb.size_tokens("3x", 5) == 15


def test_seed_shapes_come_from_the_config():
    d = mb.dims(SEED, mb.size_tokens("seed", 6))
    shapes = {op: spec.shapes(d) for op, spec in mb.OPS.items()}
    assert shapes["add"] == {"a": (1, 6, 2048), "b": (1, 6, 2048)}
    assert shapes["mul"]["a"] == shapes["silu"]["x"] == (1, 6, 8192)
    assert shapes["linear"] == {"x": (1, 6, 2048), "w": (8192, 2048)}
    assert shapes["matmul"] == {"a": (1, 32, 1), "b": (1, 1, 6)}  # head_dim 64 -> 32 frequencies
    assert shapes["embedding"] == {"ids": (1, 6), "w": (128256, 2048)}
    assert shapes["triu"] == {"x": (6, 6)}
    assert shapes["rms_norm"] == {"x": (1, 6, 2048), "w": (2048,), "eps": 1e-5}


def test_tiny_shapes_and_size_table():
    p = tiny_params(ops="all", sizes=["seed", "4x"])
    table = mb.shape_table(TINY, p)
    assert [(r["size"], r["tokens"]) for r in table] == [("seed", 6), ("4x", 24)]
    assert table[1]["linear"] == "x=1x24x64, w=256x64"
    assert table[1]["triu"] == "x=24x24"
    assert set(table[0]) == {"size", "tokens", *P.OPS}


@pytest.mark.parametrize("op", P.OPS)
def test_inputs_have_the_declared_shapes(op):
    d = mb.dims(TINY, 12)
    kwargs = mb.make_inputs(op, d, "bfloat16", "cpu", seed=0)
    for name, shape in mb.OPS[op].shapes(d).items():
        if isinstance(shape, tuple):
            assert tuple(kwargs[name].shape) == shape, name
        else:
            assert kwargs[name] == shape
    tensors = [v for v in kwargs.values() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    expected = torch.float32 if op == "matmul" else torch.bfloat16
    assert all(t.dtype == expected for t in tensors)
    if op == "embedding":
        assert kwargs["ids"].dtype == torch.int64 and 0 <= kwargs["ids"].min() and kwargs["ids"].max() < d.vocab
    # seeded: the same call gives the same inputs
    again = mb.make_inputs(op, d, "bfloat16", "cpu", seed=0)
    assert all(torch.equal(kwargs[k], again[k]) for k in kwargs if isinstance(kwargs[k], torch.Tensor))


def _reference(op: str, kw: dict) -> torch.Tensor:
    """Each op by an independent float64 formula."""
    f = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in kw.items()}
    if op == "add":
        return f["a"] + f["b"]
    if op == "mul":
        return f["a"] * f["b"]
    if op == "silu":
        return f["x"] / (1 + torch.exp(-f["x"]))
    if op == "linear":
        return torch.einsum("bti,oi->bto", f["x"], f["w"])
    if op == "matmul":  # rotary angles: frequency i times position t
        return f["a"][:, :, 0, None] * f["b"][:, 0, None, :]
    if op == "embedding":
        return torch.stack([f["w"][i] for i in kw["ids"].flatten().tolist()]).reshape(*kw["ids"].shape, -1)
    if op == "triu":
        n = f["x"].shape[0]
        above = torch.arange(n)[None, :] > torch.arange(n)[:, None]
        return torch.where(above, f["x"], torch.zeros_like(f["x"]))
    if op == "rms_norm":
        return f["x"] / torch.sqrt((f["x"] ** 2).mean(-1, keepdim=True) + f["eps"]) * f["w"]
    raise AssertionError(op)


@pytest.mark.parametrize("op", P.OPS)
def test_ops_compute_what_they_claim(op):
    kw = mb.make_inputs(op, mb.dims(TINY, 7), "float32", "cpu", seed=1)
    if op == "rms_norm":
        kw["eps"] = 0.5  # large enough that leaving eps out would show
    out = mb.OPS[op].fn(**kw)
    ref = _reference(op, kw)
    assert out.shape == ref.shape
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


def test_matmul_inputs_are_rope_frequencies_and_positions():
    kw = mb.make_inputs("matmul", mb.dims(TINY, 5), "bfloat16", "cpu", seed=0)
    assert kw["b"].flatten().tolist() == [0, 1, 2, 3, 4]
    assert kw["a"][0, 0, 0].item() == 1.0 and kw["a"][0, -1, 0].item() < 1.0


def test_one_row_per_op_size_executor(rows):
    keys = [(r["op"], r["size"], r["executor"]) for r in rows]
    assert keys == [(op, s, ex) for op in ("add", "rms_norm") for s in ("seed", "2x") for ex in EXECUTORS]
    assert {r["tokens"] for r in rows} == {6, 12}


def test_available_executors_have_numbers(rows):
    ok = [r for r in rows if r["executor"] in ("eager", "thunder:torch")]
    assert all(r["status"] == "ok" and r["reason"] is None for r in ok)
    for r in ok:
        assert r["ms_per_call"] > 0 and r["first_call_s"] > 0 and len(r["blocks_ms"]) == 2
        assert r["passed"] is True and r["rel_err"] == pytest.approx(0, abs=2e-2)
        assert r["kernels_per_call"] is None and r["kernel_reason"]  # CPU: no device kernels
        assert r["threads"] == mb.CPU_THREADS
    eager = {(r["op"], r["size"]): r["ms_per_call"] for r in ok if r["executor"] == "eager"}
    for r in ok:
        assert math.isclose(r["overhead_vs_eager_ms"], r["ms_per_call"] - eager[r["op"], r["size"]])


def test_unavailable_executors_are_rows_with_reasons(rows):
    gone = [r for r in rows if r["executor"] in ("thunder", "torch.compile:reduce-overhead")]
    assert len(gone) == 8
    for r in gone:
        assert r["status"] == "unavailable" and "CUDA" in r["reason"]
        assert r.get("ms_per_call") is None and r["overhead_vs_eager_ms"] is None


def _broken(fail_after: int):
    """An executor whose callable raises after ``fail_after`` good calls."""
    def factory(fn, notes):
        calls = {"n": 0}

        def wrapped(**kw):
            calls["n"] += 1
            if calls["n"] > fail_after:
                raise RuntimeError("boom")
            return fn(**kw)
        return wrapped
    return registry.Executor(f"broken{fail_after}", "broken", "raises", factory)


@pytest.mark.parametrize("fail_after, during", [(0, "first call"), (1, "timing")])
def test_failing_executor_is_a_row(monkeypatch, fail_after, during):
    ex = _broken(fail_after)
    monkeypatch.setitem(registry.REGISTRY, ex.name, ex)
    out = mb.run(tiny_params(ops=["add"], sizes=["seed"], executors=["eager", ex.name]), TINY, log=lambda *a: None)
    assert [r["executor"] for r in out] == ["eager", ex.name]
    assert out[0]["status"] == "ok"
    assert out[1]["status"] == "failed" and out[1]["reason"].startswith(during) and "boom" in out[1]["reason"]
    assert out[1]["overhead_vs_eager_ms"] is None


def test_add_table_sits_beside_the_seed_reference(rows):
    table = mb.add_table(rows)
    assert [r["executor"] for r in table] == EXECUTORS and {r["size"] for r in table} == {"seed"}
    assert [r["seed_h100_ms"] for r in table] == [0.007, None, 0.072, 0.042]
    assert set(table[0]) == set(mb.ADD_COLUMNS)
    assert mb.add_table([r for r in rows if r["op"] != "add"]) == []


def test_charts_carry_the_rows(rows):
    ops, labels, grid = mb.overhead_grid(rows, "2x")
    assert ops == ["add", "rms_norm"] and labels[0] == "torch-eager" and grid[0][0] == 0
    thunder_torch = next(r for r in rows if (r["op"], r["size"], r["executor"]) == ("rms_norm", "2x", "thunder:torch"))
    assert grid[1][labels.index("Thunder-torch")] == pytest.approx(thunder_torch["overhead_vs_eager_ms"] * 1e3)
    assert grid[1][labels.index("Thunder-nvFuser")] is None
    fig = mb.heatmap(rows, ("seed", "2x"))
    assert len(fig.data) == 2
    sweep = mb.sweep_chart(rows).data  # one line per executor with numbers, in each op's panel
    assert sorted(t.name for t in sweep) == ["Thunder-torch", "Thunder-torch", "torch-eager", "torch-eager"]
    assert list(mb.add_chart(mb.add_table(rows), "cpu").data[1].y) == [0.007, None, 0.072, 0.042]


def test_cpu_threads_are_set_and_restored():
    from torch._inductor import config as inductor_config

    before, cpp_before = torch.get_num_threads(), inductor_config.cpp.threads
    with mb.intra_op_threads("cpu") as n:
        assert n == torch.get_num_threads() == inductor_config.cpp.threads == mb.CPU_THREADS
    assert (torch.get_num_threads(), inductor_config.cpp.threads) == (before, cpp_before)


def test_tiny_run_results_json(tiny_run):
    path = next(tiny_run.rglob("04_op_microbenchmarks.results.json"))
    data = results.load(path)
    p = data["params"]
    expected = [(op, s, ex) for op in p["ops"] for s in p["sizes"] for ex in p["executors"]]
    assert [(r["op"], r["size"], r["executor"]) for r in data["rows"]] == expected
    for r in data["rows"]:
        if r["status"] == "ok":
            assert r["ms_per_call"] > 0 and r["first_call_s"] > 0, r
        else:
            assert r["status"] in ("unavailable", "failed") and r["reason"], r
    assert "eager" in [r["executor"] for r in data["rows"] if r["status"] == "ok"]
    table = data["key_table"]
    assert "executor" in table["columns"] and len(table["rows"]) == len(p["executors"])


def test_add_findings_claim_only_what_the_rows_show():
    rows = [{"executor": "eager", "label": "torch-eager", "ms_per_call": 0.010, "kernels_per_call": 1.0, "kernel_ms_per_call": 0.001},
            {"executor": "thunder", "label": "Thunder-nvFuser", "ms_per_call": 0.080, "kernels_per_call": 1.0, "kernel_ms_per_call": 0.001},
            {"executor": "torch.compile:reduce-overhead", "label": "torch.compile+CUDA graphs", "ms_per_call": 0.060,
             "kernels_per_call": 2.0, "kernel_ms_per_call": 0.002},
            {"executor": "thunder:torch", "label": "Thunder-torch", "ms_per_call": None, "reason": "failed"}]
    gpu = mb.add_findings(rows, on_gpu=True)
    assert gpu[0] == "Fastest add here: torch-eager at 10 µs per call."
    assert "90% of its 10 µs call is host work" in gpu[1]
    assert gpu[2] == "More kernels per add than eager's 1: torch.compile+CUDA graphs (2)."
    cpu = mb.add_findings([{**r, "kernels_per_call": None, "kernel_ms_per_call": None} for r in rows], on_gpu=False)
    assert len(cpu) == 2 and "no device kernels" in cpu[1] and not any("kernel(s)" in s for s in cpu)
    assert mb.add_findings([], on_gpu=True) == ["No executor produced a time for add here."]
