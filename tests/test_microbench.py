"""latency_lab.studies.microbench.study on CPU: op shapes and inputs, the grid with real executors (eager,
thunder:torch) built and timed in the same rounds, failures as rows, the sentences on fake rows and fake rounds,
``run`` and ``Result.save`` without papermill, and the tiny run's 04 results."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from latency_lab.core import model_config, parameters, registry, results, sweep
from latency_lab.core.harness import Rounds, Timed
from latency_lab.pages import charts
from latency_lab.studies.microbench import ops as microbench_ops
from latency_lab.studies.microbench import study as microbench

TINY = model_config.config_dict("tiny", 1)
SEED = model_config.config_dict("seed", 1)
EXECUTORS = ["eager", "torch.compile:reduce-overhead", "thunder", "thunder:torch"]  # registry order
# The sections of 04's results file, from the notebook (the tiny run) and from ``run`` alike.
RESULT_KEYS = {
    "schema",
    "notebook",
    "created",
    "params",
    "environment",
    "key_table",
    "shapes",
    "rows",
    "findings",
    "threads",
    "memory_after_release",
    "rounds",
    "host_reference",
}


def tiny_params(**kw) -> parameters.Params:
    base = {
        "preset": "tiny",
        "device": "cpu",
        "ops": ["add", "rms_norm"],
        "sizes": ["seed", "2x"],
        "executors": EXECUTORS,
        "warmup": 1,
        "iters": 3,
        "repeats": 2,
    }
    return parameters.validate(**{**base, **kw})


@pytest.fixture(scope="module")
def measured():
    """The grid's builds, rounds and rows (builds released after the rows are taken)."""
    params, said = tiny_params(), []
    built, timed, threads = microbench.measure(params, TINY, progress=said.append)
    table = microbench.rows(built, timed, threads, params.seq_len)
    sweep.release(built, params.device)
    return params, timed, table, said


@pytest.fixture(scope="module")
def rows(measured):
    return measured[2]


def test_size_labels_scale_tokens():
    assert [microbench_ops.size_tokens(s, 6) for s in ("seed", "4x", "64x")] == [6, 24, 384]
    assert microbench_ops.size_tokens("3x", 5) == 15


def test_seed_shapes_come_from_the_config():
    d = microbench_ops.dims(SEED, microbench_ops.size_tokens("seed", 6))
    shapes = {op: spec.shapes(d) for op, spec in microbench_ops.OPS.items()}
    assert shapes["add"] == {"a": (1, 6, 2048), "b": (1, 6, 2048)}
    assert shapes["mul"]["a"] == shapes["silu"]["x"] == (1, 6, 8192)
    assert shapes["linear"] == {"x": (1, 6, 2048), "w": (8192, 2048)}
    assert shapes["matmul"] == {"a": (1, 32, 1), "b": (1, 1, 6)}  # head_dim 64 -> 32 frequencies
    assert shapes["embedding"] == {"ids": (1, 6), "w": (128256, 2048)}
    assert shapes["triu"] == {"x": (6, 6)}
    assert shapes["rms_norm"] == {"x": (1, 6, 2048), "w": (2048,), "eps": 1e-5}


def test_tiny_shapes_and_size_table():
    p = tiny_params(ops="all", sizes=["seed", "4x"])
    table = microbench_ops.shape_table(TINY, p)
    assert [(r["size"], r["tokens"]) for r in table] == [("seed", 6), ("4x", 24)]
    assert table[1]["linear"] == "x=1x24x64, w=256x64"
    assert table[1]["triu"] == "x=24x24"
    assert set(table[0]) == {"size", "tokens", *parameters.OPS}


@pytest.mark.parametrize("op", parameters.OPS)
def test_inputs_have_the_declared_shapes(op):
    d = microbench_ops.dims(TINY, 12)
    kwargs = microbench_ops.make_inputs(op, d, "bfloat16", "cpu", seed=0)
    for name, shape in microbench_ops.OPS[op].shapes(d).items():
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
    again = microbench_ops.make_inputs(op, d, "bfloat16", "cpu", seed=0)
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


@pytest.mark.parametrize("op", parameters.OPS)
def test_ops_compute_what_they_claim(op):
    kw = microbench_ops.make_inputs(op, microbench_ops.dims(TINY, 7), "float32", "cpu", seed=1)
    if op == "rms_norm":
        kw["eps"] = 0.5  # large enough that leaving eps out would show
    out = microbench_ops.OPS[op].fn(**kw)
    ref = _reference(op, kw)
    assert out.shape == ref.shape
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


def test_matmul_inputs_are_rope_frequencies_and_positions():
    kw = microbench_ops.make_inputs("matmul", microbench_ops.dims(TINY, 5), "bfloat16", "cpu", seed=0)
    assert kw["b"].flatten().tolist() == [0, 1, 2, 3, 4]
    assert kw["a"][0, 0, 0].item() == 1.0 and kw["a"][0, -1, 0].item() < 1.0


