"""Notebook 05: the in-place breakdown (thunder_breakdown, call_stamps) on fake timestamps and on a real Thunder
call on CPU, the graded hypotheses, memory readings, and the notebook end to end (tiny preset)."""

from __future__ import annotations

import ast
import json
from dataclasses import replace

import pytest
from conftest import run_runner

from latency_lab.core import harness, parameters, registry
from latency_lab.core.metrics import Stat
from latency_lab.core.row_types import GraphRow, HostStepRow
from latency_lab.instruments import call_stamps, thunder_breakdown
from latency_lab.pages.tables import number
from latency_lab.studies.host_overhead import findings as host_overhead_findings
from latency_lab.studies.host_overhead import study as host_overhead
from latency_lab.studies.host_overhead.rows import RegionRow

# The top-level keys of 05's results file: the notebook's run and ``run(params).save()`` write the same.
RESULTS_KEYS = {
    *("schema", "notebook", "created", "params", "environment", "key_table", "findings", "step", "parts"),
    *("breakdown", "regions", "graphs", "grades", "timeline", "memory", "first_call_s", "counts", "rounds"),
    "host_reference",
}

# --- timestamps -> phases ----------------------------------------------------------------------------


def _stamps(stamp_ns=100):
    """One call: 1 µs entry, 2 cache info, 1 search, 3 prologue, 1 bookkeeping, 1 computation entry,
    three statements of 10, 20 and 5 µs (each timestamp adding ``stamp_ns``), 4 epilogue, 1 exit."""
    t, s = 0, {}
    s["start"] = t
    for key, us in (
        ("host_start", 1),
        ("cache_start", 2),
        ("prologue_start", 1),
        ("prologue_stop", 3),
        ("exec_start", 1),
    ):
        t += us * 1000
        s[key] = t
    t += 1000
    statements = []
    for us in (10, 20, 5):
        statements.append(t)
        t += us * 1000 + stamp_ns
    s["exec_stop"] = t
    s["host_stop"] = t + 4000
    s["stop"] = t + 5000
    return call_stamps.CallStamps(statements=statements, **s)


def test_phases_and_statements_subtract_one_timestamp_each():
    c = _stamps(stamp_ns=100)
    phases = call_stamps.phases_us(c, stamp_ns=100)
    assert phases == pytest.approx(
        {
            "call entry": 1,
            "cache info": 2,
            "cache search": 1,
            "prologue": 3,
            "cache hit bookkeeping": 1,
            "computation entry": 1,
            "statements": 35,
            "epilogue and statistics": 4,
            "call exit": 1,
        }
    )
    assert call_stamps.statements_us(c, 100) == pytest.approx([10, 20, 5])
    uncorrected = call_stamps.phases_us(c, stamp_ns=0)
    assert uncorrected["statements"] == pytest.approx(35.3)  # what the timestamps cost when not subtracted
    with pytest.raises(ValueError):
        call_stamps.phases_us(call_stamps.CallStamps(0, 0, 0, 0, 0, 0, 0, 0, 0, []), 0)


def test_statements_are_classified_by_what_they_call():
    src = (
        "def computation(a, b):\n  t0 = nvFusion0(a, b)\n  t1 = torch.nn.functional.linear(t0, b)\n"
        "  update_aliases((t1,))\n  del t0\n  x, y = t1\n  return x\n"
    )
    tree, body = call_stamps.stamped(src, "computation")
    kinds = [call_stamps.classify(n, i, {"nvFusion0": "nvFusion"}) for i, n in enumerate(body)]
    assert [(k.name, k.kind) for k in kinds] == [
        ("nvFusion0", "nvFusion"),
        ("torch.nn.functional.linear", "op"),
        ("update_aliases", "bookkeeping"),
        ("del", "glue"),
        ("unpack", "glue"),
        ("return", "glue"),
    ]
    func = tree.body[0]
    assert len(func.body) == 2 * len(body) and ast.unparse(func.body[0]).startswith(call_stamps.STAMP)


def test_calibration_prices_an_empty_timestamp():
    ticks = iter(range(0, 10_000_000, 70))
    assert call_stamps.calibration_ns([], now=lambda: next(ticks)) == 70


