"""The host's speed states and the statistics that survive them, with fake timings: a state flip
inside a round, a bimodal series, a lever that saves nothing, and a pair of runs that reproduce."""

from __future__ import annotations

import math
import random

import pytest
from test_compare import timing_notebook

from latency_lab.core import harness, host_state
from latency_lab.core.metrics import Stat
from latency_lab.core.rows import StepRow
from latency_lab.run import compare as C
from latency_lab.studies import levers, scaling

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
    plain = Stat.of(timed.timed["eager"].host_ms)
    head = timed.timed["eager"].host
    assert plain.median > 1.4 * 1.3  # a median over all blocks lands in the slow state
    assert head.fast_only and head.median == pytest.approx(1.4, rel=0.02)
    assert head.lo < 1.4 < head.hi and (head.hi - head.lo) / head.median == pytest.approx(2 * host_state.RUN_TO_RUN)
    assert 0.45 < timed.slow_share() < 0.75
    assert "read slow" in harness.state_text(timed) and "of 60 blocks ran fast" in harness.state_text(timed)


def test_a_second_run_with_another_slow_share_lands_inside_the_first_interval():
    costs = {"eager": 1.4, "thunder": 1.55, "torch.compile": 0.53}
    a = two_state_rounds(costs, rounds=60, slow_share=0.4, seed=2)
    b = two_state_rounds(costs, rounds=60, slow_share=0.7, seed=3)
    for n in costs:
        ha, hb = a.timed[n].host, b.timed[n].host
        assert ha.lo <= hb.median <= ha.hi, n
        assert Stat.of(b.timed[n].host_ms).median / Stat.of(a.timed[n].host_ms).median > 1.1  # all blocks: moved
    ra, rb = a.ratio("thunder", "torch.compile"), b.ratio("thunder", "torch.compile")
    assert ra.lo <= rb.median <= ra.hi and ra.fast_only


def test_a_state_flip_inside_a_round_does_not_move_the_headline():
    """Blocks that turned slow while both references read fast (the flip the old once-per-round
    reference could not see) are a minority; the median over fast blocks stays put."""
    flips = {(r, "eager") for r in range(0, 60, 6)}
    timed = two_state_rounds({"eager": 1.4, "thunder": 1.55}, rounds=60, slow_share=0.5, seed=4, flips=flips)
    assert timed.timed["eager"].host.median == pytest.approx(1.4, rel=0.03)
    assert timed.ratio("thunder", "eager").median == pytest.approx(1.55 / 1.4, rel=0.03)


def test_too_few_fast_blocks_fall_back_to_all_and_say_so():
    """A host that flips around nearly every block (fast before it, slow after): fewer than MIN_FAST
    blocks have both references fast, so the headline is over all blocks and says so."""
    timed = two_state_rounds({"eager": 1.4}, rounds=10, slow_share=0.0, seed=5)
    t = timed.timed["eager"]
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
        {levers.BASELINE: 1.6, "thunder:nv-linear": 1.6, "thunder:nv-skip-cache": 1.4},
        rounds=40,
        slow_share=0.5,
        seed=6,
    )
    verdict, p = levers.saving_verdict(timed, "thunder:nv-linear")
    assert verdict == "not separated" and p > 0.05
    verdict, p = levers.saving_verdict(timed, "thunder:nv-skip-cache")
    assert verdict == "saves" and p < 0.05
    s = levers.saved(timed, "thunder:nv-skip-cache")
    assert s.lo < 200 < s.hi and s.lo > 0
    r = levers.saved_per_reference(timed, "thunder:nv-skip-cache")  # 0.2 ms of a 1.0 ms reference
    assert r.lo < 0.2 / FAST_REF < r.hi and r.fast_only
    assert levers.saved_per_reference(timed, "thunder:nv-linear").median == pytest.approx(0, abs=0.02)


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
            "wall_ms": timed.timed[f"{n} @ layers={d}"].wall.median,
            "host_ms": timed.timed[f"{n} @ layers={d}"].host.median,
            "host_per_ref_x": timed.timed[f"{n} @ layers={d}"].host_per_ref.median,
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


def walls_with_interval(run, walls: dict, width: float) -> None:
    """A run folder with 02's results for ``walls`` (executor -> block walls), each wall's interval
    +-``width`` of it."""
    import json

    timing_notebook(run, walls, {})
    path = run / "02_executor_timing.results.json"
    data = json.loads(path.read_text())
    for row in data["rows"]:
        row.update(wall_lo_ms=row["wall_ms"] * (1 - width), wall_hi_ms=row["wall_ms"] * (1 + width))
    path.write_text(json.dumps(data))