def test_one_row_per_op_size_executor(rows):
    keys = [(r["op"], r["size"], r["executor"]) for r in rows]
    assert keys == [(op, s, ex) for op in ("add", "rms_norm") for s in ("seed", "2x") for ex in EXECUTORS]
    assert {(r["size"], r["tokens"]) for r in rows} == {("seed", 6), ("2x", 12)}


def test_every_build_is_timed_in_the_same_rounds(measured):
    params, timed, rows, _ = measured
    ok = [r for r in rows if r["executor"] in ("eager", "thunder:torch")]
    assert all(r["status"] == "ok" and r["reason"] is None for r in ok)
    assert len(timed.entries) == len(ok) == 8 and len(timed.reference_ms) == 2 * params.repeats
    assert {len(t.wall_ms) for t in timed.entries.values()} == {2 * params.repeats}  # one block per round each
    for r in ok:
        assert r["wall_q1_ms"] <= r["wall_ms"] <= r["wall_q3_ms"] and r["wall_ms"] > 0 and r["first_call_s"] > 0
        assert r["host_ms"] == r["wall_ms"]  # on a CPU the same perf_counter times both
        assert r["rel_err"] == pytest.approx(0, abs=2e-2) and r["threads"] == microbench.CPU_THREADS
        assert r["kernels_per_step"] is None and "no device kernels on CPU" in r["notes"]
    for r in (r for r in ok if r["executor"] == "thunder:torch"):
        eager = next(e for e in ok if (e["op"], e["size"], e["executor"]) == (r["op"], r["size"], "eager"))
        key, base = f"thunder:torch @ op={r['op']}, size={r['size']}", f"eager @ op={r['op']}, size={r['size']}"
        rounds = zip(timed.entries[key].wall_ms, timed.entries[base].wall_ms)
        assert r["overhead_vs_eager_us"] == pytest.approx(float(np.median([(a - b) * 1e3 for a, b in rounds])))
        assert r["vs_eager_x"] == pytest.approx(timed.ratio(key, base).median)
        assert eager["overhead_vs_eager_us"] == 0


def test_an_executor_unavailable_here_is_said_once_not_at_every_point(measured):
    """On a CPU each of the 4 (op, size) points would say "nvFuser needs a CUDA device" for Thunder: one
    line per unavailable executor instead, and no build line for it."""
    said = measured[3]
    unavailable = [line for line in said if "unavailable at every point" in line]
    assert len(unavailable) == 2 and all("CUDA" in line for line in unavailable), said
    assert not any("Thunder-nvFuser: building" in line for line in said), said


def test_unavailable_executors_are_rows_with_reasons(rows):
    gone = [r for r in rows if r["executor"] in ("thunder", "torch.compile:reduce-overhead")]
    assert len(gone) == 8
    for r in gone:
        assert r["status"] == "unavailable" and "CUDA" in r["reason"]
        assert r["wall_ms"] is None and r["overhead_vs_eager_us"] is None and r["vs_eager_x"] is None


def test_overhead_is_taken_within_rounds_not_from_the_medians():
    """The host slows down in rounds 3-4: the medians' difference (10 µs) mixes the drift in, the
    within-round difference (2 µs every round) does not."""
    timed = _rounds({"a": [0.010, 0.010, 0.030, 0.030], "b": [0.008, 0.008, 0.028, 0.028]}, [1.0, 1.0, 3.0, 3.0])
    assert microbench.difference(timed, "a", "b").median == pytest.approx(2.0)
    assert microbench.difference(timed, "a", "missing") is None


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


# tiny_params: 1 warm-up call after the first call; rounds of 1 + 3 calls, a warm-up round and 4 timed ones
@pytest.mark.parametrize(
    "fail_after, status, during",
    [
        (0, "failed", "first call"),
        (1, "failed", "warm-up"),
        (2, "failed", "rounds: warm-up round"),
        (10, "partial", "rounds: round 2"),
    ],
)
def test_failing_executor_is_a_row(monkeypatch, fail_after, status, during):
    ex = _broken(fail_after)
    monkeypatch.setitem(registry.REGISTRY, ex.name, ex)
    params = tiny_params(ops=["add"], sizes=["seed"], executors=["eager", ex.name])
    built, timed, threads = microbench.measure(params, TINY, progress=lambda text: None)
    out = microbench.rows(built, timed, threads, params.seq_len)
    assert [r["executor"] for r in out] == ["eager", ex.name]
    assert out[0]["status"] == "ok" and out[0]["wall_ms"] > 0
    assert out[1]["status"] == status and out[1]["reason"].startswith(during) and "boom" in out[1]["reason"]
    assert (out[1]["wall_ms"] is None) == (status == "failed")
    if status == "partial":  # the block before the error stands, beside eager's in the same round
        assert len(timed.entries[built[1].key].wall_ms) == 1 and out[1]["overhead_vs_eager_us"] is not None


