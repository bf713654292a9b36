"""The host's speed states and the statistics that survive them, with fake timings: a state flip
inside a round, a bimodal series, a lever that saves nothing, and a pair of runs that reproduce."""

from __future__ import annotations

import random

import pytest
from test_compare import EFFECTS, timing_notebook

from latency_lab.core import harness, host_state, run_to_run
from latency_lab.core.metrics import Stat
from latency_lab.core.rounds import state_text
from latency_lab.core.rows import StepRow
from latency_lab.run.compare import command as C
from latency_lab.studies.levers import savings as levers_savings
from latency_lab.studies.scaling import study as scaling

FAST_REF, SLOW_REF = 1.0, 1.7  # ms of the reference loop in each state (the H200 host's two states)


def two_state_rounds(costs: dict[str, float], rounds: int, slow_share: float, seed: int, flips=None):
    """Rounds of fake blocks: each block runs in one state (slow with probability ``slow_share``), its
    host and wall time ``cost x (1 or 1.7)`` with 1% noise, its references read that state; ``flips``
    (a set of (round, entry)) puts a block whose state changed inside it: slow block, fast references."""
    rng = random.Random(seed)
    timed = {n: harness.Timed(n) for n in costs}
    for r in range(rounds):
        for n, cost in costs.items():
            slow = rng.random() < slow_share
            flipped = flips is not None and (r, n) in flips
            factor = (SLOW_REF if slow or flipped else FAST_REF) * rng.gauss(1, 0.01)
            ref = FAST_REF if flipped else (SLOW_REF if slow else FAST_REF)
            t = timed[n]
            t.wall_ms.append(cost * factor)
            t.host_ms.append(cost * factor)
            t.reference_before_ms.append(ref * rng.gauss(1, 0.01))
            t.reference_after_ms.append(ref * rng.gauss(1, 0.01))
    out = harness.Rounds(timed, [FAST_REF] * rounds, "cuda-events", 0, 1, rounds)
    cut = out.cutoff_ms
    for t in timed.values():
        t.mark(cut)
    return out


def test_a_bimodal_series_gives_the_fast_state_and_the_slow_share():
    timed = two_state_rounds({"eager": 1.4}, rounds=60, slow_share=0.6, seed=1)
    plain = Stat.of(timed.entries["eager"].host_ms)
    head = timed.entries["eager"].host
    assert plain.median > 1.4 * 1.3  # a median over all blocks lands in the slow state
    assert head.fast_only and head.median == pytest.approx(1.4, rel=0.02)
    fast_blocks = [h for h, f in zip(timed.entries["eager"].host_ms, timed.entries["eager"].fast) if f]
    assert (head.lo, head.hi) == host_state.bootstrap(fast_blocks)  # the median's own interval, no floor
    assert head.lo < 1.4 < head.hi and (head.hi - head.lo) / head.median < 0.05  # 1% noise: narrow
    assert 0.45 < timed.slow_share() < 0.75
    assert "read slow" in state_text(timed) and "of 60 blocks ran fast" in state_text(timed)


def test_a_second_run_with_another_slow_share_lands_inside_the_first_interval():
    costs = {"eager": 1.4, "thunder": 1.55, "torch.compile": 0.53}
    a = two_state_rounds(costs, rounds=60, slow_share=0.4, seed=2)
    b = two_state_rounds(costs, rounds=60, slow_share=0.7, seed=3)
    for n in costs:
        ha, hb = a.entries[n].host, b.entries[n].host
        assert ha.lo <= hb.median <= ha.hi, n
        assert Stat.of(b.entries[n].host_ms).median / Stat.of(a.entries[n].host_ms).median > 1.1  # all blocks: moved
    ra, rb = a.ratio("thunder", "torch.compile"), b.ratio("thunder", "torch.compile")
    assert ra.lo <= rb.median <= ra.hi and ra.fast_only


