"""Timing primitives and the seed-shaped table."""

import time
from types import SimpleNamespace

import pytest

from latency_lab import executor_timing as et, executors as E, reference, timing


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
    assert "Thunder-nvFuser (3.270 ms) ~ torch-eager" in tie and "within this run's noise for thunder ~ eager" in tie
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
    params = SimpleNamespace(device="cpu", warmup=1, iters=2, repeats=3)
    walls = et.interleaved_walls(prepared, {}, params)
    assert list(walls) == ["eager", "torch.compile", et.HOST_REFERENCE]
    blocks = [order[i] for i in range(0, len(order), 3)]  # each block: 1 warm-up + 2 timed calls
    assert blocks == ["torch.compile", "eager"] + ["eager", "torch.compile", "torch.compile", "eager"] * 3
    w = walls["eager"]
    assert w["n"] == 6 and len(w["rounds_ms"]) == 6 and [p["n"] for p in w["passes"]] == [3, 3] and w["error"] is None
    assert w["warmup"] == 1 and w["iters"] == 2 and w["method"] == "perf_counter"
    host = walls[et.HOST_REFERENCE]
    assert host["n"] == 6 and host["median"] > 0 and host["method"] == "perf_counter"
    rows = et.wall_rows(walls)
    assert rows[0]["pass 1"] == w["passes"][0]["median"] and rows[-1]["executor"] == et.HOST_REFERENCE
    drift = et.drift_rows(walls)
    assert len(drift) == 18 and {d["pass"] for d in drift} == {1, 2}
    assert [d["round"] for d in drift if d["executor"] == "eager"] == [1, 2, 3, 4, 5, 6]


def test_wall_failure_keeps_earlier_blocks_and_other_executors():
    calls = []

    def flaky(**kw):
        calls.append(1)
        if len(calls) > 4:  # the warm-up round and rounds 1-3 pass, round 4 breaks
            raise RuntimeError("round 4 broke")
    prepared = {"eager": E.Prepared(E.REGISTRY["eager"], "ok", fn=flaky),
                "torch.compile": E.Prepared(E.REGISTRY["torch.compile"], "ok", fn=lambda **kw: None)}
    walls = et.interleaved_walls(prepared, {}, SimpleNamespace(device="cpu", warmup=0, iters=1, repeats=3))
    assert len(walls["eager"]["rounds_ms"]) == 3
    assert walls["eager"]["error"] == "round 4: RuntimeError: round 4 broke"
    assert walls["torch.compile"]["n"] == 6 and walls["torch.compile"]["error"] is None
    row = et.measured_row(prepared["eager"], {}, walls["eager"])
    assert row["status"] == "ok" and row["Wall Clock Time (ms)"] is not None and "wall: round 4" in row["reason"]
    never = et.measured_row(prepared["eager"], {}, et._wall_record([], "warm-up round: RuntimeError: x", "perf_counter", SimpleNamespace(warmup=0, iters=1, repeats=3)))
    assert never["status"] == "failed" and never["Wall Clock Time (ms)"] is None and never["pass 2 / pass 1"] is None