def _block(call_us, statements_us, stamp_ns=50.0):
    phases = {k: 1.0 for k in call_stamps.PHASES}
    phases["statements"] = sum(statements_us)
    return {
        "phases_us": phases,
        "statements_us": statements_us,
        "call_us": call_us,
        "correction_us": 3 * stamp_ns / 1e3,
        "stamp_ns": stamp_ns,
        "calls": 10,
    }


class _FakeInSitu:
    statements = [
        call_stamps.Statement(0, "nvFusion0", "nvFusion"),
        call_stamps.Statement(1, "del", "glue"),
        call_stamps.Statement(2, "torch.nn.functional.linear", "op"),
    ]


def test_summary_closes_on_the_plain_step_of_the_same_rounds():
    blocks = [_block(1000.0, [600.0, 20.0, 300.0]), _block(1100.0, [650.0, 25.0, 320.0])]
    s = thunder_breakdown.summarize(_FakeInSitu(), blocks, host_ms=[1.05, 1.1])
    assert s["remainder_pct"].median == pytest.approx((100 * 50 / 1050 + 0.0) / 2)
    assert s["remainder_us"].median == pytest.approx(25.0)  # the same per-round differences, in µs
    assert s["correction_pct"].median == pytest.approx((100 * 0.15 / 1050 + 100 * 0.15 / 1100) / 2)
    text = host_overhead_findings.parts_text({"thunder": s})[0]
    assert "it cannot see time moved from one part to another" in text and "correction is 0.0140% of the step" in text
    assert s["kinds"]["nvFusion"].median == pytest.approx(625.0) and s["kinds_per_block"]["op"] == [300.0, 320.0]
    assert s["startup_us"].median == pytest.approx(6.0)  # six phases of 1 µs before the first statement
    assert thunder_breakdown.summarize(_FakeInSitu(), [], [1.0]) == {"reason": "no instrumented block ran"}


def test_real_thunder_call_is_taken_apart_in_place():
    """A Thunder call on CPU, instrumented: every statement of its computation is classified, the
    instrumented call gives the same output, and its corrected time is a positive part of a call."""
    pytest.importorskip("thunder")
    import torch

    class Small(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            return torch.nn.functional.silu(self.lin(x)) * 2

    kwargs = {"x": torch.randn(2, 8)}
    p = harness.prepare(registry.REGISTRY["thunder:torch"], Small().eval(), kwargs, "cpu")
    assert p.ok, p.reason
    ins, why = thunder_breakdown.insitu_probe(p, kwargs, 5)
    assert why is None and any(s.name == "torch.nn.functional.linear" and s.kind == "op" for s in ins.statements)
    expected = p.fn(**kwargs)
    with ins.installed():
        torch.testing.assert_close(p.fn(**kwargs), expected)
    block = ins.block(5)
    assert block["call_us"] > 0 and len(block["statements_us"]) == len(ins.statements)
    assert set(block["phases_us"]) == set(thunder_breakdown.PHASES)
    assert thunder_breakdown.cached_call(p.fn, kwargs)[0].computation_fn is ins.entry.computation_fn  # restored
    eager = harness.prepare(registry.REGISTRY["eager"], Small().eval(), kwargs, "cpu")
    assert thunder_breakdown.insitu_probe(eager, kwargs, 5) == (None, "eager is not a Thunder configuration")
    calls = thunder_breakdown.record_calls(p.fn, kwargs)
    assert [c.name for c in calls if c.kind == "op"] == [s.name for s in ins.statements if s.kind == "op"]


# --- grading and tables ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, verdict",
    [
        (150, "changed: lower"),
        (200, "same: holds"),
        (250, "same: holds"),
        (300, "same: holds"),
        (380, "changed: higher"),
    ],
)
def test_grades_are_two_sided(value, verdict):
    assert host_overhead_findings.grade(value, host_overhead_findings.SEED_STARTUP_US) == verdict


def test_memory_held_never_prints_a_negative_number():
    assert harness.memory_held(
        {"allocated_mib": 100, "reserved_mib": 200}, {"allocated_mib": 132, "reserved_mib": 1224}
    ) == {"allocated_mib": 32, "reserved_mib": 1024}
    fell = harness.memory_held({"allocated_mib": 100, "reserved_mib": 2000}, {"allocated_mib": 68, "reserved_mib": 934})
    assert fell["allocated_mib"] is None and fell["reserved_mib"] is None and "memory not attributed" in fell["reason"]
    assert harness.memory_held({}, {}) == {}