def test_a_state_flip_inside_a_round_does_not_move_the_headline():
    """Blocks that turned slow while both references read fast (the flip the old once-per-round
    reference could not see) are a minority; the median over fast blocks stays put."""
    flips = {(r, "eager") for r in range(0, 60, 6)}
    timed = two_state_rounds({"eager": 1.4, "thunder": 1.55}, rounds=60, slow_share=0.5, seed=4, flips=flips)
    assert timed.entries["eager"].host.median == pytest.approx(1.4, rel=0.03)
    assert timed.ratio("thunder", "eager").median == pytest.approx(1.55 / 1.4, rel=0.03)


def test_too_few_fast_blocks_fall_back_to_all_and_say_so():
    """A host that flips around nearly every block (fast before it, slow after): fewer than MIN_FAST
    blocks have both references fast, so the headline is over all blocks and says so."""
    timed = two_state_rounds({"eager": 1.4}, rounds=10, slow_share=0.0, seed=5)
    t = timed.entries["eager"]
    t.reference_after_ms[3:] = [SLOW_REF] * 7
    t.mark(timed.cutoff_ms)
    head = t.host
    assert sum(t.fast) == 3 and head.fast_only is False and head.n == 10


def test_the_interval_covers_a_drift_of_the_fast_state_within_the_run():
    xs = [1.0] * 20 + [1.06] * 20  # the fast state itself moved 6% half-way
    lo, hi = host_state.interval(xs)
    assert lo <= 1.0 and hi >= 1.06


def test_a_lever_that_saves_nothing_is_not_separated_and_one_that_saves_is():
    timed = two_state_rounds(
        {levers_savings.BASELINE: 1.6, "thunder:nv-linear": 1.6, "thunder:nv-skip-cache": 1.4},
        rounds=40,
        slow_share=0.5,
        seed=6,
    )
    verdict, p = levers_savings.saving_verdict(timed, "thunder:nv-linear")
    assert verdict == "same" and p > 0.05
    verdict, p = levers_savings.saving_verdict(timed, "thunder:nv-skip-cache")
    assert verdict == "changed: saves" and p < 0.05
    s = levers_savings.host_saved(timed, "thunder:nv-skip-cache")
    assert s.lo < 200 < s.hi and s.lo > 0
    r = levers_savings.saved_per_reference(timed, "thunder:nv-skip-cache")  # 0.2 ms of a 1.0 ms reference
    assert r.lo < 0.2 / FAST_REF < r.hi and r.fast_only
    assert levers_savings.saved_per_reference(timed, "thunder:nv-linear").median == pytest.approx(0, abs=0.02)


def test_sign_test():
    assert host_state.sign_test([1] * 10) == pytest.approx(2 / 2**10)
    assert host_state.sign_test([1, -1] * 5) == 1.0
    assert host_state.sign_test([0, 0]) is None


def test_depth_fit_interval_from_the_blocks_and_a_difference_of_fits():
    costs = {
        f"{n} @ layers={d}": base + per * d
        for n, base, per in (("thunder", 0.3, 1.2), ("tc", 0.1, 0.5))
        for d in (1, 2, 4)
    }
    timed = two_state_rounds(costs, rounds=40, slow_share=0.5, seed=7)
    rows = [
        {
            "executor": n,
            "label": n,
            "layers": d,
            "status": "ok",
            "reason": None,
            "key": f"{n} @ layers={d}",
            "wall_ms": timed.entries[f"{n} @ layers={d}"].wall.median,
            "host_ms": timed.entries[f"{n} @ layers={d}"].host.median,
            "host_per_ref_x": timed.entries[f"{n} @ layers={d}"].host_per_ref.median,
            "kernel_ms": 0.07 * d,
        }
        for n in ("thunder", "tc")
        for d in (1, 2, 4)
    ]
    fits = {f["executor"]: f for f in scaling.depth_fits(rows, timed)}
    per_ref = fits["thunder"][scaling.PER_REF]  # 1.2 ms per layer against a 1.0 ms reference
    assert per_ref["slope_lo"] < 1.2 / FAST_REF < per_ref["slope_hi"]
    host_row = next(
        r for r in scaling.fit_rows(list(fits.values())) if r["executor"] == "thunder" and r["metric"] == "host"
    )
    assert (
        host_row["per_layer_per_ref_x"] == per_ref["slope"]
        and host_row["per_layer_per_ref_lo_x"] == per_ref["slope_lo"]
    )
    line = fits["thunder"]["wall_ms"]
    assert line["slope_lo"] < 1.2 < line["slope_hi"] and line["slope"] == pytest.approx(1.2, rel=0.03)
    assert "slope_lo" not in fits["thunder"]["kernel_ms"]  # kernels have no blocks: their SE stays
    d = scaling.slope_difference(fits["thunder"]["wall_ms"], fits["tc"]["wall_ms"])
    assert d["resolved"] and d["lo"] < 0.7 < d["hi"]


