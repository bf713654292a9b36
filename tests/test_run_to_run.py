"""What two runs of the same tree differ by (``run_to_run``) and compare's one rule: ``judge`` on
synthetic moves, ``estimate`` on synthetic same-tree pairs, the cases compare calls not comparable and
B judged against A only; the harness's host per reference over the round's one reference and its
slow-state bias; a planted slowdown (``planted``), and the runner refusing a malformed one."""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import pytest
from conftest import run_runner
from test_compare import EFFECTS, op_notebook
from test_host_state import walls_with_interval

from latency_lab.core import environment, harness, host_state, planted, registry, run_to_run
from latency_lab.core.rounds import state_text
from latency_lab.run.compare import command as C
from latency_lab.run.compare.pair import flatten

R = run_to_run
EFFECT = {"sigma": 0.03, "min_effect": 0.06}


def around(value: float, rel: float) -> tuple[float, float]:
    """A 95% interval of ``rel`` of ``value`` either side."""
    return value * (1 - rel), value * (1 + rel)


# --- judge ---------------------------------------------------------------------------------------------


def test_an_a_a_move_inside_the_run_to_run_spread_is_same():
    """+2% with +-1% intervals: beyond both intervals, but well inside the 3% that two runs of the same
    tree differ by (the old rule, B outside both intervals, called this changed)."""
    j = R.judge(R.TIME, 1.0, 1.02, around(1.0, 0.01), around(1.02, 0.01), EFFECT)
    assert j.verdict == "same" and j.p > R.P and j.min_effect == 0.06
    assert j.decided.startswith("same: B higher by 2%, p ")


def test_a_planted_move_beyond_the_test_and_the_minimum_effect_is_changed():
    j = R.judge(R.TIME, 1.0, 1.15, around(1.0, 0.01), around(1.15, 0.01), EFFECT)
    assert j.verdict == "changed" and j.p < R.P and j.min_effect == 0.06
    assert j.decided.startswith("changed: B higher by 15% (p ") and "beyond the 6% minimum effect" in j.decided
    lower = R.judge(R.TIME, 1.0, 0.85, around(1.0, 0.01), around(0.85, 0.01), EFFECT)
    assert lower.verdict == "changed" and lower.decided.startswith("changed: B lower by 15%")


def test_a_move_beyond_the_test_but_under_the_minimum_effect_is_same():
    """Tight intervals and no run-to-run sigma make +5% significant (p far below 0.05); a 10% minimum
    effect still keeps it same."""
    effect = {"sigma": 0.0, "min_effect": 0.10}
    j = R.judge(R.TIME, 1.0, 1.05, around(1.0, 0.005), around(1.05, 0.005), effect)
    assert j.p < 1e-6 and j.verdict == "same" and "within the 10% minimum effect" in j.decided
    assert R.judge(R.TIME, 1.0, 1.12, around(1.0, 0.005), around(1.12, 0.005), effect).verdict == "changed"


def test_a_count_is_exact_and_no_effect_is_not_judged():
    assert R.kind("kernels_per_step") == R.COUNT and R.kind("copies_per_step") == R.COUNT
    assert R.judge(R.COUNT, 12, 13, None, None, None).verdict == "changed"  # a difference of one kernel
    assert R.judge(R.COUNT, 12, 12, None, None, None).verdict == "same"
    no_effect = R.judge(R.TIME, 1.0, 2.0, around(1.0, 0.01), around(2.0, 0.01), None)
    assert no_effect.verdict == "not judged" and "no same-tree pairs measured" in no_effect.decided
    assert R.judge(None, 1.0, 2.0, around(1.0, 0.01), around(2.0, 0.01), EFFECT).verdict == "not judged"
    assert R.judge(R.TIME, 1.0, 2.0, None, around(2.0, 0.01), EFFECT).verdict == "not judged"  # one interval
    assert R.judge(R.KERNEL, 1.0, 2.0, None, None, EFFECT).verdict == "changed"  # kernel time: no interval needed