def test_the_key_table_is_the_seed_s_add_with_the_seed_beside_it_on_a_gpu_run_only(rows):
    cpu = tiny_params()
    table = microbench.key_rows(rows, cpu)
    assert [r["executor"] for r in table] == EXECUTORS and {r["size"] for r in table} == {"seed"}
    assert list(table[0]) == microbench.KEY_COLUMNS == microbench.key_columns(cpu)
    gpu = parameters.resolved(preset="seed", device="cuda", sizes=("seed", "2x"))
    seeded = microbench.key_rows(rows, gpu)
    assert [r["seed_wall_ms"] for r in seeded] == [0.007, None, 0.072, 0.042] and microbench.key_columns(gpu)[
        -1
    ] == "seed_wall_ms"
    assert microbench.key_rows([r for r in rows if r["op"] != "add"], cpu) == []


def _add(executor, wall, kernels=None, kernel_ms=None, overhead=None, ratio=None, status="ok", reason=None):
    return {
        "op": "add",
        "size": "seed",
        "executor": executor,
        "label": executor,
        "wall_ms": wall,
        "wall_q1_ms": wall,
        "wall_q3_ms": wall,
        "host_ms": wall and 0.9 * wall,
        "kernels_per_step": kernels,
        "kernel_ms": kernel_ms,
        "overhead_vs_eager_us": overhead,
        "vs_eager_x": ratio,
        "status": status,
        "reason": reason,
    }


def _rounds(walls: dict[str, list[float]], reference: list[float]) -> Rounds:
    return Rounds(
        {k: Timed(k, wall_ms=list(v), host_ms=list(v)) for k, v in walls.items()},
        list(reference),
        "cuda-events",
        10,
        40,
        len(reference),
    )


def test_findings_claim_only_what_the_rows_show():
    rows = [
        _add("eager", 0.010, 1.0, 0.001, 0.0, 1.0),
        _add("thunder", 0.080, 1.0, 0.001, 70.0, 8.0),
        _add("torch.compile:reduce-overhead", 0.060, 2.0, 0.002, 50.0, 6.0),
        _add("thunder:torch", None, status="failed", reason="first call: boom"),
    ]
    steady = _rounds({}, [1.0, 1.01, 1.0, 1.02])
    gpu = microbench.findings(rows, steady, parameters.resolved(preset="seed", device="cuda"))
    assert gpu[0] == "Fastest add here (size seed): eager at 10.0 µs per call (steady-state host time 9.00 µs)."
    assert gpu[1] == (
        "Against eager's add (10.0 µs), per call, within rounds: torch.compile:reduce-overhead +50.0 µs (x6.00), "
        "thunder +70.0 µs (x8.00). One add does almost no work, so this is each executor's fixed cost per call."
    )
    assert gpu[2] == (
        "Eager launches 1 kernel(s) of 1.00 µs in all per add: they fill 10% of its 10.0 µs call; the rest "
        "is host work. More kernels per add than eager's: torch.compile:reduce-overhead (2)."
    )
    assert (gpu[3].startswith("The host read slow") or gpu[3] == "No host reference was timed.") and gpu[-1].startswith(
        "1 of 4 (op, size, executor) rows"
    )
    moved = microbench.findings(
        [rows[0], _add("thunder", 0.011, None, None, 1.0, 1.1)],
        _rounds({}, [1.0, 1.5, 1.0, 1.0]),
        parameters.resolved(preset="seed", device="cuda"),
    )
    assert "(the host reference moved by 50% during these rounds, more than this difference" in moved[1]
    cpu = microbench.findings(
        [{**r, "kernels_per_step": None, "kernel_ms": None} for r in rows], steady, parameters.resolved(device="cpu")
    )
    assert cpu[0] == "Fastest add here (size seed): eager at 10.0 µs per call."
    assert any("no device kernels" in s for s in cpu) and not any("kernel(s)" in s for s in cpu)
    assert (
        microbench.findings([], steady, parameters.resolved(device="cpu"))[0]
        == "No executor produced a time for add here."
    )
    assert microbench.overhead_text(rows[1:], steady) is None  # no eager: no overhead against it
    assert microbench.overhead_text(rows[:1], steady) is None  # eager alone
    assert microbench.not_ok_text(rows[:3]) is None