def test_compare_says_reproduced_inside_the_interval_and_changed_outside(tmp_path):
    walls_with_interval(tmp_path / "a", {"eager": (1.40, 1.38, 1.43), "torch.compile": (0.53, 0.52, 0.54)}, 0.05)
    # eager reproduces; torch.compile moved
    walls_with_interval(tmp_path / "b", {"eager": (1.42, 1.30, 1.90), "torch.compile": (0.70, 0.69, 0.71)}, 0.05)
    report = C.compare(*(C.load_run(tmp_path / n) for n in "ab"))
    got = {(e["row"], e["metric"]): e for e in report["rows"]}
    assert got[("eager", "wall_ms")]["verdict"] == "reproduced"
    assert got[("torch.compile", "wall_ms")]["verdict"] == "changed"
    assert got[("eager", "wall_ms")]["decided"] == "reproduced: inside an interval"  # what it decided on
    assert got[("torch.compile", "wall_ms")]["decided"] == "changed: outside both intervals"
    assert "1 reproduced" in C.tally(report) and "1 changed" in C.tally(report)


def test_host_per_reference_reproduces_where_a_mostly_slow_run_has_no_fast_state():
    """Run A 97% slow (its references' 10th percentile is a slow one, so its "fast" blocks are slow
    ones: the ms headline lands in the slow state), run B 15% slow: host ms move by ~1.6x, host per
    reference stays inside A's interval."""
    costs = {"eager": 1.4, "thunder": 1.55}
    a = two_state_rounds(costs, rounds=40, slow_share=0.97, seed=5)
    b = two_state_rounds(costs, rounds=40, slow_share=0.15, seed=6)
    for n, cost in costs.items():
        ta, tb = a.timed[n], b.timed[n]
        assert tb.host.median / ta.host.median < 0.75 and not ta.host.lo <= tb.host.median <= ta.host.hi  # ms
        ra, rb = ta.host_per_ref, tb.host_per_ref
        assert ra.lo <= rb.median <= ra.hi and ra.median == pytest.approx(cost / FAST_REF, rel=0.03), n
        assert (ra.hi - ra.lo) / ra.median == pytest.approx(2 * host_state.RUN_TO_RUN)  # the floor: no wider
        cols = StepRow(n, n, "ok", None, None, **StepRow.timed(ta)).as_dict()
        assert cols["host_per_ref_x"] == ra.median and cols["host_per_ref_lo_x"] == ra.lo
    untimed = StepRow("x", "x", "failed", "why", None, **StepRow.timed(None)).as_dict()
    assert [untimed[k] for k in ("wall_ms", "host_ms", "host_per_ref_x")] == [None] * 3 and "wall_q1_ms" not in untimed
    assert harness.Timed("x", [1.0], [1.0]).host_per_ref is None  # no reference timed: no ratio


def test_host_per_reference_leaves_out_a_block_the_state_flipped_in():
    """As in a CPU run of 02: one reference caught a pause (4.85 ms against ~0.86 ms), so that block's
    ratio (25 against ~70) says nothing; the steady blocks alone make the headline and its interval,
    slow and fast ones alike, and the paired difference skips that round too."""
    before = [4.85, 0.86, 1.72, 0.85, 0.86, 1.70, 0.87, 0.85]
    after = [0.87, 0.85, 1.71, 0.86, 0.85, 1.72, 0.86, 0.86]
    host = [60.0 * (b + a) / 2 / 0.86 if i else 72.0 for i, (b, a) in enumerate(zip(before, after))]
    t = harness.Timed("x", list(host), list(host), reference_before_ms=before, reference_after_ms=after)
    assert t.keep("host_per_ref_x") == [False] + [True] * 7
    stat = t.host_per_ref
    assert stat.n == 7 and stat.median == pytest.approx(60 / 0.86) and stat.lo > 60
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
    report = C.compare(*(C.load_run(tmp_path / n) for n in "ab"))
    got = {(e["row"], e["metric"]): e["verdict"] for e in report["rows"]}
    assert got[("eager", "wall_ms")] == "changed" and got[("eager", "host_per_ref_x")] == "reproduced"
    assert "Host time per host reference (the state of the host cancels out of it): 1 of 1 reproduced" in C.tally(
        report
    )