def _broken(startup=380.0, nv_per_block=(1100.0, 1150.0), remainder=1.0):
    stat = Stat.of([startup])
    return {
        "thunder": {
            "phases": {k: Stat.of([10.0]) for k in thunder_breakdown.PHASES},
            "kinds": {"nvFusion": Stat.of(nv_per_block), "op": Stat.of([700.0])},
            "kinds_per_block": {"nvFusion": list(nv_per_block)},
            "startup_us": stat,
            "statements": [
                {"index": 0, "name": "nvFusion0", "kind": "nvFusion", **Stat.of([600.0]).to_dict()},
                {"index": 1, "name": "del", "kind": "glue", **Stat.of([1.0]).to_dict()},
                {"index": 2, "name": "nvFusion1", "kind": "nvFusion", **Stat.of([500.0]).to_dict()},
            ],
            "call_us": Stat.of([2380.0]),
            "plain_host_us": Stat.of([2400.0]),
            "remainder_pct": Stat.of([remainder]),
            "blocks": 8,
        }
    }


def _alone(index: int, call: str, kind: str, us: float, kernels: int | None = None) -> thunder_breakdown.CallRow:
    """A call of thunder's computation run alone, as ``thunder_breakdown.measure_calls`` makes its row."""
    return thunder_breakdown.CallRow(
        "thunder", index, call, kind, thunder_breakdown.RECORDED_INPUTS, alone_us=Stat.of([us]), kernels=kernels
    )


def test_region_rows_pair_in_place_with_alone_and_count_kernels():
    measured = {
        "thunder": {
            "alone": {
                "rows": [
                    _alone(0, "nvFusion0", "nvFusion", 80.0, 4),
                    _alone(1, "nvFusion1", "nvFusion", 40.0, 2),
                    _alone(0, "nvFusion0 fd.execute", "nvFuser execute", 60.0, 4),
                    _alone(1, "nvFusion1 fd.execute", "nvFuser execute", 20.0, 2),
                ]
            }
        }
    }
    rows = host_overhead.region_rows(_broken(), _measured(measured))
    assert [(r["call"], r["in_place_us_per_kernel"], r["alone_us_per_kernel"]) for r in rows] == [
        ("nvFusion0", 150.0, 20.0),
        ("nvFusion1", 250.0, 20.0),
    ]
    assert [r["execute_alone_us_per_kernel"] for r in rows] == [15.0, 10.0]
    s = host_overhead_findings.nvfusion_per_kernel(_broken(), rows, "thunder")
    assert s.median == pytest.approx(1125.0 / 6)
    c = host_overhead_findings.alone_costs(rows, "thunder")  # totals over regions, the in-place statistic
    assert c["alone_us_per_kernel"] == pytest.approx(120 / 6) and c["execute_us_per_kernel"] == pytest.approx(80 / 6)
    assert c["wrapper_us_per_fusion"] == pytest.approx(20.0) and c["regions"] == 2
    text = host_overhead_findings.per_kernel_text(_broken(), rows, "cuda")
    assert "20.0 µs per kernel through the wrapper, 13.3 µs in fd.execute alone (nvFuser's own: changed: lower)" in text
    assert "the wrapper adds 20.0 µs per fusion" in text and "FusionDefinition cache: same: holds)" in text


def test_a_call_missing_alone_leaves_only_its_own_row_empty():
    measured = {"thunder": {"alone": {"rows": [_alone(5, "nvFusion1", "nvFusion", 40.0)]}}}
    rows = host_overhead.region_rows(_broken(), _measured(measured))  # nvFusion0 has no alone row
    assert [(r["call"], r["alone_us"]) for r in rows] == [("nvFusion0", None), ("nvFusion1", 40.0)]


