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


def test_measured_row_flags_disagreeing_passes_and_host_bound():
    wall = timing.stats([1.0, 1.0, 1.0]) | {"repeats": 3, "iters": 1, "warmup": 0}
    wall2 = timing.stats([1.2, 1.2, 1.2])
    host = timing.stats([0.95, 0.95])
    kernels = {"kernel_ms_per_step": 0.25, "kernels_per_step": 25.0}
    row = et.measured_row(_prepared("eager"), {"wall": wall, "kernels": kernels, "host": host}, wall2)
    assert row["CPU Overhead (ms)"] == pytest.approx(0.75) and row["Overhead / Kernel (us)"] == pytest.approx(30.0)
    assert row["pass 2 / pass 1"] == pytest.approx(1.2) and row["noisy"]
    assert row["host-bound"]
    cpu_row = et.measured_row(_prepared("eager"), {"wall": wall, "kernels": {"reason": "no device kernels on CPU"}, "host": host}, wall2)
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


def test_ranking_text_compares_with_seed_order():
    def row(name, ms):
        return {"Execution Type": E.REGISTRY[name].label, "Wall Clock Time (ms)": ms, "source": "measured here", "executor": name}
    same = et.ranking_text([row("eager", 1.0), row("torch.compile", 0.5)])
    assert same.startswith("Fastest to slowest by median wall time: torch.compile") and "matches" in same
    differ = et.ranking_text([row("eager", 0.4), row("torch.compile", 0.5)])
    assert "differs" in differ
    assert et.ranking_text([]) == "No executor produced a wall time here."


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


def test_second_pass_failure_keeps_first_pass_numbers():
    calls = []

    def flaky(**kw):
        calls.append(1)
        if len(calls) > 3:
            raise RuntimeError("second pass broke")
    p = E.Prepared(E.REGISTRY["eager"], "ok", fn=flaky)
    params = SimpleNamespace(device="cpu", warmup=0, iters=1, repeats=3)
    first = et._wall({}, params)(p)
    second = et.second_pass({"eager": p}, {}, params)
    assert p.ok and second["eager"] == {"error": "RuntimeError: second pass broke"}
    row = et.measured_row(p, {"wall": first}, second["eager"])
    assert row["status"] == "ok" and row["pass 2 / pass 1"] is None and "pass 2: RuntimeError" in row["reason"]