def test_kinds_of_numbers():
    assert [R.kind(m) for m in ("wall_ms", "host_ms", "host_per_ref_x", "kernel_ms", "vs_eager_x")] == [
        R.TIME,
        R.TIME,
        R.PER_REF,
        R.KERNEL,
        R.WITHIN,
    ]
    assert (
        R.kind("per_layer_ms") == R.FIT and R.kind("first_call_s") == R.FIRST_CALL and R.kind("cpu_overhead_ms") is None
    )


# --- estimate --------------------------------------------------------------------------------------------


def pair_rows(n: int, sigma: float, se: float, seed: int, kind: str = R.TIME, intervals: bool = True) -> list[dict]:
    """Compare rows of ``n`` same-tree numbers: each moves by the run-to-run spread ``sigma`` plus what
    both runs' intervals (standard error ``se`` of A's value each) explain."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a = rng.uniform(0.5, 2.0)
        move = rng.gauss(0, sigma) + rng.gauss(0, se) - rng.gauss(0, se)
        b = a * (1 + move)
        half = R.Z95 * se * a
        rows.append(
            {
                "kind": kind,
                "a": a,
                "b": b,
                "ratio": b / a,
                "a_interval": (a - half, a + half) if intervals else None,
                "b_interval": (b - half, b + half) if intervals else None,
            }
        )
    return rows


def test_estimate_recovers_the_injected_run_to_run_spread_and_its_95th_percentile():
    sigma, se = 0.03, 0.005
    rows = pair_rows(4000, sigma, se, seed=11)
    found = R.estimate(rows)[R.TIME]
    assert found["numbers"] == 4000
    assert found["sigma"] == pytest.approx(sigma, rel=0.05)  # the intervals' share taken out
    moves = [abs(r["ratio"] - 1) for r in rows]
    assert found["min_effect"] == pytest.approx(host_state.quantile(moves, 0.95))
    assert found["min_effect"] == pytest.approx(1.959964 * math.sqrt(sigma**2 + 2 * se**2), rel=0.08)


def test_estimate_takes_out_what_the_intervals_explain_and_keeps_kinds_apart():
    explained = R.estimate(pair_rows(4000, 0.0, 0.01, seed=12))[R.TIME]
    assert explained["sigma"] < 0.003  # no spread beyond the intervals: (about) none
    rows = [
        *pair_rows(2000, 0.02, 0.0, seed=13, kind=R.KERNEL, intervals=False),  # kernel time: no interval needed
        *pair_rows(50, 0.05, 0.01, seed=14, intervals=False),  # host time without intervals: left out
        {"kind": R.COUNT, "a": 12, "b": 12, "ratio": 1.0, "a_interval": None, "b_interval": None},
        *pair_rows(1, 0.05, 0.01, seed=15, kind=R.WITHIN),  # one number: too few
    ]
    found = R.estimate(rows)
    assert set(found) == {R.KERNEL}
    assert found[R.KERNEL]["sigma"] == pytest.approx(0.02, rel=0.05) and found[R.KERNEL]["numbers"] == 2000


def test_effects_are_read_per_device_and_written_beside_their_source(tmp_path, monkeypatch):
    monkeypatch.setattr(R, "PATH", tmp_path / "run_to_run.json")
    assert R.effects("cuda:0") == {} and R.source("cuda") == {}  # nothing measured yet
    R.write("cuda:1", {R.TIME: {"sigma": 0.03, "min_effect": 0.06, "numbers": 40}, "pairs": 5, "source": "here"})
    assert R.effects("cuda") == {R.TIME: {"sigma": 0.03, "min_effect": 0.06, "numbers": 40}}
    assert R.source("cuda:0") == {"pairs": 5, "source": "here"} and R.effects("cpu") == {}


# --- compare: not comparable, and B against A only ---------------------------------------------------


def edit_rows(run, **rows: dict) -> None:
    """Update 02's rows of ``run`` by executor (``eager={"wall_ms": 1.4, ...}``)."""
    path = run / "02_executor_timing.results.json"
    data = json.loads(path.read_text())
    for row in data["rows"]:
        row.update(rows.get(row["executor"], {}))
    path.write_text(json.dumps(data))


