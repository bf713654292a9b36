"""Notebook 06 and latency_lab.studies.scaling.study: fits with standard errors, the sentences' branches on fake rows
and fake rounds, what a sweep's build records (compile-cache hits of the first call, GPU memory held),
the decode builder against a recompute without cache, ``run`` and ``Result.save`` without papermill, and the
tiny run's 06 results."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from latency_lab.core import harness, model, parameters, registry, results, sweep
from latency_lab.core.harness import Rounds, Timed
from latency_lab.core.row_types import ScalingRow
from latency_lab.pages import charts
from latency_lab.studies.scaling import (
    decode as scaling_decode,
)
from latency_lab.studies.scaling import (
    findings as scaling_findings,
)
from latency_lab.studies.scaling import (
    fits as scaling_fits,
)
from latency_lab.studies.scaling import (
    study as scaling,
)

# --- fits ---------------------------------------------------------------------------------------


def test_fit_line_recovers_the_line_and_numpy_s_standard_errors():
    rng = np.random.default_rng(0)
    xs = np.array([1, 2, 4, 8, 16], dtype=float)
    ys = 0.25 + 0.125 * xs + rng.normal(0, 0.01, xs.size)
    fit = scaling_fits.fit_line(xs, ys)
    assert fit["intercept"] == pytest.approx(0.25, abs=0.03) and fit["slope"] == pytest.approx(0.125, abs=0.005)
    (slope, intercept), cov = np.polyfit(xs, ys, 1, cov=True)  # an independent least squares
    assert (fit["slope"], fit["intercept"]) == pytest.approx((slope, intercept))
    assert (fit["slope_se"], fit["intercept_se"]) == pytest.approx(tuple(np.sqrt(np.diag(cov))))
    np.testing.assert_allclose(fit["residuals"], ys - (intercept + slope * xs), atol=1e-12)
    assert fit["rms_residual"] == pytest.approx(np.sqrt(np.mean(np.square(fit["residuals"])))) and fit["n"] == 5


def test_standard_error_is_the_spread_of_the_slope_over_repeated_noisy_sweeps():
    rng = np.random.default_rng(1)
    xs = np.array([1, 2, 4, 8], dtype=float)
    fits = [scaling_fits.fit_line(xs, 1.0 + 0.5 * xs + rng.normal(0, 0.2, xs.size)) for _ in range(4000)]
    spread = np.std([f["slope"] for f in fits])
    assert np.sqrt(np.mean([f["slope_se"] ** 2 for f in fits])) == pytest.approx(spread, rel=0.05)


def test_two_points_give_an_exact_line_without_standard_errors():
    fit = scaling_fits.fit_line([1, 2], [3.0, 5.0])
    assert (fit["intercept"], fit["slope"]) == pytest.approx((1.0, 2.0)) and fit["residuals"] == [0.0, 0.0]
    assert fit["slope_se"] is None and fit["intercept_se"] is None


@pytest.mark.parametrize("xs, ys", [([4], [1.0]), ([2, 2], [1.0, 2.0]), ([1, 2], [1.0])])
def test_fit_line_rejects_underdetermined_input(xs, ys):
    with pytest.raises(ValueError, match="two distinct x values"):
        scaling_fits.fit_line(xs, ys)


def _row(
    executor,
    layers,
    status="ok",
    wall=None,
    host=None,
    kernel=None,
    reason=None,
    tokens=6,
    first=None,
    hits=0,
    key=None,
):
    return {
        "executor": executor,
        "label": executor,
        "status": status,
        "reason": reason,
        "layers": layers,
        "tokens": tokens,
        "wall_ms": wall,
        "host_ms": host,
        "kernel_ms": kernel,
        "first_call_s": first,
        "first_call_cache_hits": hits,
        "key": key or f"{executor} @ {layers}",
        "sweep": "depth",
    }


def test_depth_fits_per_metric_and_reasons():
    rows = [_row("a", n, wall=0.5 + 0.25 * n, host=0.4 + 0.2 * n) for n in (1, 2, 4)]
    rows += [_row("b", 1, wall=1.0), _row("b", 2, status="failed", reason="first call: boom")]
    rows += [_row("c", n, status="unavailable", reason="needs a CUDA device") for n in (1, 2)]
    fits = {f["executor"]: f for f in scaling_fits.depth_fits(rows)}
    assert fits["a"]["wall_ms"]["slope"] == pytest.approx(0.25) and fits["a"]["wall_ms"]["slope_se"] == pytest.approx(0)
    assert fits["a"]["host_ms"]["slope"] == pytest.approx(0.2) and fits["a"]["kernel_ms"] is None
    assert fits["b"]["wall_ms"] is None and fits["b"]["reason"] == "fewer than two depths measured"
    assert fits["c"]["wall_ms"] is None and fits["c"]["reason"] == "needs a CUDA device"
    table = {(r["executor"], r["metric"]): r for r in scaling_fits.fit_rows(list(fits.values()))}
    assert table["a", "wall"]["per_layer_ms"] == pytest.approx(0.25) and table["a", "wall"]["depths"] == "1, 2, 4"
    assert (
        table["a", "kernel"]["reason"] == "fewer than two depths measured" and table["a", "kernel"].per_layer_ms is None
    )
    assert table["c", "host"]["reason"] == "needs a CUDA device"
    assert scaling_findings.cost_text(list(fits.values()), 6).endswith(
        "No fit: b (fewer than two depths measured); c (needs a CUDA device)."
    )


def test_negative_costs_are_flagged_never_printed_as_results():
    # the H200 reference's torch.compile:reduce-overhead host time fell with depth (-0.0375 ms per layer)
    rows = [
        _row("ro", n, wall=0.15 + 0.08 * n, host=0.39 - 0.0375 * n + e, kernel=0.136 + 0.073 * n)
        for n, e in ((1, 0.001), (2, -0.002), (4, 0.001))
    ]
    rows += [_row("neg", n, wall=w, host=w, kernel=0.1 * n) for n, w in ((1, 2.0), (2, 1.9), (4, 1.5))]
    fits = scaling_fits.depth_fits(rows)
    table = {(r["executor"], r["metric"]): r for r in scaling_fits.fit_rows(fits)}
    assert (
        table["ro", "host"]["per_layer_ms"] is None
        and "host came out negative (per layer -0.0" in table["ro", "host"]["flag"]
    )
    assert table["ro", "host"]["fixed_ms"] == pytest.approx(0.39, abs=0.01)  # the positive part stays
    assert table["ro", "wall"]["flag"] is None and table["ro", "wall"]["per_layer_ms"] == pytest.approx(0.08)
    text = scaling_findings.host_kernel_text(fits, 6)
    assert "ro host came out negative" in text and "flagged, not a result" in text
    assert "neg: wall came out negative" in scaling_findings.cost_text(fits, 6)
    negative_fixed = scaling_fits.fit_line([1, 2, 4], [1.0, 3.0, 7.0])  # -1 + 2 per layer
    assert scaling_fits.negative_flag("wall", negative_fixed, "ms") == (
        "wall came out negative (fixed -1.00 ± 0 ms): flagged, not a result"
    )


def _line(slope, se, intercept=1.0):
    return {"slope": slope, "slope_se": se, "intercept": intercept, "intercept_se": se}


@pytest.mark.parametrize(
    "fa, fb, says",
    [
        (_line(0.6, 0.05), _line(0.3, 0.05), "+0.300 ± 0.0707 ms per layer: the difference grows with depth"),
        (_line(0.3, 0.01, intercept=2.0), _line(0.5, 0.01), "shrinks with depth"),
        (_line(0.6, 0.2), _line(0.3, 0.2), "(not resolved: within twice its standard error)"),
        (_line(0.6, None), _line(0.3, None), "(not resolved: two depths give no standard error)"),
    ],
)
def test_a_difference_grows_only_beyond_twice_its_standard_error(fa, fb, says):
    assert says in scaling_findings.versus_text("thunder", fa, "torch.compile", fb, [1, 2, 4])


def test_cost_text_compares_thunder_with_torch_compile_from_the_fits():
    rows = [
        _row(name, n, wall=fixed + per_layer * n + e)
        for name, fixed, per_layer in (("torch.compile", 0.4, 0.3), ("thunder", 1.5, 0.9))
        for n, e in ((1, 0.01), (2, -0.02), (4, 0.01))
    ]
    text = scaling_findings.cost_text(scaling_fits.depth_fits(rows), 6)
    assert text.startswith(
        "Wall time of the prefill (6 tokens) = fixed + per layer × layers, least squares over 1, 2, 4 layers"
    )
    assert "thunder − torch.compile: +0.600 ± " in text and "the difference grows with depth" in text
    two = scaling_findings.cost_text(scaling_fits.depth_fits([r for r in rows if r["layers"] < 4]), 6)
    assert "two depths: an exact line, no standard error" in two and "two depths give no standard error" in two


def _rounds(walls: dict[str, list[float]], reference: list[float]) -> Rounds:
    timed = {k: Timed(k, wall_ms=list(v), host_ms=[0.8 * x for x in v]) for k, v in walls.items()}
    return Rounds(timed, list(reference), "cuda-events", 10, 40, len(reference))


def test_one_depth_asked_for_is_answered_in_the_key_table_and_the_findings():
    """``depths=[16]``: no executor has a depth fit, and every number at 16 layers is still reported."""
    params = parameters.resolved(device="cuda", depths=(16,), prompt_lengths=(6,), layers=16, seq_len=6)
    table = [
        _row("torch.compile", 16, wall=7.33, host=5.1, kernel=1.29, first=22.0),
        _row("thunder", 16, wall=19.2, host=18.3, kernel=1.37, first=135.0),
    ]
    for r in table:
        r.update(sweep="depth, prompt", step="prefill")
    timed = _rounds(
        {"thunder @ 16": [19.0, 19.4, 19.2, 19.3], "torch.compile @ 16": [7.3, 7.4, 7.3, 7.35]}, [1.0, 1.01, 1.0, 1.02]
    )
    fits = scaling_fits.depth_fits(scaling_findings.rows_of_sweep(table, "depth"))
    findings = scaling_findings.findings(table, fits, timed, params)
    assert findings[0] == (
        "At 16 layers (prefill, 6 tokens): "
        "torch.compile 7.33 ms wall (host 5.10 ms, kernel 1.29 ms, first call 22.0 s); "
        "thunder 19.2 ms wall (host 18.3 ms, kernel 1.37 ms, first call 135 s). thunder / torch.compile "
        "(x2.62 within rounds, q1–q3 x2.62–x2.63)."
    )  # round by round: 2.60, 2.62, 2.63, 2.63
    assert findings[1].startswith("No depth fit of the prefill (6 tokens)") and "key table" in findings[1]
    key = {r["executor"]: r for r in scaling.key_rows(table)}
    assert (
        key["thunder"]["layers"],
        key["thunder"]["wall_ms"],
        key["thunder"]["host_ms"],
        key["thunder"]["kernel_ms"],
        key["thunder"]["first_call_s"],
    ) == (16, 19.2, 18.3, 1.37, 135.0)
    assert "16 layers" in scaling.key_title(params)
    gone = [_row("thunder", 4, status="failed", reason="first call: boom"), _row("eager", 4, wall=3.0)]
    assert (
        scaling_findings.depth_text(gone, 4, timed)
        == "At 4 layers (prefill, 6 tokens): eager 3.00 ms wall. Not measured: thunder failed."
    )
    assert scaling_findings.depth_text(gone[:1], 4, timed) == "At 4 layers (prefill, 6 tokens): no executor measured."
    assert scaling_findings.depth_text([], 8, timed) == "At 8 layers: no executor measured."


def test_a_ratio_smaller_than_the_host_s_drift_says_so():
    at = [_row("thunder", 1, wall=1.1), _row("torch.compile", 1, wall=1.0)]
    steady = _rounds({"thunder @ 1": [1.1, 1.1, 1.1, 1.1], "torch.compile @ 1": [1.0] * 4}, [1.0, 1.01, 1.0, 1.02])
    moved = _rounds({"thunder @ 1": [1.1, 1.1, 1.1, 1.1], "torch.compile @ 1": [1.0] * 4}, [1.0, 1.5, 1.0, 1.02])
    assert "(x1.10 within rounds, q1–q3 x1.10–x1.10)" in scaling_findings.pairs_text(
        at, steady
    ) and "host reference moved" not in scaling_findings.pairs_text(at, steady)
    assert "the host reference moved by 50% during these rounds" in scaling_findings.pairs_text(at, moved)


def test_prefill_and_decode_sentences_name_their_depth():
    prompt = [_row(n, 2, wall=w, tokens=t, key=f"{n}@{t}") for n, t, w in (("eager", 6, 2.0), ("eager", 512, 2.5))]
    timed = _rounds({"eager@6": [1.0, 1.0, 3.0, 3.0], "eager@512": [2.0, 2.0, 6.0, 3.0]}, [1.0, 1.0, 1.0, 1.0])
    assert scaling_findings.prefill_text(
        prompt, timed
    ) == (  # the medians' ratio would be x1.25; round by round: 2, 2, 2, 1
        "Prefill wall by prompt length at 2 layers: eager 2.00 ms at 6 → 2.50 ms at 512 tokens "
        "(x2.00 within rounds, q1–q3 x1.75–x2.00)."
    )
    decode = [
        {**_row("eager", 2, wall=1.5), "prompt_tokens": 6, "decode_tokens": 32, "tpot_ms": 1.9, "tokens_per_s": 526.0}
    ]
    assert scaling_findings.decode_text(decode, timed).startswith(
        "Decode at 2 layers (prompt 6 tokens, StaticCache; the step timed in rounds, and a greedy loop of 32 "
        "tokens): eager 1.50 ms per step; the loop 1.90 ms per output token, 526 tokens/s."
    )
    thunder = {**decode[0], "executor": "thunder", "tokens_match_eager": 10, "divergence_ulps": 1.0, "near_tie": True}
    wrong = {**thunder, "executor": "thunder:torch", "divergence_ulps": 40.0, "near_tie": False}
    tie = {**thunder, "executor": "torch.compile", "divergence_ulps": 0.0}
    assert "is 0 ulps: an exact tie in eager's own logits)" in scaling_findings.decode_text([tie], timed)
    text = scaling_findings.decode_text([{**decode[0], "tokens_match_eager": 32}, thunder, wrong], timed)
    assert text.endswith(
        " Greedy tokens equal to eager's, from the first: thunder 10 of 32 (where they first differ, eager's margin "
        "between the two tokens is 1.00 ulps: a near-tie); thunder:torch 10 of 32 (where they first differ, eager's "
        "margin between the two tokens is 40.0 ulps: not a near-tie: check this executor's output)."
    )
    assert (
        scaling_findings.decode_text([_row("eager", 2, status="failed")], timed)
        == "No executor completed the decode step here."
    )
    no_loop = [{**decode[0], "tpot_ms": None, "tokens_per_s": None}]
    assert scaling_findings.decode_text(no_loop, timed).endswith(": eager 1.50 ms per step.")
    assert scaling_findings.prefill_text(prompt[:1], timed) == (
        "Prefill wall by prompt length at 2 layers: fewer than two lengths measured per executor."
    )


def test_host_and_kernel_cost_per_layer_side_by_side():
    rows = [_row("thunder", n, wall=1.8 + 0.6 * n, host=1.0 + 1.0 * n, kernel=0.14 + 0.075 * n) for n in (1, 2, 4)]
    fits = scaling_fits.depth_fits(rows)
    assert scaling_findings.host_kernel_text(fits, 6) == (
        "Per layer of the prefill (6 tokens), host vs kernel time: thunder 1.00 ± 0 ms host, 0.0750 ± 0 ms kernel."
    )
    assert (
        scaling_findings.host_kernel_text(scaling_fits.depth_fits([{**r, "kernel_ms": None} for r in rows]), 6) is None
    )  # a CPU


def test_first_call_line_is_drawn_over_cold_compiles_only():
    rows = [_row("thunder", n, first=3.0 + 2.0 * n + e) for n, e in ((1, 0.1), (2, -0.2), (4, 0.1))]
    rows += [
        _row("torch.compile", 1, first=0.6, hits=3),
        _row("torch.compile", 2, first=3.1),
        _row("torch.compile", 4, first=3.3),
    ]
    rows += [_row("shrinking", n, first=10.0 - n) for n in (1, 2, 4)]
    rows += [_row("few", n, first=1.0 + n) for n in (1, 2)] + [_row("eager", 1, status="failed", first=None)]
    text = scaling_findings.first_call_text(rows)
    assert text.startswith(
        "First call (trace + compile + run) of the prefill (6 tokens) by layers: thunder 5.10 s at 1"
    )
    assert "11.1 s at 4 (cold compiles: 2.95 ± 0.295 s + 2.02 ± 0.111 s per layer, RMS residual 0.139 s)" in text
    assert (
        "torch.compile 0.600 s at 1 (compile cache hit), 3.10 s at 2, 3.30 s at 4 (no line: compile caches were "
        "hit, 2 cold of 3, so a fit would be meaningless)"
    ) in text
    assert "shrinking 9.00 s at 1, 8.00 s at 2, 6.00 s at 4 (the first call came out negative (per layer -1.00" in text
    assert text.endswith("; few 2.00 s at 1, 3.00 s at 2.")  # two cold depths: no line, nothing hidden
    assert "eager" not in text
    assert (
        scaling_findings.first_call_text([])
        == "First call (trace + compile + run) of the prefill (? tokens) by layers: none ran."
    )


def test_decode_numbers_and_token_agreement():
    loops = [timing_block(ms) for ms in (32.0, 30.0, 34.0, 31.0)]
    numbers = scaling_decode.decode_numbers(loops, tokens=16, batch_size=2)
    row = ScalingRow("x", "x", "ok", None, None, **numbers).as_dict()  # as a 06 row holds them
    assert row["loop_ms"] == 31.5 and row["tpot_ms"] == pytest.approx(31.5 / 16)
    assert row["tpot_q1_ms"] == pytest.approx(row["loop_q1_ms"] / 16) and row["loop_q1_ms"] < 31.5
    assert numbers["tokens_per_s"] == pytest.approx(2 * 16 / 0.0315)
    assert scaling_decode.decode_numbers(None, 16, 1)["tpot_ms"] is None
    assert scaling_decode.agreement([[1, 2, 3, 4], [5, 6, 7, 8]], [[1, 2, 9, 4], [5, 6, 7, 8]]) == 2
    assert scaling_decode.agreement([[1, 2]], [[1, 2]]) == 2 and scaling_decode.agreement([[3]], [[1]]) == 0


def timing_block(ms: float):
    from latency_lab.core.timing import Block

    return Block(ms, 0.9 * ms)


def test_not_ok_text_lists_every_reason_once_with_its_depth():
    rows = [_row("thunder", n, status="unavailable", reason="needs a CUDA device") for n in (1, 2)]
    rows += [_row("eager", 1)]
    assert scaling_findings.not_ok_text(rows) == (
        "2 of 3 points did not run fully: thunder at 1 layer: unavailable (needs a CUDA "
        "device); thunder at 2 layers: unavailable (needs a CUDA device)."
    )
    assert scaling_findings.not_ok_text(rows[2:]) is None


# --- what a sweep's build records ---------------------------------------------------------------


def test_memory_held_is_never_negative():
    before = {"allocated_mib": 100.0, "reserved_mib": 200.0}
    assert harness.memory_held(before, {"allocated_mib": 130.0, "reserved_mib": 260.0}) == {
        "allocated_mib": 30.0,
        "reserved_mib": 60.0,
    }
    fell = harness.memory_held(before, {"allocated_mib": 68.0, "reserved_mib": 1266.0})
    assert fell["allocated_mib"] is None and fell["reserved_mib"] == 1066.0
    assert (
        fell["reason"] == "memory not attributed: allocated fell by 32 MiB during the build (something else was freed)"
    )
    assert harness.memory_held({}, {}) == {}  # a CPU has no allocator readings


def _counting_executor(name: str):
    """An executor whose every call counts one Inductor FX-graph cache hit, as a cache-hitting compile would."""
    from torch._dynamo.utils import counters

    def factory(fn, notes):
        def call(**kw):
            counters["inductor"]["fxgraph_cache_hit"] += 1
            return fn(**kw)

        return call

    return registry.Executor(name, name, "counts a cache hit per call", factory)


def test_a_build_records_its_first_call_s_cache_hits_and_the_memory_it_holds(monkeypatch):
    ex = _counting_executor("counting")
    readings = iter(
        [
            {"allocated_mib": 10.0, "reserved_mib": 20.0},
            {"allocated_mib": 14.0, "reserved_mib": 20.0},  # eager, n=1
            {"allocated_mib": 14.0, "reserved_mib": 20.0},
            {"allocated_mib": 14.0, "reserved_mib": 20.0},  # eager, n=2
            {"allocated_mib": 14.0, "reserved_mib": 20.0},
            {"allocated_mib": 16.0, "reserved_mib": 22.0},  # counting, n=1
            {"allocated_mib": 14.0, "reserved_mib": 52.0},
            {"allocated_mib": 9.0, "reserved_mib": 60.0},
        ]
    )  # counting, n=2
    monkeypatch.setattr(harness, "memory", lambda device, empty=False: next(readings))
    x = torch.ones(3)
    grid = sweep.Sweep(
        "s",
        {"n": (1, 2)},
        [registry.REGISTRY["eager"], ex],
        lambda point: sweep.Case(lambda x: x * point["n"], {"x": x}, lambda p: {"rel_err": 0.0}),
    )
    params = parameters.validate(preset="tiny", device="cpu", warmup=3, iters=2, repeats=2)
    built = sweep.build(grid, params, progress=lambda text: None)
    assert [(b.point["n"], b.measured.name) for b in built] == [
        (1, "eager"),
        (1, "counting"),
        (2, "eager"),
        (2, "counting"),
    ]
    timed = sweep.time_all(built, params)
    rows = {(r["n"], r["executor"]): r for r in (sweep.row(b, timed).as_dict() for b in built)}
    # built executor by executor (eager at n=1 and n=2, then counting), each between two readings
    assert (rows[1, "eager"]["held_allocated_mib"], rows[1, "eager"]["held_reserved_mib"]) == (4.0, 0.0)
    assert (rows[1, "counting"]["held_allocated_mib"], rows[1, "counting"]["held_reserved_mib"]) == (2.0, 2.0)
    assert (
        rows[2, "counting"]["held_allocated_mib"] is None and "allocated fell by 5 MiB" in rows[2, "counting"]["notes"]
    )
    assert rows[2, "counting"]["held_reserved_mib"] == 8.0
    # the first call alone: 1 hit, though warm-up and rounds called it many times more
    assert rows[1, "counting"]["first_call_cache_hits"] == 1 and rows[1, "eager"]["first_call_cache_hits"] == 0
    assert all(r["wall_ms"] > 0 and r["status"] == "ok" for r in rows.values())
    assert {len(t.wall_ms) for t in timed.entries.values()} == {2 * params.repeats}  # one block each per round


# --- the decode step ----------------------------------------------------------------------------


def test_decode_builder_and_greedy_loop_match_a_recompute_without_cache():
    params = parameters.validate(preset="tiny", device="cpu", dtype="float32")
    setup = model.build(params)
    decode = model.build_decode(setup, prompt_len=5, new_tokens=4)
    kw = decode.kwargs
    assert kw["cache_position"].tolist() == [5] and tuple(kw["input_ids"].shape) == (1, 1)
    assert kw["past_key_values"] is decode.cache and kw["use_cache"] is True and decode.max_cache_len == 9

    seen = []  # each step's (input id, position, last logits), recorded by a wrapper of the model

    def recording(**kwargs):
        out = setup.model(**kwargs)
        seen.append((kwargs["input_ids"].item(), kwargs["cache_position"].item(), out.logits[0, -1].clone()))
        return out

    generated = torch.cat(model.greedy_decode(recording, decode, 4), dim=1)
    assert [s[1] for s in seen] == [5, 6, 7, 8]  # one position per token
    ids = torch.cat([model.token_ids(parameters.validate(preset="tiny", seq_len=5), 1024), kw["input_ids"]], dim=1)
    for token, _, logits in seen:
        assert token == ids[0, -1].item()
        full = setup.model(input_ids=ids, use_cache=False).logits[0, -1]
        torch.testing.assert_close(logits, full, rtol=1e-4, atol=1e-4)
        ids = torch.cat([ids, full.argmax().view(1, 1)], dim=1)
    assert generated[0].tolist() == ids[0, -4:].tolist()
    with pytest.raises(ValueError, match="free positions"):
        model.greedy_decode(setup.model, decode, 5)


def test_divergence_reads_eager_margin_in_ulps_of_the_logits_dtype():
    """Eager's logits at the first differing step: token 1 at 8.0, token 2 at 8.0 - 1 bf16 ulp (2**-7 * 8
    = 0.0625) is a near-tie; token 3 at 6.0 is 32 ulps away, not one."""
    step = torch.tensor([[0.0, 8.0, 8.0 - 0.0625, 6.0]], dtype=torch.bfloat16)
    logits = [step, step]
    near = scaling_decode.divergence(logits, [[1, 2]], [[1, 1]], 1)
    assert near["divergence_ulps"] == pytest.approx(1.0) and near["near_tie"] is True
    far = scaling_decode.divergence(logits, [[1, 3]], [[1, 1]], 1)
    assert far["divergence_ulps"] == pytest.approx(32.0) and far["near_tie"] is False
    assert scaling_decode.divergence(logits, [[1, 1]], [[1, 1]], 2) == {}


# --- run, without papermill, and the tiny run ----------------------------------------------------

# The sections of 06's results file, from the notebook (the tiny run) and from ``run`` alike.
RESULT_KEYS = {
    "schema",
    "notebook",
    "created",
    "params",
    "environment",
    "key_table",
    "findings",
    "points",
    "fits",
    "fit_rows",
    "elapsed_s",
    "memory_after_release",
    "rounds",
    "host_reference",
    "bandwidth_measured_GBps",
}


def test_run_without_papermill_gives_what_the_notebook_shows_and_saves(tmp_path):
    """``run`` with eager alone at two depths, one prompt length (the shared point) and a two-token decode:
    the Result's fields, its charts, and ``save`` writes 06's results file with the notebook's sections."""
    params = parameters.validate(
        preset="tiny",
        device="cpu",
        executors=["eager"],
        depths=[1, 2],
        prompt_lengths=[6],
        decode_tokens=2,
        warmup=1,
        iters=2,
        repeats=2,
        output_dir=str(tmp_path),
    )
    result = scaling.run(params)
    assert result.params is params and result.bandwidth is None
    assert [(r["sweep"], r["step"], r["layers"], r["status"]) for r in result.points] == [
        ("depth, prompt", "prefill", 1, "ok"),
        ("depth", "prefill", 2, "ok"),
        ("decode", "decode", 1, "ok"),
    ]
    assert [r["layers"] for r in result.depth_rows] == [1, 2]
    assert result.prompt_rows == result.points[:1] and result.decode_rows == result.points[2:]
    assert result.fits == scaling_fits.depth_fits(result.depth_rows, result.timed)
    assert result.fits[0]["wall_ms"]["layers"] == [1, 2] and result.fit_rows == scaling_fits.fit_rows(result.fits)
    assert result.key_rows == scaling.key_rows(result.points)
    assert set(result.elapsed) == {"builds", "rounds", "total"}
    assert result.elapsed["builds"] + result.elapsed["rounds"] <= result.elapsed["total"]
    assert result.findings[0].startswith("At 1 layer") and result.findings[-1].startswith("Sweeps took ")
    assert set(result.timed.entries) == {r["key"] for r in result.points}
    depth = charts.draw(scaling.depth_chart(result.depth_rows, result.fits))
    assert len(depth.data) == 4 and depth.layout.yaxis.type == "log"  # measured and fit: wall, host (CPU)
    assert charts.draw(scaling.first_call_chart(result.depth_rows)).data
    assert {t.type for t in charts.draw(scaling.decode_chart(result.decode_rows)).data} == {"bar"}
    assert scaling.floor_chart(result.depth_rows) is None and scaling.prefill_chart(result.prompt_rows) is None
    path = result.save()
    assert path == results.path_for(tmp_path, results.SCALING)
    data = results.load(path)
    assert set(data) == RESULT_KEYS
    assert data["findings"] == result.findings and data["elapsed_s"] == result.elapsed
    assert len(data["points"]) == len(data["key_table"]["rows"]) == 3 and data["bandwidth_measured_GBps"] is None