def walls_with_interval(run, walls: dict, width: float, **notebook) -> None:
    """A run folder with 02's results for ``walls`` (executor -> block walls), each wall's interval
    +-``width`` of it; ``notebook``: more of ``timing_notebook``'s arguments (``torch``, ``cache_mode``)."""
    import json

    timing_notebook(run, walls, {}, **notebook)
    path = run / "02_executor_timing.results.json"
    data = json.loads(path.read_text())
    for row in data["rows"]:
        row.update(wall_lo_ms=row["wall_ms"] * (1 - width), wall_hi_ms=row["wall_ms"] * (1 + width))
    path.write_text(json.dumps(data))


def test_compare_says_same_inside_the_run_to_run_spread_and_changed_beyond_it(tmp_path):
    walls_with_interval(tmp_path / "a", {"eager": (1.40, 1.38, 1.43), "torch.compile": (0.53, 0.52, 0.54)}, 0.05)
    # eager moved +1.4% (same); torch.compile +32% (changed)
    walls_with_interval(tmp_path / "b", {"eager": (1.42, 1.30, 1.90), "torch.compile": (0.70, 0.69, 0.71)}, 0.05)
    report = C.compare(*(C.load_run(tmp_path / n) for n in "ab"), effects=EFFECTS)
    got = {(e["row"], e["metric"]): e for e in report["rows"]}
    eager, compiled = got[("eager", "wall_ms")], got[("torch.compile", "wall_ms")]
    assert eager["verdict"] == "same" and eager["p"] > 0.05 and eager["kind"] == run_to_run.TIME
    assert compiled["verdict"] == "changed" and compiled["p"] < 0.05 and compiled["min_effect"] == 0.05
    assert eager["decided"].startswith("same: B higher by 1.43%, p ")  # what it decided on
    assert compiled["decided"].startswith("changed: B higher by 32.1% (p ")
    assert "beyond the 5% minimum effect" in compiled["decided"]
    assert "1 changed (1 higher in B, 0 lower), 1 same" in C.tally(report)


def test_host_per_reference_reproduces_where_a_mostly_slow_run_has_no_fast_state():
    """Run A 97% slow (its references' 10th percentile is a slow one, so its "fast" blocks are slow
    ones: the ms headline lands in the slow state), run B 15% slow: host ms move by ~1.6x, host per
    reference (over the same fast blocks) stays within 3%."""
    costs = {"eager": 1.4, "thunder": 1.55}
    a = two_state_rounds(costs, rounds=40, slow_share=0.97, seed=5)
    b = two_state_rounds(costs, rounds=40, slow_share=0.15, seed=6)
    for n, cost in costs.items():
        ta, tb = a.entries[n], b.entries[n]
        assert tb.host.median / ta.host.median < 0.75 and not ta.host.lo <= tb.host.median <= ta.host.hi  # ms
        ra, rb = ta.host_per_ref, tb.host_per_ref
        assert ra.fast_only and rb.fast_only and ra.n == sum(ta.fast) and rb.n == sum(tb.fast), n  # the fast blocks
        assert rb.median == pytest.approx(ra.median, rel=0.03) and ra.median == pytest.approx(cost / FAST_REF, rel=0.03)
        assert ra.lo <= ra.median <= ra.hi and (ra.hi - ra.lo) / ra.median < 0.05  # its own interval: no floor
        cols = StepRow(n, n, "ok", None, None, **StepRow.timed(ta)).as_dict()
        assert cols["host_per_ref_x"] == ra.median and cols["host_per_ref_lo_x"] == ra.lo
    untimed = StepRow("x", "x", "failed", "why", None, **StepRow.timed(None)).as_dict()
    assert [untimed[k] for k in ("wall_ms", "host_ms", "host_per_ref_x")] == [None] * 3 and "wall_q1_ms" not in untimed
    assert harness.Timed("x", [1.0], [1.0]).host_per_ref is None  # no reference timed: no ratio


