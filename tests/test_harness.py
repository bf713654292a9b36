"""The measurement harness: prepare, plans, interleaved rounds, within-round ratios, drift, release."""

import pytest

from latency_lab.core import failures, harness, registry, sweep, timing
from latency_lab.core.measurement import step_records
from latency_lab.core.rounds import host_moved_note
from latency_lab.core.rows import Row, plain_row


def _prepared(name, fn, status="ok"):
    return harness.Measurement(registry.REGISTRY[name], status, fn=fn, first_call_s=0.5)


def test_rounds_interleave_entries_with_the_host_reference_and_alternate_order(monkeypatch):
    order = []
    monkeypatch.setattr(timing, "host_reference_ms", lambda: order.append("ref") or 1.0)
    entries = [harness.Entry(n, lambda n=n, **kw: order.append(n), {}) for n in ("a", "b", "c")]
    r = harness.rounds(entries, "cpu", warmup=0, iters=1, repeats=1, progress=lambda text: None)

    # one discarded warm-up round (reverse), then 2 x repeats rounds: forward, reverse; every block
    # between two host references
    def block(*names):
        return [x for n in names for x in ("ref", n, "ref")]

    assert order == block("c", "b", "a") + block("a", "b", "c") + block("c", "b", "a")
    assert r.rounds == 2 and all(len(t.wall_ms) == 2 and len(t.host_ms) == 2 for t in r.entries.values())
    assert r.reference_ms == [1.0, 1.0]
    assert all(
        t.reference_before_ms == t.reference_after_ms == [1.0, 1.0] and t.fast == [True, True]
        for t in r.entries.values()
    )


def test_probes_run_after_their_entry_in_every_round():
    seen = []
    entries = [harness.Entry("a", lambda **kw: None, {}, {"count": lambda: seen.append("probe") or len(seen)})]
    r = harness.rounds(entries, "cpu", warmup=0, iters=2, repeats=2, progress=lambda text: None)
    assert r.entries["a"].probes["count"] == [2, 3, 4, 5]  # the warm-up round's probe is discarded


def test_within_round_ratio_cancels_a_drift_that_moves_both_sides():
    walls = {"a": [1.0, 2.0, 1.5, 3.0], "b": [2.0, 4.0, 3.0, 6.0]}
    timed = harness.Rounds(
        {n: harness.Timed(n, w, w) for n, w in walls.items()}, [1.0, 2.0, 1.5, 3.0], "perf_counter", 0, 1, 4
    )
    ratio = timed.ratio("b", "a")
    assert ratio.median == pytest.approx(2.0) and ratio.iqr == pytest.approx(0.0)  # the host moved 3x, the ratio not
    assert timed.drift_pct() == pytest.approx(100 * 2.0 / 1.75)
    assert "moved by 114%" in host_moved_note(timed, 0.1)
    assert host_moved_note(timed, 2.0) == ""


def test_a_failing_entry_stops_alone_and_becomes_partial(monkeypatch):
    calls = {"n": 0}

    def flaky(**kw):
        calls["n"] += 1
        if calls["n"] > 3:
            raise RuntimeError("boom")

    prepared = {"eager": _prepared("eager", flaky), "torch.compile": _prepared("torch.compile", lambda **kw: None)}
    r = harness.rounds(harness.entries(prepared, {}), "cpu", warmup=0, iters=1, repeats=2, progress=lambda text: None)
    after = harness.settled(prepared, r)
    assert after["eager"].status == "partial" and "RuntimeError: boom" in after["eager"].reason
    assert after["eager"].fn is prepared["eager"].fn and prepared["eager"].status == "ok"  # prepared left as it was
    assert len(r.entries["eager"].wall_ms) == 2 and len(r.entries["torch.compile"].wall_ms) == 4
    assert after["torch.compile"].status == "ok" and after["torch.compile"].timed is r.entries["torch.compile"]
    assert after["eager"].wall.n == 2 and prepared["eager"].timed is None  # the copies hold the blocks


def test_time_in_rounds_times_the_ok_executors_and_settles_them():
    prepared = {
        "eager": _prepared("eager", lambda **kw: None),
        "torch.compile": _prepared("torch.compile", lambda **kw: 1 / 0),
        "thunder": _prepared("thunder", None, status="unavailable"),
    }
    params = type("P", (), {"device": "cpu", "warmup": 0, "iters": 1, "repeats": 1})()
    after, r = harness.time_in_rounds(prepared, {}, params)
    assert set(r.entries) == {"eager", "torch.compile"} and len(r.entries["eager"].wall_ms) == 2
    assert [p.status for p in after.values()] == ["ok", "failed", "unavailable"]
    assert after["torch.compile"].reason.startswith("rounds: warm-up round: ZeroDivisionError")


def test_a_lost_cuda_context_ends_every_entry(monkeypatch):
    calls = []
    monkeypatch.setattr(
        failures, "cuda_context_error", lambda device: "illegal memory access" if len(calls) > 3 else None
    )
    prepared = {n: _prepared(n, lambda **kw: calls.append(1)) for n in ("eager", "torch.compile")}
    r = harness.rounds(harness.entries(prepared, {}), "cpu", warmup=0, iters=1, repeats=2, progress=lambda text: None)
    after = harness.settled(prepared, r)
    assert all(t.error.startswith("not run: the CUDA context was lost earlier") for t in r.entries.values())
    assert {p.status for p in after.values()} <= {"partial", "failed"}