WALLS_A = {"eager": (1.0, 0.99, 1.01), "torch.compile": (0.5, 0.49, 0.51)}
WALLS_B = {"eager": (1.3, 1.29, 1.31), "torch.compile": (0.5, 0.49, 0.51)}  # eager +30%


def verdicts(report: dict, notebook: str = "02_executor_timing") -> dict:
    return {(e["row"], e["metric"]): e for e in report["rows"] if e["notebook"] == notebook}


def test_another_stack_is_not_comparable(tmp_path):
    walls_with_interval(tmp_path / "a", WALLS_A, 0.01)
    walls_with_interval(tmp_path / "b", WALLS_B, 0.01, torch="2.11.0")
    walls_with_interval(tmp_path / "same", WALLS_B, 0.01)  # the control: A's stack
    a = C.load_run(tmp_path / "a")
    other = C.compare(a, C.load_run(tmp_path / "b"), effects=EFFECTS)
    assert other["stack"] == ["packages.torch 2.9.1 -> 2.11.0"]
    assert {e["verdict"] for e in other["rows"]} == {"not comparable"}
    assert verdicts(other)[("eager", "wall_ms")]["decided"] == ("not comparable: another stack")
    assert C.text(other).count("packages.torch 2.9.1 -> 2.11.0") == 2  # why: the header and the tally, no row
    same = verdicts(C.compare(a, C.load_run(tmp_path / "same"), effects=EFFECTS))
    assert (
        same[("eager", "wall_ms")]["verdict"] == "changed" and same[("torch.compile", "wall_ms")]["verdict"] == "same"
    )


def test_a_notebook_whose_parameters_differ_is_not_comparable_and_the_others_are(tmp_path):
    walls_with_interval(tmp_path / "a", WALLS_A, 0.01)
    walls_with_interval(tmp_path / "b", WALLS_B, 0.01, cache_mode="none")
    for run in ("a", "b"):
        op_notebook(tmp_path / run, 0.02, (0.019, 0.021))  # the same parameters in both
    report = C.compare(C.load_run(tmp_path / "a"), C.load_run(tmp_path / "b"), effects=EFFECTS)
    timing = verdicts(report)
    assert {e["verdict"] for e in timing.values()} == {"not comparable"}
    assert timing[("eager", "wall_ms")]["decided"] == "not comparable: parameters differ"
    ops = verdicts(report, "04_op_microbenchmarks")
    assert ops and "not comparable" not in {e["verdict"] for e in ops.values()}


def test_a_row_whose_headline_is_over_fast_blocks_in_one_run_and_all_blocks_in_the_other_is_not_comparable(
    tmp_path,
):
    walls_with_interval(tmp_path / "a", WALLS_A, 0.01)
    walls_with_interval(tmp_path / "b", WALLS_B, 0.01)
    edit_rows(tmp_path / "a", eager={"wall_fast_only": True}, **{"torch.compile": {"wall_fast_only": True}})
    edit_rows(tmp_path / "b", eager={"wall_fast_only": False}, **{"torch.compile": {"wall_fast_only": True}})
    got = verdicts(C.compare(C.load_run(tmp_path / "a"), C.load_run(tmp_path / "b"), effects=EFFECTS))
    eager = got[("eager", "wall_ms")]
    assert eager["verdict"] == "not comparable" and eager["decided"] == (
        "not comparable: fast blocks in A, all blocks in B"
    )
    assert got[("torch.compile", "wall_ms")]["verdict"] == "same"  # fast blocks in both: judged
    assert got[("eager", "host_ms")]["verdict"] != "not comparable"  # another number of the row
    assert ("eager", "wall_fast_only") not in got  # a flag, not a number
    edit_rows(tmp_path / "b", eager={"wall_fast_only": True})
    again = verdicts(C.compare(C.load_run(tmp_path / "a"), C.load_run(tmp_path / "b"), effects=EFFECTS))
    assert again[("eager", "wall_ms")]["verdict"] == "changed"  # the control: the same blocks, the +30% shows