def test_hypotheses_read_their_numbers_and_grade_both_ways():
    rows = [RegionRow("thunder", 0, "nvFusion0", "nvFusion", Stat.of([1500.0]), alone_us=1000.0, kernels=40)]
    high = host_overhead_findings.per_kernel_text(_broken(nv_per_block=(1500.0, 1600.0)), rows, "cuda")
    assert "thunder: in place, Thunder's wrapper included, 38.8 µs per kernel (interval " in high
    assert "over rounds; total nvFusion µs over its kernels): changed: higher" in high and "fd.execute" not in high
    assert high.endswith("changed: higher.")
    assert "changed: lower" in host_overhead_findings.per_kernel_text(
        _broken(nv_per_block=(400.0, 420.0)), rows, "cuda"
    )
    assert "same: holds" in host_overhead_findings.per_kernel_text(_broken(nv_per_block=(1000.0, 1000.0)), rows, "cuda")
    assert "needs CUDA" in host_overhead_findings.per_kernel_text({}, [], "cpu")
    text = host_overhead_findings.startup_text(_broken(startup=380.0), {}, "cuda")
    assert text.startswith("Start-up per step (seed: ~250 µs that Thunder spends and eager does not, read as 200-300")
    assert "in place: 380 µs for thunder" in text and text.endswith(": changed: higher.")
    assert host_overhead_findings.startup_text(_broken(startup=250.0), {}, "cuda").endswith(": same: holds.")
    assert host_overhead_findings.startup_text(_broken(startup=90.0), {}, "cuda").endswith(": changed: lower.")
    timelines = {"eager": {"call_to_first_kernel_us": 185.0}, "thunder": {"call_to_first_kernel_us": 368.0}}
    both = host_overhead_findings.startup_text(_broken(startup=318.0), timelines, "cuda")
    assert (
        "Call to first kernel beyond eager's" in both
        and "183 µs (thunder 368 µs, eager 185 µs): changed: lower." in both
    )
    assert "no Thunder configuration" in host_overhead_findings.startup_text({}, {}, "cuda")
    assert "The in-place parts close" in host_overhead_findings.parts_text(_broken(remainder=3.0))[0]
    assert "do not close" in host_overhead_findings.parts_text(_broken(remainder=25.0))[0]


def test_grades_by_the_interval():
    band = host_overhead_findings.SEED_STARTUP_US
    inside = Stat(250, 249, 251, 240, 260, 250, 1, 9, lo=240.0, hi=260.0)
    assert host_overhead_findings.grade(inside, band) == "same: holds"
    assert host_overhead_findings.grade(replace(inside, median=305, lo=290.0, hi=320.0), band) == "same: at the edge"
    assert host_overhead_findings.grade(replace(inside, median=330, lo=310.0, hi=350.0), band) == "changed: higher"
    assert host_overhead_findings.grade(replace(inside, median=150, lo=140.0, hi=160.0), band) == "changed: lower"


def _graph_rounds(with_ms, without_ms):
    names = ("torch.compile:reduce-overhead", "torch.compile")
    timed = {n: harness.Timed(n, [w] * 4, [w * 0.5] * 4) for n, w in zip(names, (with_ms, without_ms))}
    return harness.Rounds(timed, [1.0] * 4, "cuda-events", 0, 1, 4)


def test_graphs_hold_only_when_the_wall_drops_enough():
    step = [
        HostStepRow(
            n,
            n,
            "ok",
            None,
            None,
            wall_ms=Stat.of([w]),
            host_ms=Stat.of([w / 2]),
            allocated_mib=10.0,
            reserved_mib=20.0,
        )
        for n, w in (("torch.compile:reduce-overhead", 0.23), ("torch.compile", 0.95))
    ]
    cure = host_overhead.graph_rows(step, _graph_rounds(0.23, 0.95))
    assert cure[0]["wall_ratio_x"] == pytest.approx(0.23 / 0.95)
    assert ": same: holds" in host_overhead_findings.graphs_text(cure, _graph_rounds(0.23, 0.95), "cuda")
    lo, hi = cure[0]["wall_ratio_lo_x"], cure[0]["wall_ratio_hi_x"]  # the within-round ratio's interval
    assert lo <= 0.23 / 0.95 <= hi and f"interval x{number(lo)}-x{number(hi)}" in host_overhead_findings.graphs_text(
        cure, _graph_rounds(0.23, 0.95), "cuda"
    )

    def ratio(median: float, lo: float, hi: float) -> GraphRow:
        return replace(cure[0], wall_ratio_x=Stat(median, *[None] * 7, lo=lo, hi=hi))

    assert host_overhead_findings.cure_verdict(ratio(0.78, 0.70, 0.86)) == "same: at the edge"
    assert host_overhead_findings.cure_verdict(ratio(0.85, 0.81, 0.86)) == "changed: does not hold"
    weak = host_overhead.graph_rows(step, _graph_rounds(0.9, 0.95))
    assert "changed: does not hold" in host_overhead_findings.graphs_text(weak, _graph_rounds(0.9, 0.95), "cuda")
    assert host_overhead_findings.graphs_text([], _graph_rounds(1, 1), "cpu") == "CUDA graphs as the cure: needs CUDA."