def test_build_and_measure_keeps_a_failing_step_in_its_row():
    def module(**kw):
        return None

    plan = {"first": lambda p: 1, "second": lambda p: 1 / 0, "third": lambda p: 3}
    measured = harness.build_and_measure(
        [registry.REGISTRY["eager"]], module, {}, plan, "cpu", progress=lambda text: None
    )
    p = measured["eager"]
    assert p.status == "failed" and p.reason.startswith("second: ZeroDivisionError")
    assert p.steps == {"first": 1} and p.built and step_records(measured) == {"eager": {"first": 1}}


def test_unavailable_executors_are_rows_with_their_reason():
    p = harness.prepare(registry.REGISTRY["thunder:cudagraphs"], None, {}, "cpu")
    assert p.status == "unavailable" and "CUDA" in p.reason and Row.of(p).reason == p.reason
    assert plain_row(p, first_call_s=None) == {
        "executor": "thunder:cudagraphs",
        "label": registry.REGISTRY["thunder:cudagraphs"].label,
        "status": "unavailable",
        "reason": p.reason,
        "notes": None,
        "first_call_s": None,
    }


def test_release_drops_callables_and_reads_memory_only_on_a_gpu():
    p = _prepared("eager", lambda **kw: None)
    p.output = object()
    assert harness.release([p], "cpu") == {} and p.fn is None and p.output is None


def test_sweep_builds_every_point_and_times_all_in_the_same_rounds():
    calls = []

    def make(point):
        return sweep.Case(lambda **kw: calls.append(point["size"]), {}, lambda p: {"rel_err": 0.0}, floor_ms=0.5)

    s = sweep.Sweep("size", {"size": (1, 2)}, [registry.REGISTRY["eager"]], make)
    params = type("P", (), {"device": "cpu", "warmup": 0, "iters": 1, "repeats": 1})()
    built = sweep.build(s, params, progress=lambda text: None)
    timed = sweep.time_all(built, params)
    rows = [sweep.row(b, timed).as_dict() for b in built]
    assert [r["size"] for r in rows] == [1, 2] and all(r["wall_ms"] is not None and r["status"] == "ok" for r in rows)
    assert set(timed.entries) == {"eager @ size=1", "eager @ size=2"} and rows[0]["floor_ratio_x"] > 0
    assert sweep.release(built, "cpu") == {} and all(b.measured.fn is None for b in built)


def test_a_sweep_row_reads_a_build_whose_blocks_stopped_early_as_partial():
    armed = {"calls": None}  # counts calls once the build is done

    def flaky(**kw):
        if armed["calls"] is not None:
            armed["calls"] += 1
            if armed["calls"] > 3:  # the warm-up round and two rounds pass, the third raises
                raise RuntimeError("boom")

    s = sweep.Sweep(
        "size", {"size": (1,)}, [registry.REGISTRY["eager"]], lambda point: sweep.Case(flaky, {}, lambda p: {})
    )
    params = type("P", (), {"device": "cpu", "warmup": 0, "iters": 1, "repeats": 2})()
    built = sweep.build(s, params, profile_steps=1, progress=lambda text: None)
    armed["calls"] = 0
    timed = sweep.time_all(built, params)
    row = sweep.row(built[0], timed).as_dict()
    assert row["status"] == "partial" and "rounds: round 3: RuntimeError: boom" in row["reason"]
    assert built[0].measured.status == "ok" and built[0].measured.reason is None  # the build is left as it was


def test_merged_rounds_mark_blocks_against_their_common_cutoff_and_leave_the_parts_alone():
    def part(name, refs):
        t = harness.Timed(name, [1.0] * len(refs), [1.0] * len(refs))
        t.reference_before_ms, t.reference_after_ms = list(refs), list(refs)
        r = harness.Rounds({name: t}, list(refs), "perf_counter", 0, 1, len(refs))
        t.mark(r.cutoff_ms)
        return r

    fast, slow = part("a", [1.0] * 8), part("b", [3.0] * 8)  # alone, each set reads all of its blocks fast
    done = harness.Rounds.merged([fast, slow])
    assert done.rounds == 16 and done.entries["a"].fast == [True] * 8 and done.entries["b"].fast == [False] * 8
    assert slow.entries["b"].fast == [True] * 8 and done.entries["b"] is not slow.entries["b"]


def test_a_failure_says_its_cause_in_the_users_words_first_and_no_python_reprs():
    """Issue 46: the two failures a GPU run's index showed in Python's words, and a function's repr."""
    from latency_lab.core.failures import describe

    proxy = TypeError(
        "<class 'list'> indices must be integers or slices, not <class 'thunder.core.proxies.IntegerProxy'>"
    )
    assert describe(proxy) == (
        "Thunder traced a Python int as a symbolic value, and the model indexes a list with it "
        "(TypeError: list indices must be integers or slices, not IntegerProxy)"
    )
    kwargs = TypeError(
        "<function LlamaForCausalLM.forward at 0x7f3a2b1c40>() got unexpected keyword arguments: cache_positions"
    )
    said = describe(kwargs)
    assert said.startswith("this transformers' forward refuses the seed's cache_positions") and " at 0x" not in said
    assert "(TypeError: LlamaForCausalLM.forward() got unexpected keyword arguments: cache_positions)" in said
    assert describe(RuntimeError("boom")) == "RuntimeError: boom"