def test_b_is_judged_against_a_and_a_inside_bs_wide_interval_does_not_rescue_it(tmp_path):
    """B +40% lies outside A's +-1% interval; A lies inside B's wide (asymmetric, as a bootstrap's can
    be) interval. The old rule ("reproduced" when either lies inside the other's interval) let that
    rescue B; the test of B's move against A says changed."""
    walls_with_interval(tmp_path / "a", WALLS_A, 0.01)
    walls_with_interval(tmp_path / "b", WALLS_A, 0.01)
    edit_rows(tmp_path / "b", eager={"wall_ms": 1.4, "wall_lo_ms": 0.95, "wall_hi_ms": 1.45})
    got = verdicts(C.compare(C.load_run(tmp_path / "a"), C.load_run(tmp_path / "b"), effects=EFFECTS))
    eager = got[("eager", "wall_ms")]
    lo_a, hi_a = eager["a_interval"]
    lo_b, hi_b = eager["b_interval"]
    assert not lo_a <= eager["b"] <= hi_a and lo_b <= eager["a"] <= hi_b  # the case the old rule rescued
    assert eager["verdict"] == "changed" and eager["p"] < R.P and eager["ratio"] == pytest.approx(1.4)


# --- harness: host per reference over the round's reference, and its slow-state bias --------------------


def rounds_by_hand() -> harness.Rounds:
    """Eight rounds of two entries; each round's reference ``reference_ms[i]``, and the two blocks' own
    references 5% below (``a``) and 5% above (``b``) it: what the blocks' host time is divided by shows."""
    refs = [1.0, 1.1, 0.95, 1.05, 1.0, 1.02, 0.98, 1.0]
    timed = {}
    for name, cost, own in (("a", 2.0, 0.95), ("b", 1.5, 1.05)):
        timed[name] = harness.Timed(
            name,
            [cost * r for r in refs],
            [cost * r for r in refs],
            reference_before_ms=[own * r for r in refs],
            reference_after_ms=[own * r for r in refs],
        )
    done = harness.Rounds(timed, refs, "perf-counter", 0, 1, len(refs))
    for t in timed.values():
        t.mark(done.cutoff_ms)
    return done


def test_host_per_reference_of_a_round_divides_both_blocks_by_the_rounds_one_reference():
    done = rounds_by_hand()
    assert all(done.entries["a"].fast) and all(done.entries["b"].fast)  # the fast rounds are the ones paired
    assert done.per_round("a", "host_per_ref_x") == pytest.approx([2.0] * 8)  # host ms / reference_ms[i]
    assert done.per_round("b", "host_per_ref_x") == pytest.approx([1.5] * 8)
    assert done.entries["a"].host_per_ref_x == pytest.approx([2.0 / 0.95] * 8)  # each block's own: not paired
    difference = done.paired("a", "b", "host_per_ref_x", lambda x, y: x - y)
    assert difference.median == pytest.approx(0.5) and difference.fast_only
    assert difference.median != pytest.approx(2.0 / 0.95 - 1.5 / 1.05)  # what the blocks' own would give
    ratio = done.paired("a", "b", "host_per_ref_x", lambda x, y: x / y)
    assert ratio.median == pytest.approx(2.0 / 1.5) and ratio.lo == pytest.approx(ratio.hi)
    assert done.per_round("a", "host_ms") == done.entries["a"].host_ms  # other metrics: the blocks' own