def test_a_key_table_carries_its_rows_intervals_to_compare(tmp_path):
    """A notebook whose results hold only a key table (06's points): the intervals of its metric
    columns travel with it, unseen on the index, and compare judges each number by them."""
    from latency_lab.core import results
    from latency_lab.core.parameters import resolved

    def run(folder, wall):
        rows = [
            {"executor": "thunder", "layers": 2, "wall_ms": wall, "wall_lo_ms": wall * 0.95, "wall_hi_ms": wall * 1.05}
        ]
        table = results.key_table("points", rows, ["executor", "layers", "wall_ms"])
        assert table["columns"] == ["executor", "layers", "wall_ms"] and table["intervals"] == {
            "wall_ms": [[wall * 0.95, wall * 1.05]]
        }
        results.save(folder, "06_scaling", resolved(preset="tiny", output_dir=str(folder)), {}, table)

    run(tmp_path / "a", 1.00)
    run(tmp_path / "b", 1.03)
    run(tmp_path / "c", 1.20)
    same = C.compare(C.load_run(tmp_path / "a"), C.load_run(tmp_path / "b"))
    moved = C.compare(C.load_run(tmp_path / "a"), C.load_run(tmp_path / "c"))
    assert [e["verdict"] for e in same["rows"]] == ["reproduced"] and [e["verdict"] for e in moved["rows"]] == [
        "changed"
    ]
    assert "intervals" not in results.key_table("t", [{"executor": "x", "kernels_per_step": 3}])


def test_every_interval_is_at_least_the_run_to_run_floor_and_a_wider_one_stays():
    """Two runs of the same tree differ by more than one run's bootstrap sees (2-10% on the H100):
    an interval is never narrower than ``RUN_TO_RUN`` of its value either side; a wider one is kept."""
    steady = [1.0 + 0.001 * (i % 3) for i in range(40)]
    lo, hi = host_state.interval(steady)
    assert lo == pytest.approx(1.001 * (1 - host_state.RUN_TO_RUN)) and hi == pytest.approx(1.001 * 1.1)
    assert host_state.floored(2.0, 1.0, 3.0) == (1.0, 3.0)
    assert host_state.floored(-1.0, -1.01, -0.99) == pytest.approx((-1.1, -0.9))  # a negative saving too


def test_a_slope_near_zero_is_floored_by_its_points_moving_not_by_ten_percent_of_itself():
    """CUDA graphs' host per layer is ~9 us on ~130 us points: two H100 runs moved it +17% while each point
    moved under 3%. Its interval's least half-width is what the points moving by ``POINT_TO_POINT`` each
    would move the slope; a steep line keeps ``RUN_TO_RUN`` of its slope where that is wider."""
    flat = [(x, [0.125 + 0.009 * x + 1e-6 * (i % 3) for i in range(16)], None) for x in (1, 2, 4)]
    value, lo, hi = host_state.slope_interval([(1, flat)])
    ys = [0.125 + 0.009 * x + 1e-6 for x in (1, 2, 4)]
    floor = host_state.POINT_TO_POINT * math.sqrt(sum(((x - 7 / 3) * y) ** 2 for x, y in zip((1, 2, 4), ys))) / (14 / 3)
    assert value == pytest.approx(0.009) and hi - value == pytest.approx(floor) and value - lo == pytest.approx(floor)
    assert floor > 3 * host_state.RUN_TO_RUN * value  # ~ +-3.5 us on 9 us: the +17% move lands inside
    steep = [(x, [0.1 + 1.0 * x] * 16, None) for x in (1, 2, 4)]
    value, lo, hi = host_state.slope_interval([(1, steep)])
    assert (hi - lo) / 2 == pytest.approx(host_state.RUN_TO_RUN * value)


def test_compare_floors_an_older_runs_narrow_interval_and_still_flags_a_lever_sized_change(tmp_path):
    """Runs made before the floor carry +-1-3% intervals (the H100 pair of 2026-12-05: 4 of 40 host
    numbers 'changed' by 2-6%); compare floors them, so the same tree reads reproduced, while a change
    the size of a lever (nv-linear: -15% of thunder's host time) still reads changed."""
    walls_with_interval(tmp_path / "a", {"eager": (1.50, 1.49, 1.51), "thunder": (1.53, 1.52, 1.54)}, 0.01)
    # eager +4%: noise; thunder -14%: a lever
    walls_with_interval(tmp_path / "b", {"eager": (1.56, 1.55, 1.57), "thunder": (1.31, 1.30, 1.32)}, 0.01)
    report = C.compare(*(C.load_run(tmp_path / n) for n in "ab"))
    got = {(e["row"], e["metric"]): e for e in report["rows"]}
    assert got[("eager", "wall_ms")]["verdict"] == "reproduced"
    assert got[("eager", "wall_ms")]["a_interval"] == pytest.approx((1.50 * 0.9, 1.50 * 1.1))
    assert got[("thunder", "wall_ms")]["verdict"] == "changed"
