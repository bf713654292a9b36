"""Timing primitives and the seed-shaped table."""

import time
from types import SimpleNamespace

import pytest

from latency_lab import executor_timing as et, registry as E, reference, timing


def test_stats_median_iqr_and_noisy_flag():
    s = timing.stats([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s["median"] == 3.0 and s["q1"] == 2.0 and s["q3"] == 4.0 and s["iqr"] == 2.0
    assert s["noisy"] and s["n"] == 5 and s["max"] == 100.0
    assert not timing.stats([1.0, 1.01, 0.99, 1.0])["noisy"]
    with pytest.raises(ValueError):
        timing.stats([])


def test_event_timer_on_cpu_measures_real_time():
    calls = []

    def step(**kw):
        calls.append(1)
        time.sleep(0.002)
    r = timing.event_timer(step, {}, "cpu", warmup=2, iters=3, repeats=4)
    assert len(calls) == 2 + 3 * 4
    assert r["method"] == "perf_counter" and len(r["blocks_ms"]) == 4
    assert 1.9 < r["median"] < 20


def test_host_submit_and_profile_on_cpu():
    h = timing.host_submit(lambda **kw: time.sleep(0.001), {}, "cpu", calls=5)
    assert h["calls"] == 5 and h["median"] >= 0.9
    assert timing.profile_kernels(lambda **kw: None, {}, "cpu", steps=3) == {"reason": "no device kernels on CPU"}


def test_seed_table_derivation():
    row = timing.seed_table_row(1.281, 0.297, 32)
    assert row["cpu_overhead_ms"] == pytest.approx(0.984)
    assert row["overhead_per_kernel_us"] == pytest.approx(30.75)
    assert timing.seed_table_row(1.0, None, None) == {"cpu_overhead_ms": None, "overhead_per_kernel_us": None}


def _prepared(name):
    return E.Prepared(E.REGISTRY[name], "ok", fn=lambda **kw: None, first_call_s=1.0)


def _wall(pass1, pass2, error=None):
    """A wall record whose ABBA rounds hold ``pass1`` and ``pass2``."""
    params = SimpleNamespace(device="cpu", warmup=0, iters=1, repeats=len(pass1))
    queues = [list(pass1), list(pass2)]
    rounds = [queues[et.pass_of(i)].pop(0) for i in range(len(pass1) + len(pass2))]
    return et._wall_record(rounds, error, "perf_counter", params)


def test_measured_row_flags_disagreeing_passes_and_host_bound():
    wall = _wall([1.0, 1.0, 1.0], [1.2, 1.2, 1.2])
    host = timing.stats([0.9, 0.9])  # below 85% of the 1.1 ms wall
    kernels = {"kernel_ms_per_step": 0.25, "kernels_per_step": 25.0}
    row = et.measured_row(_prepared("eager"), {"kernels": kernels, "host": host}, wall)
    assert row["Wall Clock Time (ms)"] == pytest.approx(1.1)
    assert row["CPU Overhead (ms)"] == pytest.approx(0.85) and row["Overhead / Kernel (us)"] == pytest.approx(34.0)
    assert row["pass 2 / pass 1"] == pytest.approx(1.2) and row["noisy"]
    assert row["host-bound"] is False and row["status"] == "ok" and row["reason"] is None
    steady = et.measured_row(_prepared("eager"), {"kernels": kernels, "host": timing.stats([1.0])}, _wall([1.0] * 3, [1.05] * 3))
    assert steady["host-bound"] and not steady["noisy"] and steady["pass 2 / pass 1"] == pytest.approx(1.05)
    cpu_row = et.measured_row(_prepared("eager"), {"kernels": {"reason": "no device kernels on CPU"}, "host": host}, wall)
    assert cpu_row["host-bound"] is None and cpu_row["Kernels"] is None
    assert list(row)[:6] == et.SEED_COLUMNS


def test_reference_rows_carry_seed_numbers_and_sources():
    rows = et.reference_rows()
    nsight = [r for r in rows if "Nsight" in r["source"]]
    assert {r["Execution Type"]: r["Wall Clock Time (ms)"] for r in nsight} == \
        {"Thunder-nvFuser": 1.281, "Thunder-torch": 1.232, "torch.compile": 0.455, "torch-eager": 1.014}
    assert all("H100" in r["source"] or "L40S" in r["source"] for r in rows)
    assert len(rows) == len(reference.SEED_NSIGHT_DGX_H100["rows"]) + len(reference.SEED_CUDA_TIMER_DGX_H100["rows"]) \
        + len(reference.SEED_TIMEIT_L40S["rows"])


def test_ranking_text_compares_with_seed_order_and_names_ties():
    def row(name, ms):
        return {"Execution Type": E.REGISTRY[name].label, "Wall Clock Time (ms)": ms, "source": "measured here", "executor": name}

    def wall(p1, p2):
        return _wall([p1], [p2])
    same = et.ranking_text([row("eager", 1.0), row("torch.compile", 0.5)], {"eager": wall(1.0, 1.0), "torch.compile": wall(0.5, 0.5)})
    assert same.startswith("Fastest to slowest by median wall time: torch.compile (0.500 ms) < torch-eager") and "keep the seed" in same
    differ = et.ranking_text([row("eager", 0.4), row("torch.compile", 0.5)], {"eager": wall(0.4, 0.4), "torch.compile": wall(0.5, 0.5)})
    assert "differs" in differ and "separates eager < torch.compile" in differ
    # thunder is the seed's slowest; here it is 1% faster than eager, but the passes overlap: a tie
    tie = et.ranking_text([row("eager", 3.29), row("thunder", 3.27)], {"eager": wall(3.28, 3.33), "thunder": wall(3.27, 3.30)})
    assert "Thunder-nvFuser (3.27 ms) ~ torch-eager" in tie and "within this run's noise for thunder ~ eager" in tie
    assert et.ranking_text([], {}) == "No executor produced a wall time here."


def test_build_and_measure_keeps_failures_in_their_rows():
    setup = SimpleNamespace(model=lambda **kw: 1, kwargs={})
    exs = [E.REGISTRY[n] for n in ("eager", "thunder", "thunder:torch")]

    def profile(p):
        if p.executor.name == "eager":
            raise RuntimeError("profiler exploded")
        return {"x": 1}
    prepared, measured = et.build_and_measure(
        exs, setup, {"wall": lambda p: {"w": 1}, "kernels": profile, "host": lambda p: {"h": 1}}, "cpu")
    assert measured["eager"] == {"wall": {"w": 1}}
    assert prepared["eager"].status == "failed" and prepared["eager"].reason == "kernels: RuntimeError: profiler exploded"
    assert prepared["thunder"].status == "unavailable" and "thunder" not in measured
    assert measured["thunder:torch"] == {"wall": {"w": 1}, "kernels": {"x": 1}, "host": {"h": 1}}
    assert prepared["thunder:torch"].ok


def test_passes_are_abba_and_balance_orders():
    passes = [et.pass_of(i) for i in range(8)]
    assert passes == [0, 1, 1, 0, 0, 1, 1, 0]
    forward = [i for i in range(8) if i % 2 == 0]  # forward-order rounds fall on both passes equally
    assert sorted(et.pass_of(i) for i in forward) == [0, 0, 1, 1]
    linear = _wall([0.0, 3.0, 4.0, 7.0], [1.0, 2.0, 5.0, 6.0])  # a steady drift: both passes' medians agree
    assert linear["rounds_ms"] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    assert linear["passes"][0]["median"] == linear["passes"][1]["median"] == 3.5


def test_interleaved_walls_alternate_order_and_split_passes():
    order = []

    def step(name):
        return lambda **kw: order.append(name)
    prepared = {n: E.Prepared(E.REGISTRY[n], "ok", fn=step(n)) for n in ("eager", "torch.compile")}
    prepared["thunder"] = E.Prepared(E.REGISTRY["thunder"], "unavailable", reason="no GPU")
    params = SimpleNamespace(device="cpu", warmup=1, iters=2, repeats=4)
    walls = et.interleaved_walls(prepared, {}, params)
    assert list(walls) == ["eager", "torch.compile", et.HOST_REFERENCE]
    blocks = [order[i] for i in range(0, len(order), 3)]  # each block: 1 warm-up + 2 timed calls
    assert blocks == ["torch.compile", "eager"] + ["eager", "torch.compile", "torch.compile", "eager"] * 4
    w = walls["eager"]
    assert w["n"] == 8 and len(w["rounds_ms"]) == 8 and [p["n"] for p in w["passes"]] == [4, 4] and w["error"] is None
    assert w["warmup"] == 1 and w["iters"] == 2 and w["method"] == "perf_counter"
    host = walls[et.HOST_REFERENCE]
    assert host["n"] == 8 and host["median"] > 0 and host["method"] == "perf_counter"
    rows = et.wall_rows(walls)
    assert rows[0]["pass 1"] == w["passes"][0]["median"] and rows[-1]["executor"] == et.HOST_REFERENCE
    drift = et.drift_rows(walls)
    assert len(drift) == 24 and {d["pass"] for d in drift} == {1, 2}
    assert [d["round"] for d in drift if d["executor"] == "eager"] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_wall_failure_keeps_earlier_blocks_and_other_executors():
    calls = []

    def flaky(**kw):
        calls.append(1)
        if len(calls) > 4:  # the warm-up round and rounds 1-3 pass, round 4 breaks
            raise RuntimeError("round 4 broke")
    prepared = {"eager": E.Prepared(E.REGISTRY["eager"], "ok", fn=flaky),
                "torch.compile": E.Prepared(E.REGISTRY["torch.compile"], "ok", fn=lambda **kw: None)}
    walls = et.interleaved_walls(prepared, {}, SimpleNamespace(device="cpu", warmup=0, iters=1, repeats=2))
    assert len(walls["eager"]["rounds_ms"]) == 3
    assert walls["eager"]["error"] == "round 4: RuntimeError: round 4 broke"
    assert walls["torch.compile"]["n"] == 4 and walls["torch.compile"]["error"] is None
    row = et.measured_row(prepared["eager"], {}, walls["eager"])
    assert row["status"] == "partial" and row["Wall Clock Time (ms)"] is not None and "wall: round 4" in row["reason"]
    never = et.measured_row(prepared["eager"], {}, et._wall_record([], "warm-up round: RuntimeError: x", "perf_counter", SimpleNamespace(warmup=0, iters=1, repeats=3)))
    assert never["status"] == "failed" and never["Wall Clock Time (ms)"] is None and never["pass 2 / pass 1"] is None


@pytest.mark.parametrize("repeats", [2, 4, 6, 40])
def test_abba_passes_agree_under_a_linear_drift(repeats):
    rounds = [1.0 + 0.25 * i for i in range(2 * repeats)]  # the machine slows down steadily
    w = et._wall_record(rounds, None, "perf_counter", SimpleNamespace(warmup=0, iters=1, repeats=repeats))
    assert [p["n"] for p in w["passes"]] == [repeats, repeats]
    assert w["passes"][0]["median"] == pytest.approx(w["passes"][1]["median"])
    assert w["passes"][0]["mean"] == pytest.approx(w["passes"][1]["mean"])


def test_lost_cuda_context_ends_every_executors_blocks(monkeypatch):
    calls = []
    monkeypatch.setattr(et, "cuda_context_error", lambda device: "CUDA error: an illegal memory access" if len(calls) > 3 else None)
    prepared = {n: E.Prepared(E.REGISTRY[n], "ok", fn=lambda **kw: calls.append(1)) for n in ("eager", "torch.compile")}
    walls = et.interleaved_walls(prepared, {}, SimpleNamespace(device="cpu", warmup=0, iters=1, repeats=2))
    for name in prepared:
        assert walls[name]["error"].startswith("not run: the CUDA context was lost earlier (CUDA error: an illegal")
    rows = [et.measured_row(prepared[n], {}, walls[n]) for n in prepared]
    assert {r["status"] for r in rows} <= {"partial", "failed"} and all(r["reason"] for r in rows)


def _event(key, kind="cuda", count=1, us=10.0, annotation=False):
    from torch.autograd import DeviceType
    return SimpleNamespace(key=key, device_type=DeviceType.CUDA if kind == "cuda" else DeviceType.CPU, count=count,
                           self_device_time_total=us, is_user_annotation=annotation)


def test_kernel_summary_counts_kernels_only():
    events = [_event("ampere_bf16_gemm", count=2, us=20.0), _event("triton_poi_fused_add_0", us=3.0),
              _event("Memcpy HtoD (Pageable -> Device)", us=5.0), _event("Memset (Device)", us=1.0),
              _event("Torch-Compiled Region: 0/0", us=30.0, annotation=True),
              _event("CompiledFunction", us=30.0),  # an annotation on a torch without the flag
              _event("aten::mm", kind="cpu", us=0.0)]
    s = timing.kernel_summary(events, steps=1)
    assert s["kernels_per_step"] == 3 and s["kernel_ms_per_step"] == pytest.approx(0.023)
    assert s["copies_per_step"] == 2 and s["copy_ms_per_step"] == pytest.approx(0.006)
    assert s["annotations_per_step"] == 2
    assert [k["name"] for k in s["top_kernels"]] == ["ampere_bf16_gemm", "triton_poi_fused_add_0"]


def test_use_device_selects_cuda_n_and_leaves_cpu_alone(monkeypatch):
    chosen = []
    monkeypatch.setattr(timing.torch.cuda, "set_device", chosen.append)
    timing.use_device("cpu")
    timing.use_device("cuda")  # the current device stays current
    timing.use_device("cuda:1")
    assert chosen == [1]


def test_event_timer_uses_cuda_events_on_the_given_device(monkeypatch):
    """The seed's CUDA-event timer, on fake events: ms per call is elapsed / iters, synchronized on the device."""
    synced = []

    class FakeEvent:
        def __init__(self, enable_timing):
            assert enable_timing

        def record(self):
            self.t = len(calls)

        def elapsed_time(self, end):
            return 2.0 * (end.t - self.t)  # 2 ms per call
    calls = []
    monkeypatch.setattr(timing.torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(timing.torch.cuda, "synchronize", synced.append)
    r = timing.event_timer(lambda **kw: calls.append(1), {}, "cuda:1", warmup=2, iters=5, repeats=2)
    assert r["method"] == "cuda-events" and r["blocks_ms"] == [2.0, 2.0] and len(calls) == 12
    assert set(synced) == {"cuda:1"}