def bias_blocks(fast: int, slow: int, flipped: int, bias: float, seed: int = 0) -> harness.Timed:
    """Blocks of one entry: ``fast`` ones (references ~1.0 ms, 2.0 references of host time), ``slow``
    steady ones (references ~1.7 ms, ``2.0 x bias`` references), and ``flipped`` ones whose state changed
    inside (1.0 before, 1.7 after; 10 ms of host time: nothing per reference)."""
    rng = random.Random(seed)
    t = harness.Timed("x")
    for n, ref_before, ref_after, per_ref in (
        (fast, 1.0, 1.0, 2.0),
        (slow, 1.7, 1.7, 2.0 * bias),
        (flipped, 1.0, 1.7, None),
    ):
        for _ in range(n):
            before, after = ref_before * rng.gauss(1, 0.01), ref_after * rng.gauss(1, 0.01)
            host = 10.0 if per_ref is None else per_ref * (before + after) / 2 * rng.gauss(1, 0.01)
            t.wall_ms.append(host)
            t.host_ms.append(host)
            t.reference_before_ms.append(before)
            t.reference_after_ms.append(after)
    t.mark(host_state.cutoff(t.reference_before_ms + t.reference_after_ms))
    return t


def test_slow_state_bias_is_the_slow_steady_blocks_over_the_fast_ones():
    t = bias_blocks(fast=10, slow=10, flipped=12, bias=0.8)  # more flipped blocks than slow ones
    assert sum(t.fast) == 10
    assert t.slow_state_bias() == pytest.approx(0.8, rel=0.02)  # the flipped blocks are left out
    direct = host_state.slow_state_bias(t.host_per_ref_x, t.reference_before_ms, t.reference_after_ms, t.fast)
    assert direct == t.slow_state_bias()
    assert t.host_per_ref.median == pytest.approx(2.0, rel=0.02)  # the headline: the fast blocks
    assert bias_blocks(fast=10, slow=host_state.MIN_FAST - 1, flipped=12, bias=0.8).slow_state_bias() is None
    assert bias_blocks(fast=host_state.MIN_FAST - 1, slow=10, flipped=0, bias=0.8).slow_state_bias() is None
    assert harness.Timed("x", [1.0], [1.0]).slow_state_bias() is None  # no reference timed


def test_the_rounds_bias_is_the_median_over_entries_and_is_recorded_and_printed():
    entries = {n: bias_blocks(10, 10, 0, b, seed=i) for i, (n, b) in enumerate((("a", 0.7), ("b", 0.8), ("c", 0.9)))}
    for n, t in entries.items():
        t.name = n
    done = harness.Rounds(entries, [1.0] * 20, "perf-counter", 0, 1, 20)
    bias = done.slow_state_bias()
    assert bias == entries["b"].slow_state_bias() and bias == pytest.approx(0.8, rel=0.02)
    assert done.record("a")["host_per_ref_slow_bias"] == entries["a"].slow_state_bias()
    assert done.reference_record()["host_per_ref_slow_bias"] == bias
    assert f"Host per reference read ×{bias:.3g} in the slow state against the fast one" in state_text(done)


# --- planted: a slowdown of known size -------------------------------------------------------------------


def test_parse_reads_name_equals_microseconds():
    assert planted.parse("") == {} and planted.parse(" , ") == {}
    assert planted.parse("thunder=12.5") == {"thunder": 12.5}
    assert planted.parse("thunder=12.5, eager=3") == {"thunder": 12.5, "eager": 3.0}


@pytest.mark.parametrize(
    "text", ["thunder", "thunder=", "thunder=fast", "nosuch=3", "thunder=0", "thunder=-1", "thunder=2e6", "thunder=nan"]
)
def test_parse_refuses_a_malformed_value_naming_the_variable(text):
    with pytest.raises(ValueError) as e:
        planted.parse(text)
    assert "LATENCY_LAB_PLANTED" in str(e.value) and repr(text) in str(e.value)