def test_charts_carry_the_rows(rows):
    heatmap = microbench.heatmap(rows, ("seed", "2x"))
    labels, ops, grid = charts.heatmap_grid(
        [r for r in heatmap.rows if r["size"] == "2x"], "label", "op", heatmap.color
    )
    assert ops == ["add", "rms_norm"] and labels[0] == "torch-eager" and grid[0][0] == 0
    thunder_torch = next(r for r in rows if (r["op"], r["size"], r["executor"]) == ("rms_norm", "2x", "thunder:torch"))
    assert grid[1][labels.index("Thunder-torch")] == thunder_torch["overhead_vs_eager_us"]
    assert grid[1][labels.index("Thunder-nvFuser")] is None
    drawn = charts.draw(heatmap)
    assert len(drawn.data) == 2 and [a.text for a in drawn.layout.annotations] == ["size seed", "size 2x"]
    lines = charts.draw(microbench.size_chart(rows)).data  # one line per executor with numbers, in each op's panel
    assert sorted(t.name for t in lines) == ["Thunder-torch", "Thunder-torch", "torch-eager", "torch-eager"]
    assert all(len(t.x) == 2 for t in lines)  # both sizes
    assert microbench.size_chart([r for r in rows if r["size"] == "seed"]) is None  # one size: no line
    cpu = charts.draw(microbench.add_chart(microbench.key_rows(rows, tiny_params()), "cpu")).data
    assert len(cpu) == 1  # no seed bars on a CPU
    seeded = charts.draw(
        microbench.add_chart(
            microbench.key_rows(rows, parameters.resolved(preset="seed", device="cuda", sizes=("seed",))), "H200"
        )
    ).data
    assert [t.name for t in seeded] == ["measured here (H200)", "seed, DGX H100-80GB (reference, not measured here)"]
    assert [v if v == v else None for v in seeded[1].y] == [0.007, None, 0.072, 0.042]  # NaN: no seed number
    assert microbench.add_chart([], "cpu") is None


def test_cpu_threads_are_set_and_restored():
    from torch._inductor import config as inductor_config

    before, cpp_before = torch.get_num_threads(), inductor_config.cpp.threads
    with microbench.intra_op_threads("cpu") as n:
        assert n == torch.get_num_threads() == inductor_config.cpp.threads == microbench.CPU_THREADS
    assert (torch.get_num_threads(), inductor_config.cpp.threads) == (before, cpp_before)


def test_run_without_papermill_gives_what_the_notebook_shows_and_saves(tmp_path):
    """``run`` on eager's add at the seed size alone: the Result's fields, and ``save`` writes 04's results
    file with the notebook's sections."""
    params = tiny_params(ops=["add"], sizes=["seed"], executors=["eager"], output_dir=str(tmp_path))
    result = microbench.run(params)
    assert result.params is params
    assert result.ops_in_model == [{"op": "add", "in the model": microbench_ops.OPS["add"].where}]
    assert result.shapes == microbench_ops.shape_table(TINY, params)
    assert [(r["op"], r["size"], r["executor"], r["status"]) for r in result.rows] == [("add", "seed", "eager", "ok")]
    assert result.add_rows == microbench.key_rows(result.rows, params) and len(result.add_rows) == 1
    assert result.findings == microbench.findings(result.rows, result.timed, params)
    assert result.findings[0].startswith("Fastest add here")
    assert result.threads == microbench.CPU_THREADS and len(result.timed.entries) == 1
    assert result.device_name.startswith("CPU: ")
    path = result.save()
    assert path == results.path_for(tmp_path, results.OP_MICROBENCHMARKS)
    data = results.load(path)
    assert set(data) == RESULT_KEYS
    assert data["findings"] == result.findings and data["threads"] == result.threads
    assert [r["executor"] for r in data["rows"]] == ["eager"] and len(data["key_table"]["rows"]) == 1
    assert {len(rec["wall_ms"]) for rec in data["rounds"].values()} == {2 * params.repeats}


def test_tiny_run_results_json(tiny_run):
    data = results.load(tiny_run / f"{results.OP_MICROBENCHMARKS}.results.json")
    assert set(data) == RESULT_KEYS
    p = data["params"]
    expected = [(op, s, ex) for op in p["ops"] for s in p["sizes"] for ex in p["executors"]]
    assert [(r["op"], r["size"], r["executor"]) for r in data["rows"]] == expected
    for r in data["rows"]:
        if r["status"] == "ok":
            assert r["wall_ms"] > 0 and r["first_call_s"] > 0 and r["vs_eager_x"] is not None, r
        else:
            assert r["status"] == "unavailable" and r["reason"], r
    ok = [r for r in data["rows"] if r["status"] == "ok"]
    assert "eager" in {r["executor"] for r in ok}
    assert {len(rec["wall_ms"]) for rec in data["rounds"].values()} == {2 * p["repeats"]}
    assert len(data["rounds"]) == len(ok)
    table = data["key_table"]
    assert table["columns"] == microbench.KEY_COLUMNS and len(table["rows"]) == len(p["executors"])
    assert data["findings"][0].startswith("Fastest add here")