# --- the notebook on CPU -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run05(tmp_path_factory):
    out = tmp_path_factory.mktemp("out05")
    proc = run_runner(
        "--preset",
        "tiny",
        "--device",
        "cpu",
        "--notebooks",
        "05",
        "--output-dir",
        str(out),
        "--run-id",
        "r",
        "-p",
        "executors=eager,torch.compile,thunder:torch,thunderfx",
    )
    assert proc.returncode == 0, f"runner failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return out / "r", json.loads((out / "r" / "05_host_overhead.results.json").read_text())


def test_05_every_row_has_host_at_most_wall_and_thunder_is_taken_apart(run05):
    folder, res = run05
    assert set(res) == RESULTS_KEYS
    rows = {r["executor"]: r for r in res["step"]}
    assert list(rows) == ["eager", "torch.compile", "thunder:torch", "thunderfx"]
    for name, r in rows.items():
        assert r["status"] == "ok", (name, r["reason"])
        assert 0 < r["host_ms"] <= r["wall_ms"] * 1.0001
    broken = res["breakdown"]
    assert set(broken["thunder:torch"]["phases"]) == set(thunder_breakdown.PHASES)
    fast = broken["thunder:torch"]["fast"]  # one per round; the headline over the fast ones
    assert len(fast) == broken["thunder:torch"]["blocks"]
    assert broken["thunder:torch"]["remainder_pct"]["n"] in (sum(fast), len(fast))
    assert "not a single thunder.jit callable" in broken["thunderfx"]["reason"]
    regions = [r for r in res["regions"] if r["executor"] == "thunder:torch"]
    assert any(
        r["call"] == "torch.nn.functional.linear" and r["in_place_us"] > 0 and r["alone_us"] > 0 for r in regions
    )
    for r in rows.values():
        assert (folder / res["timeline"][r["executor"]]["chrome_trace"]).is_file()
    text = " ".join(res["findings"])
    assert "thunder:torch: host" in text and "needs CUDA" in text


def test_05_runs_as_a_function_without_papermill(tmp_path):
    """``run(params)`` on the tiny preset: eager beside thunder:torch (the configuration a CPU takes
    apart); the Result holds every table the notebook shows, and ``save`` writes its results file."""
    params = parameters.from_namespace(
        {
            "preset": "tiny",
            "device": "cpu",
            "executors": "eager,thunder:torch",
            "warmup": 1,
            "iters": 2,
            "repeats": 2,
            "output_dir": str(tmp_path),
        }
    )
    result = host_overhead.run(params)
    assert [(r["executor"], r["status"]) for r in result.step] == [("eager", "ok"), ("thunder:torch", "ok")]
    assert set(result.breakdown) == {r["executor"] for r in result.parts} == {"thunder:torch"}
    assert {r["phase"] for r in result.phases} == set(thunder_breakdown.PHASES)
    assert any(r["kind"] == "op" and r["alone_us"] for r in result.regions)
    assert set(result.timelines) == set(result.profiled) == set(result.memory) == {"eager", "thunder:torch"}
    assert all((tmp_path / t["file"]).is_file() and t["rows"] for t in result.profiled.values())
    assert result.graphs == [] and len(result.findings) == 4 and "needs CUDA" in result.findings[-1]
    assert set(result.timed.entries) == {"eager", "thunder:torch"} and result.first_call_s["eager"] > 0
    path = result.save()
    saved = json.loads(path.read_text())
    assert path.parent == tmp_path and set(saved) == RESULTS_KEYS
    assert saved["step"] == json.loads(json.dumps(result.step)) and saved["findings"] == result.findings
    counted = saved["counts"]  # each step counted, every function's starts kept: what compare judges
    assert set(counted) == {"eager", "thunder:torch"} and all(c["all_functions"] for c in counted.values())


def _measured(steps: dict[str, dict]) -> dict[str, harness.Measurement]:
    """Thunder configurations built and measured with these steps' records."""
    return {n: harness.Measurement(registry.REGISTRY[n], "ok", first_call_s=1.0, steps=r) for n, r in steps.items()}