def timed_call(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def test_wrap_adds_at_least_the_delay_to_the_named_executors_call(monkeypatch):
    def fn(**kwargs):
        return kwargs.get("x", 7)

    monkeypatch.setenv(planted.VARIABLE, "eager=20000")  # 20 ms
    slow = planted.wrap("eager", fn)
    assert slow is not fn and slow(x=3) == 3  # the same call, its result kept
    assert timed_call(slow) >= 0.020
    assert planted.wrap("thunder", fn) is fn  # another executor: as it is
    monkeypatch.delenv(planted.VARIABLE)
    assert planted.wrap("eager", fn) is fn and planted.here() == {}


def test_prepare_builds_the_planted_step_and_the_environment_records_it(monkeypatch):
    ex = registry.Executor("eager", "eager", "test", factory=lambda module, notes: module)
    monkeypatch.setenv(planted.VARIABLE, "eager=20000")
    p = harness.prepare(ex, lambda **kw: 7, {}, "cpu")
    assert p.ok and p.first_call_s >= 0.020 and timed_call(p.fn) >= 0.020
    assert environment.collect("cpu")["planted_us"] == {"eager": 20000.0}
    monkeypatch.delenv(planted.VARIABLE)
    assert "planted_us" not in environment.collect("cpu")


@pytest.mark.parametrize("value", ["thunder=fast", "nosuch=3"])
def test_runner_refuses_a_malformed_planted_value_before_making_anything(tmp_path, value):
    proc = run_runner("--output-dir", str(tmp_path), env={planted.VARIABLE: value}, timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "LATENCY_LAB_PLANTED" in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []  # no run folder, no latest link


# --- the kept pairs ------------------------------------------------------------------------------------


def test_the_kept_pairs_give_the_kept_effects_and_pass_their_held_out_tests(tmp_path, monkeypatch, capsys):
    """``run_to_run.json``'s effects per device are what ``tools/run_pairs.py estimate`` makes of the pairs
    kept in ``benchmarks/pairs`` (so every figure README and FINDINGS cite comes from files in the tree),
    and ``check`` passes on each folder with them: on the H100 the held-out pairs read same in at least
    90% per kind, the planted 10% reads changed and the pair whose host moved 16% is not judged."""
    import sys

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "tools"))
    import run_pairs

    kept = json.loads(R.PATH.read_text())
    assert set(kept) == {"cuda", "cpu"}
    monkeypatch.setattr(R, "PATH", tmp_path / "run_to_run.json")
    outputs = {}
    for device, entry in kept.items():
        folders = [str(root / f) for f in entry["source"].split(", ")]
        assert run_pairs.main(["estimate", *folders, "--write"]) == 0
        made = flatten(json.loads(R.PATH.read_text())[device])  # to the last bits another numpy or libm may differ
        assert made == pytest.approx(flatten(entry), rel=1e-9), device
    for device, entry in kept.items():
        for folder in entry["source"].split(", "):
            capsys.readouterr()
            assert run_pairs.main(["check", str(root / folder)]) == 0, folder
            outputs[folder] = capsys.readouterr().out
            assert outputs[folder].rstrip().endswith("PASS"), folder
    h100 = outputs["benchmarks/pairs/h100"]
    assert "p10 (10%, 144 µs) 02_executor_timing thunder host_ms: +12.52%" in h100
    assert "changed: B higher by 12.5%" in h100 and "not judged: the host's fast-state reference moved +15.8%" in h100


