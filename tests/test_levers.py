"""Notebook 07's logic on fake rounds and parts: savings within rounds, the ranking, which levers are
combined, where a saving lands, the counterfactual model, the combination rows; and the notebook on
CPU, where the nvFuser levers are rows with their reason."""

from __future__ import annotations

import json

import pytest
from conftest import run_runner

from latency_lab.core import harness, parameters, registry
from latency_lab.core.metrics import Stat
from latency_lab.instruments import thunder_breakdown
from latency_lab.studies.levers import findings as levers_findings
from latency_lab.studies.levers import savings as levers_savings
from latency_lab.studies.levers import study as levers

# The top-level keys of 07's results file: the notebook's run and ``run(params).save()`` write the same.
RESULTS_KEYS = {
    *("schema", "notebook", "created", "params", "environment", "key_table", "findings", "rows", "breakdown"),
    *("counterfactual", "combination", "regions", "rounds", "host_reference"),
}


def _rounds(hosts: dict[str, list[float]], walls: dict[str, list[float]] | None = None, reference=None):
    walls = walls or {n: [h * 1.01 for h in hs] for n, hs in hosts.items()}
    timed = {n: harness.Timed(n, list(walls[n]), list(hs)) for n, hs in hosts.items()}
    n = len(next(iter(hosts.values())))
    return harness.Rounds(timed, list(reference or [1.0] * n), "cuda-events", 0, 1, n)


def _prepared(name):
    return harness.Measurement(registry.REGISTRY[name], "ok", fn=lambda **kw: None, first_call_s=15.0)


def _row(p, steps: dict, timed, taken_apart: dict, floor_ms):
    """07's row of ``p`` with these steps' records and its blocks in ``timed``."""
    p.steps = steps
    return levers.row(harness.settle(p, timed.entries.get(p.name)), timed, taken_apart, floor_ms)


def _broken(nv_us: float, op_us: float, prologue_us: float = 200.0, drift=(1.0, 2.0, 1.0, 2.0)):
    """A breakdown over four rounds whose host speed moves by ``drift``, round by round."""
    phases = {k: Stat.of([10.0]) for k in thunder_breakdown.PHASES}
    phases["prologue"] = Stat.of([prologue_us])
    return {
        "phases": phases,
        "kinds": {"nvFusion": Stat.of([nv_us]), "op": Stat.of([op_us])},
        "kinds_per_block": {"nvFusion": [nv_us * d for d in drift], "op": [op_us * d for d in drift]},
        "phases_per_block": {
            k: [(prologue_us if k == "prologue" else 10.0) * d for d in drift] for k in thunder_breakdown.PHASES
        },
    }


def test_saving_is_taken_within_rounds_and_lands_on_its_part():
    # the host drifts 2x between rounds; nv-linear saves 0.3 ms in every round (8 rounds: a sign test
    # over 4 could never say p < 0.05)
    timed = _rounds(
        {
            "thunder": [2.4, 4.8, 2.4, 4.8] * 2,
            "thunder:nv-linear": [2.1, 4.5, 2.1, 4.5] * 2,
            "thunder:nv-skip-cache": [2.38, 4.82, 2.41, 4.79] * 2,
        },
        reference=[1.0, 2.0, 1.0, 2.0] * 2,
    )
    assert levers_savings.host_saved(timed, "thunder:nv-linear").median == pytest.approx(300.0)
    assert levers_savings.host_saved(timed, "thunder:nv-linear").iqr == pytest.approx(0.0)
    broken = {"thunder": _broken(1136.0, 723.0), "thunder:nv-linear": _broken(1311.0, 292.0)}
    deltas = levers_savings.part_deltas(broken, "thunder:nv-linear")  # medians of per-round differences
    assert deltas["ops outside fusions"] == pytest.approx(431.0 * 1.5) and deltas["nvFusion regions"] == pytest.approx(
        -175.0 * 1.5
    )
    assert deltas["prologue"] == pytest.approx(0.0)
    # the same parts measured in other rounds: a difference of medians would mix the host's drift in
    shifted = {
        "thunder": _broken(1136.0, 723.0),
        "thunder:nv-linear": _broken(1136.0, 723.0, drift=(2.0, 1.0, 2.0, 1.0)),
    }
    assert levers_savings.part_deltas(shifted, "thunder:nv-linear")["nvFusion regions"] == pytest.approx(0.0)
    rows = [
        _row(
            _prepared(n),
            {"trace": {"composition": {"nvFusion regions": 8, "unfused ops": 5}, "bound_symbols": 53}},
            timed,
            broken,
            0.15,
        )
        for n in ("thunder", "thunder:nv-linear", "thunder:nv-skip-cache")
    ]
    linear = rows[1]
    assert linear.host_saved_us.median == pytest.approx(300.0) and linear.largest_change == "ops outside fusions 646 µs"
    assert linear.nvfusion_regions == 8 and linear.other_regions == 0 and linear.bound_symbols == 53
    assert linear.options == "nv_enable_linear=True, nv_enable_matmul=True" and rows[0].host_saved_us is None
    # skip-cache's saving straddles zero: ranked, but not combined
    assert [r.executor for r in levers_savings.ranked(rows)] == ["thunder:nv-linear", "thunder:nv-skip-cache"]
    assert levers_savings.best_levers(rows) == ["thunder:nv-linear"]
    text = levers_findings.ranking_text(rows, timed)
    assert text.startswith("Host time saved per step against Thunder-nvFuser, within the rounds where both ran fast")
    # the interval is the saving's own over the rounds: 300 in every round, whatever the host's drift
    assert (
        "thunder:nv-linear 300 µs (changed: saves; interval 300 to 300, sign test p 0.00781; largest in-place" in text
    )
    assert "thunder:nv-skip-cache" in text and "(same;" in text
    assert "moved by 67% during these rounds" in text  # the host moved more than the saving