def test_tiny_run_measures_every_point_in_the_same_rounds(tiny_run):
    data = results.load(tiny_run / f"{results.SCALING}.results.json")
    assert set(data) == RESULT_KEYS
    p = data["params"]
    points = {(r["step"], r["layers"], r["tokens"], r["executor"]): r for r in data["points"]}
    wanted = [("prefill", n, p["seq_len"]) for n in p["depths"]] + [
        ("prefill", p["layers"], t) for t in p["prompt_lengths"]
    ]
    wanted = list(dict.fromkeys(wanted)) + [("decode", p["layers"], 1)]
    assert sorted(points) == sorted((*w, ex) for w in wanted for ex in p["executors"])
    assert len(data["points"]) == len(points)  # the shared point is built and timed once
    shared = points["prefill", p["layers"], p["seq_len"], "eager"]
    assert shared["sweep"] == "depth, prompt"
    ok = [r for r in data["points"] if r["status"] == "ok"]
    # a CPU's Thunder (its catalog entry's cpu_defaults)
    assert {"eager", "torch.compile", "thunder:torch"} <= {r["executor"] for r in ok}
    # every ok point timed in the same rounds: one block per round each, beside one host reference
    rounds = data["rounds"]
    assert {r["key"] for r in ok} == set(rounds)
    assert (
        {len(rec["wall_ms"]) for rec in rounds.values()}
        == {2 * p["repeats"]}
        == {len(data["host_reference"]["per_round_ms"])}
    )
    for r in ok:
        assert r["wall_q1_ms"] <= r["wall_ms"] <= r["wall_q3_ms"] and r["first_call_s"] > 0
        assert 0 <= r["rel_err"] <= model.tolerance(p["dtype"], r["layers"])
        assert r["kernel_ms"] is None and "no device kernels on CPU" in r["notes"]
    deeper = points["prefill", max(p["depths"]), p["seq_len"], "torch.compile"]
    assert deeper["first_call_cache_hits"] == 0  # a fresh per-run cache, and no earlier notebook compiles this graph
    decode = [r for r in ok if r["step"] == "decode"]
    assert decode and all(
        r["prompt_tokens"] == p["seq_len"] and r["decode_tokens"] == p["decode_tokens"] for r in decode
    )
    assert points["decode", p["layers"], 1, "eager"]["tokens_match_eager"] == p["decode_tokens"]
    assert all(r["loop_q1_ms"] <= r["loop_ms"] <= r["loop_q3_ms"] for r in decode)

    fits = {f["executor"]: f for f in data["fits"]}
    assert fits["eager"]["wall_ms"]["layers"] == list(p["depths"])
    table = data["key_table"]
    assert table["columns"] == scaling.KEY_COLUMNS and len(table["rows"]) == len(data["points"])
    findings = data["findings"]
    for n in p["depths"]:
        assert any(f.startswith(f"At {n} layer") for f in findings), n
    assert any(f.startswith(f"Decode at {p['layers']} layer") for f in findings)
    assert any(f.startswith(f"Prefill wall by prompt length at {p['layers']} layer") for f in findings)
    hit = any(r["first_call_cache_hits"] for r in ok if "depth" in r["sweep"])
    assert hit == any("(compile cache hit)" in f for f in findings)
    assert all(r["status"] == "ok" for r in data["points"])  # on a CPU its defaults are what runs there
    assert not any("did not run fully" in f for f in findings)
    assert set(data["elapsed_s"]) == {"builds", "rounds", "total"}