def test_run_pairs_refuses_bad_input_in_one_line(tmp_path, capsys):
    """A folder without a plan, a plan name that is not p<N>: exit 2, one line naming what, nothing run."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import run_pairs

    for argv, fragment in (
        (["check", str(tmp_path / "none")], "plan.json"),
        (["estimate", str(tmp_path / "none")], "plan.json"),
        (["run", "--plan", "e1,pfive", "--into", str(tmp_path / "into")], "p<N> (N a number)"),
        (["run", "--plan", "e1,,e2", "--into", str(tmp_path / "into")], "run names, comma-separated"),
    ):
        assert run_pairs.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and fragment in err, err
    assert not (tmp_path / "into").exists()


def test_a_folder_of_pairs_packs_its_runs_and_reads_them_back(tmp_path):
    """``pack`` moves the run folders into ``runs.tar.xz``; the pairs read from it as from the folders."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import run_pairs

    folder = tmp_path / "pairs"
    walls_with_interval(folder / "a", {"eager": (1.0, 0.99, 1.01)}, 0.01)
    walls_with_interval(folder / "b", {"eager": (1.2, 1.19, 1.21)}, 0.01)
    before = run_pairs.pair_rows(folder, "a", "b", EFFECTS)
    assert run_pairs.main(["pack", str(folder)]) == 0
    assert [p.name for p in folder.iterdir()] == [run_pairs.RUNS]
    after = run_pairs.pair_rows(folder, "a", "b", EFFECTS)
    assert after == before and any(e["verdict"] == "changed" for e in after)  # +20%: the same verdicts, read back


CPU_TIME = {"sigma": 0.1, "min_effect": 0.3}


@pytest.mark.parametrize(
    "b, interval_b, verdict",
    [
        (0.9, (0.85, 0.95), "not judged"),  # +6%: inside an interval that spans 123% of A: too noisy to judge
        (1.7, (1.65, 1.75), "changed"),  # 2x: called, however wide A's interval
        (0.9, (0.85, 0.95), "same"),  # the control: A's interval 10% wide
    ],
)
def test_an_interval_wider_than_half_its_value_is_too_noisy_to_judge_same(b, interval_b, verdict):
    """CPU eager's wall 0.848 ms (0.763-1.81): a move inside it is not "same" but too noisy to judge; a
    2x move is still changed; with a narrow A the same move is same."""
    interval_a = (0.763, 1.81) if verdict != "same" else (0.81, 0.89)
    judged = run_to_run.judge(run_to_run.TIME, 0.848, b, interval_a, interval_b, CPU_TIME)
    assert judged.verdict == verdict, judged
    if verdict == "not judged":
        assert judged.decided.startswith("too noisy to judge: B higher by 6.13%")
        assert "A's interval spans 123% of its value (more than 50%)" in judged.decided


def test_an_executor_with_enough_numbers_is_judged_with_effects_of_its_own():
    """Pairs where torch.compile's host time moves 8% between runs and thunder's 1%: each gets its own
    minimum effect (at least ``PER_EXECUTOR_MIN`` numbers each), the kind keeps the pooled one, and an
    executor without its own falls back to the kind's."""

    def rows(executor, size):
        moves = [size * (1 if i % 2 else -1) * (0.5 + i / 80) for i in range(40)]
        return [
            {
                "row": executor,
                "kind": R.TIME,
                "a": 1.0,
                "b": 1.0 + m,
                "ratio": 1.0 + m,
                "a_interval": (0.99, 1.01),
                "b_interval": (0.99 + m, 1.01 + m),
            }
            for m in moves
        ]

    found = R.estimate(rows("torch.compile", 0.08) + rows("thunder", 0.01))
    own = found[f"{R.TIME} · torch.compile"]["min_effect"], found[f"{R.TIME} · thunder"]["min_effect"]
    assert own[0] > 4 * own[1] and own[1] < found[R.TIME]["min_effect"] < own[0]
    assert R.effect_of(found, R.TIME, "thunder")["min_effect"] == own[1]
    assert R.effect_of(found, R.TIME, "eager") == found[R.TIME]
    assert f"{R.TIME} · eager" not in R.estimate(rows("torch.compile", 0.08)[:39] + rows("eager", 0.01)[:39])