def test_no_baseline_no_ranking():
    timed = _rounds({"torch.compile": [1.0] * 4})
    rows = [_row(_prepared("torch.compile"), {}, timed, {}, None)]
    assert levers_savings.ranked(rows) == [] and levers_savings.best_levers(rows) == []
    assert levers_findings.ranking_text(rows, timed) == "No lever ran beside the baseline here, so none is ranked."


def test_a_lever_this_thunder_refuses_comes_back_unavailable_and_the_build_is_left_alone():
    refused = harness.Measurement(
        registry.REGISTRY["thunder:cache-symbolic"], "failed", reason="first call: TypeError: x"
    )
    out = levers.unsupported(refused)
    assert out.status == "unavailable" and out.reason == "this Thunder cannot run cache='symbolic values': TypeError: x"
    assert refused.status == "failed" and refused.reason == "first call: TypeError: x"
    broken = harness.Measurement(registry.REGISTRY["thunder:cache-symbolic"], "failed", reason="kernels: boom")
    baseline = harness.Measurement(registry.REGISTRY["thunder"], "failed", reason="first call: TypeError: x")
    assert levers.unsupported(broken) is broken and levers.unsupported(baseline) is baseline  # not refused, no lever


def test_nothing_to_move_reads_the_baseline_trace():
    inside = {"unfused": {"torch.nn.functional.linear": {"count": 7}}}
    assert levers.nothing_to_move(inside, ("embedding",))
    assert not levers.nothing_to_move({"unfused": {"torch.nn.functional.embedding": {"count": 1}}}, ("embedding",))
    assert not levers.nothing_to_move(None, ("embedding",))  # no trace: unknown, build it


def test_the_parts_table_holds_each_part_and_its_saving_against_the_baseline():
    broken = {"thunder": _broken(1136.0, 723.0), "thunder:nv-linear": _broken(1311.0, 292.0), "eager": {"reason": "-"}}
    rows = levers.breakdown_rows(broken)
    parts = [p for p in thunder_breakdown.PHASES if p != "statements"] + ["nvFusion regions", "ops outside fusions"]
    assert [(r.executor, r.part) for r in rows] == [(n, p) for n in ("thunder", "thunder:nv-linear") for p in parts]
    assert all(list(r) == ["executor", "part", "us", "saved_vs_baseline_us"] for r in rows)
    assert {r.saved_vs_baseline_us for r in rows if r.executor == "thunder"} == {None}
    linear = {r.part: r for r in rows if r.executor == "thunder:nv-linear"}
    assert linear["prologue"].us == 200.0 and linear["ops outside fusions"].saved_vs_baseline_us == pytest.approx(
        431.0 * 1.5
    )


def test_counterfactual_replaces_the_nvfusion_host_cost_per_kernel():
    timed = _rounds({"thunder": [2.4] * 4}, {"thunder": [2.42] * 4})
    regions = [
        thunder_breakdown.CallRow("thunder", i, f"call{i}", kind, thunder_breakdown.RECORDED_INPUTS, kernels=kernels)
        for i, (kind, kernels) in enumerate((("nvFusion", 20), ("nvFusion", 3), ("op", 9)))
    ]
    model = levers_findings.counterfactual(
        {"thunder": _broken(1150.0, 700.0)}, regions, timed, kernel_ms=0.22, floor_ms=0.15
    )
    assert model[0]["model"] == "measured" and model[0]["us_per_kernel"] == pytest.approx(50.0)
    ten, five, one = model[1:]
    assert ten["host_ms"] == pytest.approx((2400 - 1150 + 230) / 1e3) and ten["wall_ms"] == ten["host_ms"]
    assert one["host_ms"] == pytest.approx((2400 - 1150 + 23) / 1e3)
    slow = levers_findings.counterfactual(
        {"thunder": _broken(1150.0, 700.0)}, regions, timed, kernel_ms=5.0, floor_ms=None
    )
    assert slow[-1]["wall_ms"] == 5.0  # the GPU cannot beat its kernels
    assert levers_findings.counterfactual({}, regions, timed, 0.22, 0.15) == []
    assert "(model, not measured)" in levers_findings.counterfactual_text(model, [])