def test_host_per_reference_takes_the_fast_blocks_as_the_ms_headline_does():
    """As in a CPU run of 02: one reference caught a pause (4.85 ms against ~0.86 ms), so that block's
    ratio (25 against ~70) says nothing, and two blocks ran slow: host per reference is the median over
    the fast blocks (the same flags as wall and host ms: ``Timed.keep``), its interval over those."""
    before = [4.85, 0.86, 1.72, 0.85, 0.86, 1.70, 0.87, 0.85, 0.86, 0.85]
    after = [0.87, 0.85, 1.71, 0.86, 0.85, 1.72, 0.86, 0.86, 0.85, 0.86]
    host = [
        60.0 * (b + a) / 2 / 0.86 * (1.3 if b > 1.5 else 1) if i else 72.0
        for i, (b, a) in enumerate(zip(before, after))
    ]
    t = harness.Timed("x", list(host), list(host), reference_before_ms=before, reference_after_ms=after)
    assert t.keep() is None  # not marked yet: no flags
    t.mark(host_state.cutoff(before + after))
    fast = [False, True, False, True, True, False, True, True, True, True]
    assert t.keep() == fast
    stat = t.host_per_ref
    assert stat.n == 7 and stat.fast_only and stat.median == pytest.approx(60 / 0.86) and stat.lo > 60
    assert t.host.n == 7 and t.wall.n == 7  # the same blocks make every headline
    assert host_state.steady(1.0, 1.25) and not host_state.steady(1.0, 1.26) and not host_state.steady(None, 1.0)


def test_compare_tells_a_host_state_change_from_a_code_change(tmp_path):
    def notebook(run, host, per_ref):
        timing_notebook(run, {"eager": (host, host * 0.99, host * 1.01)}, {})
        import json

        path = run / "02_executor_timing.results.json"
        data = json.loads(path.read_text())
        for row in data["rows"]:
            row.update(wall_lo_ms=host * 0.95, wall_hi_ms=host * 1.05)
            row.update(host_per_ref_x=per_ref, host_per_ref_lo_x=per_ref * 0.95, host_per_ref_hi_x=per_ref * 1.05)
        path.write_text(json.dumps(data))

    notebook(tmp_path / "a", 2.5, 1.45)
    notebook(tmp_path / "b", 1.5, 1.47)  # the host was slow in A: ms moved, per reference did not
    report = C.compare(*(C.load_run(tmp_path / n) for n in "ab"), effects=EFFECTS)
    got = {(e["row"], e["metric"]): e for e in report["rows"]}
    assert got[("eager", "wall_ms")]["verdict"] == "changed" and got[("eager", "host_per_ref_x")]["verdict"] == "same"
    assert got[("eager", "host_per_ref_x")]["kind"] == run_to_run.PER_REF and got[("eager", "wall_ms")]["b"] < 2.5
    assert got[("eager", "host_ms")]["verdict"] == "not judged"  # no interval in both runs
    assert "3 numbers: 1 changed (0 higher in B, 1 lower), 1 same, 0 not comparable, 1 not judged." in C.tally(report)


def test_a_key_table_carries_its_rows_intervals_to_compare(tmp_path):
    """A notebook whose rows compare reads from its key table (05's steps): the intervals of its metric
    columns travel with it, unseen on the index, and compare judges each number by them."""
    from latency_lab.core import results
    from latency_lab.core.parameters import resolved

    def run(folder, wall):
        rows = [
            {
                "executor": "thunder",
                "status": "ok",
                "wall_ms": wall,
                "wall_lo_ms": 0.95 * wall,
                "wall_hi_ms": 1.05 * wall,
            }
        ]
        table = results.key_table("step", rows, ["executor", "status", "wall_ms"])
        assert table["columns"] == ["executor", "status", "wall_ms"] and table["intervals"] == {
            "wall_ms": [[wall * 0.95, wall * 1.05]]
        }
        results.save(folder, "05_host_overhead", resolved(preset="tiny", output_dir=str(folder)), {}, table)

    run(tmp_path / "a", 1.00)
    run(tmp_path / "b", 1.03)
    run(tmp_path / "c", 1.20)
    same = C.compare(C.load_run(tmp_path / "a"), C.load_run(tmp_path / "b"), effects=EFFECTS)
    moved = C.compare(C.load_run(tmp_path / "a"), C.load_run(tmp_path / "c"), effects=EFFECTS)
    assert [e["verdict"] for e in same["rows"]] == ["same"] and [e["verdict"] for e in moved["rows"]] == ["changed"]
    assert same["rows"][0]["a_interval"] == pytest.approx((0.95, 1.05))  # the key table's interval, as stored
    assert "intervals" not in results.key_table("t", [{"executor": "x", "kernels_per_step": 3}])