def test_combination_rows_compare_within_rounds_at_each_depth():
    keys = {
        "thunder:nv-linear @ layers=1": [2.0] * 4,
        "thunder @ layers=1": [2.4] * 4,
        "torch.compile @ layers=1": [0.95] * 4,
    }
    timed = _rounds(keys, keys)
    combined = registry.combination(["thunder:nv-linear"])
    stage = {
        k: _prepared(k.split(" @ ")[0])
        if not k.startswith("thunder:nv")
        else harness.Measurement(combined, "ok", fn=lambda **kw: None)
        for k in keys
    }
    depth_of = {k: 1 for k in keys}
    rows = [
        levers.combination_row(k, p, timed, depth_of, combined.name) for k, p in harness.settled(stage, timed).items()
    ]
    combo = rows[0]
    assert (
        combo.combined
        and combo.vs_baseline_x.median == pytest.approx(2.0 / 2.4)
        and combo.vs_reference_x.median == pytest.approx(2.0 / 0.95)
    )
    assert rows[1].vs_baseline_x is None
    [text] = levers_findings.combination_text(rows, depth_of, {1: 0.15})
    assert "At 1 layer: thunder:nv-linear" in text and "does not reach torch.compile's wall" in text


@pytest.fixture(scope="module")
def run07(tmp_path_factory):
    out = tmp_path_factory.mktemp("out07")
    proc = run_runner(
        "--preset", "tiny", "--device", "cpu", "--notebooks", "07", "--output-dir", str(out), "--run-id", "r"
    )
    return proc, out / "r"


def test_07_on_cpu_every_lever_is_a_row_with_its_reason(run07):
    """On a CPU the baseline (nvFuser) cannot run: 07 builds and times nothing, says so in one finding
    that points at the GPU answer, and keeps every configuration as a row with its reason."""
    proc, folder = run07
    res = json.loads((folder / "07_levers.results.json").read_text())
    assert set(res) == RESULTS_KEYS
    rows = {r["executor"]: r for r in res["rows"]}
    for name in ("thunder", "thunder:nv-linear", "thunder:nv-skip-cache"):
        assert rows[name]["status"] == "unavailable" and "CUDA" in rows[name]["reason"], name
    for name in ("thunder:cache-same-input", "thunder:cache-symbolic"):  # decided at availability, as 01 does
        assert rows[name]["status"] == "unavailable" and "cannot run cache=" in rows[name]["reason"], name
    assert rows["torch.compile"] == {**rows["torch.compile"], "status": "unavailable", "wall_ms": None}
    assert {"triu in nvFuser", "RoPE in nvFuser"} <= set(rows)
    assert res["counterfactual"] == [] and res["rounds"] == {}
    assert res["findings"] == [
        "Nothing measured on cpu: the baseline thunder cannot run here (nvFuser needs a CUDA device (running on "
        "cpu)); the GPU answer is in outputs/reference-h100 (07_levers)."
    ]
    assert proc.returncode == 0, proc.stdout[-2000:]  # nothing to measure here is a finding, not a failed run


def test_07_runs_as_a_function_without_papermill(tmp_path, monkeypatch):
    """``run(params)`` on the tiny preset, past the availability check (on a CPU nothing could be set
    beside the baseline): the baseline (nvFuser: unavailable on a CPU), a lever this Thunder refuses,
    and eager timed in the rounds; ``save`` writes its results file."""
    assert "Nothing measured on cpu" in levers.nothing_to_set_beside(
        levers.baseline_first(registry.selected(("thunder", "thunder:cache-same-input", "eager"))), "cpu"
    )
    monkeypatch.setattr(levers, "nothing_to_set_beside", lambda chosen, device: None)
    params = parameters.from_namespace(
        {
            "preset": "tiny",
            "device": "cpu",
            "executors": "thunder,thunder:cache-same-input,eager",
            "depths": [1],
            "warmup": 1,
            "iters": 2,
            "repeats": 2,
            "output_dir": str(tmp_path),
        }
    )
    result = levers.run(params)
    rows = {r["executor"]: r for r in result.table}
    assert list(rows) == ["thunder", "eager", "thunder:cache-same-input"]  # the baseline first, then registry order
    assert [r["executor"] for r in result.levers] == [*rows, *levers.NO_SWITCH]
    assert rows["thunder"]["status"] == "unavailable" and "CUDA" in rows["thunder"]["reason"]
    assert rows["thunder:cache-same-input"]["status"] in ("ok", "unavailable")
    assert rows["eager"]["status"] == "ok" and rows["eager"]["wall_ms"] > 0 and set(result.timed.entries) >= {"eager"}
    assert result.parts == result.regions == result.counterfactual == result.combination == []
    assert result.findings[0] == "No lever ran beside the baseline here, so none is ranked."
    path = result.save()
    saved = json.loads(path.read_text())
    assert path.parent == tmp_path and set(saved) == RESULTS_KEYS
    assert [r["executor"] for r in saved["rows"]] == [*rows, *levers.NO_SWITCH]