def test_an_interval_is_the_medians_own_with_no_floor():
    """The interval is the bootstrap's 95% interval of the median, nothing added: steady samples give
    an interval as narrow as they are (what two runs differ by is ``run_to_run``'s, not the interval's)."""
    steady = [1.0 + 0.001 * (i % 3) for i in range(40)]
    lo, hi = host_state.interval(steady)
    assert (lo, hi) == host_state.bootstrap(steady) and 1.0 <= lo <= 1.001 <= hi <= 1.002
    lo, hi = host_state.interval([-1.01, -1.0, -0.99] * 10)  # a negative saving too: ordered, not widened
    assert -1.01 <= lo <= -1.0 <= hi <= -0.99
    with pytest.raises(ValueError):
        host_state.interval([])
    assert not hasattr(host_state, "floored") and not hasattr(host_state, "RUN_TO_RUN")


def test_a_slopes_interval_is_the_bootstrap_of_the_fit_only():
    """A line whose blocks do not scatter has a slope interval of nothing but the slope (no floor from
    the points moving, nor of 10% of itself); a noisy line's interval covers the true slope."""
    flat = [(x, [0.125 + 0.009 * x] * 16, None) for x in (1, 2, 4)]
    value, lo, hi = host_state.slope_interval([(1, flat)])
    assert value == pytest.approx(0.009) and lo == pytest.approx(value) and hi == pytest.approx(value)
    rng = random.Random(3)
    noisy = [(x, [0.1 + 1.0 * x + rng.gauss(0, 0.02) for _ in range(16)], None) for x in (1, 2, 4)]
    value, lo, hi = host_state.slope_interval([(1, noisy)])
    assert lo < 1.0 < hi and lo < value < hi and hi - lo < 0.05


def test_compare_does_not_widen_a_narrow_interval_and_still_flags_a_lever_sized_change(tmp_path):
    """Runs with +-1% intervals (the H100 pair of 2026-12-05: 4 of 40 host numbers 'changed' by 2-6% when
    the intervals alone decided): the intervals stay as stored, the measured run-to-run spread (sigma,
    minimum effect) keeps same-tree noise same, while a lever-sized change (nv-linear: -15% of thunder's
    host time) still reads changed."""
    walls_with_interval(tmp_path / "a", {"eager": (1.50, 1.49, 1.51), "thunder": (1.53, 1.52, 1.54)}, 0.01)
    # eager +4%: noise; thunder -14%: a lever
    walls_with_interval(tmp_path / "b", {"eager": (1.56, 1.55, 1.57), "thunder": (1.31, 1.30, 1.32)}, 0.01)
    effects = {run_to_run.TIME: {"sigma": 0.03, "min_effect": 0.06}}
    report = C.compare(*(C.load_run(tmp_path / n) for n in "ab"), effects=effects)
    got = {(e["row"], e["metric"]): e for e in report["rows"]}
    assert got[("eager", "wall_ms")]["verdict"] == "same"
    assert got[("eager", "wall_ms")]["a_interval"] == pytest.approx((1.50 * 0.99, 1.50 * 1.01))  # not floored
    assert got[("thunder", "wall_ms")]["verdict"] == "changed"
    without = C.compare(*(C.load_run(tmp_path / n) for n in "ab"), effects={})  # nothing measured: not judged
    assert {e["verdict"] for e in without["rows"]} == {"not judged"}
