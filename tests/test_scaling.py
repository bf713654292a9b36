"""Notebook 06 and latency_lab.scaling: the least-squares fit on synthetic data, the decode builder
against a recompute without cache, and an end-to-end tiny CPU run of the sweeps through runner.py."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from latency_lab import display, model as llama, parameters as P, results, scaling
from conftest import run_runner

CPU_EXECUTORS = ("eager", "torch.compile", "thunder:torch")  # must be ok on a CPU


def test_fit_line_recovers_known_intercept_and_slope():
    rng = np.random.default_rng(0)
    xs = np.array([1, 2, 4, 8, 16], dtype=float)
    noise = rng.normal(0, 0.01, xs.size)
    fit = scaling.fit_line(xs, 0.25 + 0.125 * xs + noise)
    assert fit["intercept"] == pytest.approx(0.25, abs=0.03) and fit["slope"] == pytest.approx(0.125, abs=0.005)
    fitted = fit["intercept"] + fit["slope"] * xs
    np.testing.assert_allclose(fit["residuals"], 0.25 + 0.125 * xs + noise - fitted, atol=1e-12)
    assert fit["rms_residual"] == pytest.approx(np.sqrt(np.mean(np.square(fit["residuals"]))))
    assert abs(sum(fit["residuals"])) < 1e-9 and fit["n"] == 5  # least squares with an intercept

    exact = scaling.fit_line([1, 2, 4], [3.0, 5.0, 9.0])
    assert (exact["intercept"], exact["slope"]) == pytest.approx((1.0, 2.0)) and exact["residuals"] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("xs, ys", [([4], [1.0]), ([2, 2], [1.0, 2.0]), ([1, 2], [1.0])])
def test_fit_line_rejects_underdetermined_input(xs, ys):
    with pytest.raises(ValueError, match="two distinct x values"):
        scaling.fit_line(xs, ys)


def _row(executor, layers, status="ok", wall=None, host=None, kernel=None, reason=None):
    return {"executor": executor, "label": executor, "status": status, "reason": reason, "layers": layers,
            "wall_ms": wall, "host_ms": host, "kernel_ms": kernel}


def test_depth_fits_per_metric_and_reasons():
    rows = [_row("a", n, wall=0.5 + 0.25 * n, host=0.4 + 0.2 * n) for n in (1, 2, 4)]
    rows += [_row("b", 1, wall=1.0), _row("b", 2, status="failed", reason="first call: boom")]
    rows += [_row("c", n, status="unavailable", reason="needs a CUDA device") for n in (1, 2)]
    fits = {f["executor"]: f for f in scaling.depth_fits(rows)}
    assert fits["a"]["wall"]["intercept"] == pytest.approx(0.5) and fits["a"]["wall"]["slope"] == pytest.approx(0.25)
    assert fits["a"]["host"]["slope"] == pytest.approx(0.2) and fits["a"]["kernel"] is None
    assert fits["b"]["wall"] is None and fits["b"]["reason"] == "fewer than two depths measured"
    assert fits["c"]["wall"] is None and fits["c"]["reason"] == "needs a CUDA device"
    flat = {r["executor"]: r for r in scaling.fit_rows(list(fits.values()))}
    assert flat["a"]["wall_per_layer_ms"] == pytest.approx(0.25) and flat["a"]["depths"] == "1, 2, 4"
    text = scaling.cost_text(list(fits.values()))
    assert "a 0.500 + 0.250/layer ms (RMS residual 0 ms)" in text and "No fit: b (fewer than two depths measured)" in text


def test_first_call_text_fits_seconds_per_layer():
    rows = [{"executor": "thunder", "status": "ok", "layers": n, "first_call_s": 3.0 + 2.0 * n} for n in (1, 2, 4)]
    rows += [{"executor": "torch.compile", "status": "ok", "layers": n, "first_call_s": s} for n, s in ((1, 10.0), (2, 9.0), (4, 9.5))]
    rows += [{"executor": "torch.compile", "status": "failed", "layers": 8, "first_call_s": 99.0},
             {"executor": "eager", "status": "ok", "layers": 1, "first_call_s": 0.01},
             {"executor": "eager", "status": "ok", "layers": 2, "first_call_s": float("nan")}]
    assert scaling.first_call_text(rows) == (
        "First call (trace + compile + run) by layers: thunder 5.00 s at 1, 7.00 s at 2, 11.0 s at 4 "
        "(3.00 s + 2.00 s per layer, RMS residual 0 s); torch.compile 10.0 s at 1, 9.00 s at 2, 9.50 s at 4 "
        "(9.75 s - 0.107 s per layer, RMS residual 0.386 s); eager 0.0100 s at 1.")


def test_paper_table_three_significant_figures_and_blanks():
    rows = scaling.table([{"x": 1234.5, "y": None, "z": 0.012345, "s": "ok", "n": float("nan")}],
                         {"x (ms)": "x", "y (ms)": "y", "z (s)": "z", "status": "s", "n": "n"})
    assert rows == [{"x (ms)": 1234.5, "y (ms)": None, "z (s)": 0.012345, "status": "ok", "n": rows[0]["n"]}]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", display.frame(rows)._repr_html_())
    assert cells == ["1,230", "", "0.0123", "ok", ""]  # as the notebook shows them: no NaN, units in the headers


def test_decode_builder_and_greedy_loop_match_a_recompute_without_cache():
    params = P.validate(preset="tiny", device="cpu", dtype="float32")
    setup = llama.build(params)
    decode = llama.build_decode(setup, prompt_len=5, new_tokens=4)
    kw = decode.kwargs
    assert kw["cache_position"].tolist() == [5] and tuple(kw["input_ids"].shape) == (1, 1)
    assert kw["past_key_values"] is decode.cache and kw["use_cache"] is True and decode.max_cache_len == 9

    seen = []  # each step's (input id, position, last logits), recorded by a wrapper of the model

    def model(**kwargs):
        out = setup.model(**kwargs)
        seen.append((kwargs["input_ids"].item(), kwargs["cache_position"].item(), out.logits[0, -1].clone()))
        return out

    generated = torch.cat(llama.greedy_decode(model, decode, 4), dim=1)
    assert [s[1] for s in seen] == [5, 6, 7, 8]  # one position per token
    ids = torch.cat([llama.token_ids(P.validate(preset="tiny", seq_len=5), 1024), kw["input_ids"]], dim=1)
    for step, (token, _, logits) in enumerate(seen):
        assert token == ids[0, -1].item()
        full = setup.model(input_ids=ids, use_cache=False).logits[0, -1]
        torch.testing.assert_close(logits, full, rtol=1e-4, atol=1e-4)
        ids = torch.cat([ids, full.argmax().view(1, 1)], dim=1)
    assert generated[0].tolist() == ids[0, -4:].tolist()
    with pytest.raises(ValueError, match="free positions"):
        llama.greedy_decode(setup.model, decode, 5)


def test_sweeps_end_to_end_on_cpu(tmp_path):
    executors = (*CPU_EXECUTORS, "thunder")  # thunder (nvFuser) is unavailable on a CPU: a row with its reason
    proc = run_runner("--preset", "tiny", "--device", "cpu", "--notebooks", "06", "--output-dir", str(tmp_path),
                      "--run-id", "r", "-p", "depths=[1,2]", "-p", "prompt_lengths=[1,6]", "-p", "decode_tokens=3",
                      "-p", f"executors={','.join(executors)}", timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = results.load(tmp_path / "r" / "06_scaling.results.json")
    points = data["points"]
    assert data["params"]["depths"] == [1, 2] and data["params"]["decode_tokens"] == 3
    key = {(r["sweep"], r["layers"], r["tokens"], r["executor"]): r for r in points}
    expected = [("depth", 1, 6), ("depth", 2, 6), ("prompt", 1, 1), ("prompt", 1, 6), ("decode", 1, 1)]
    assert sorted(key) == sorted((*point, ex) for point in expected for ex in ["eager", "torch.compile", "thunder", "thunder:torch"])
    for (sweep, _, _, name), r in key.items():
        if name == "thunder":
            assert r["status"] == "unavailable" and "CUDA" in r["reason"] and r["wall_ms"] is None
            continue
        assert r["status"] == "ok", r
        assert r["wall_ms"] > 0 and r["wall_iqr_ms"] >= 0 and r["host_ms"] > 0 and r["first_call_s"] > 0
        assert 0 <= r["rel_err"] <= llama.tolerance(data["params"]["dtype"], r["layers"])
        assert r["blocks"] == data["params"]["repeats"] and r["wall_method"] == "perf_counter"
        assert r["kernel_ms"] is None and "no device kernels on CPU" in r["notes"]
        if sweep == "decode":
            assert r["prompt_tokens"] == 6 and r["decode_tokens"] == 3 and r["tokens_match_eager"] in range(4)
            assert r["tpot_ms"] == pytest.approx(r["loop_ms"] / 3)
            assert r["tokens_per_s"] == pytest.approx(3 / (r["loop_ms"] / 1e3))
    assert key[("prompt", 1, 6, "eager")]["wall_ms"] == key[("depth", 1, 6, "eager")]["wall_ms"]  # measured once
    assert key[("decode", 1, 1, "eager")]["tokens_match_eager"] == 3

    fits = {f["executor"]: f for f in data["fits"]}
    for name in CPU_EXECUTORS:
        wall = fits[name]["wall"]
        rows = [key[("depth", n, 6, name)] for n in (1, 2)]
        assert wall["layers"] == [1, 2] and wall["slope"] == pytest.approx(rows[1]["wall_ms"] - rows[0]["wall_ms"])
        assert fits[name]["host"] and fits[name]["kernel"] is None
    assert fits["thunder"]["wall"] is None and "CUDA" in fits["thunder"]["reason"]
    findings = data["findings"]
    assert findings[0].startswith("Wall time per call = fixed + per layer") and "thunder:torch" in findings[0]
    assert any(f.startswith("Decode (1 layer, prompt 6 tokens") for f in findings)
    assert any("did not run" in f and "thunder: unavailable" in f for f in findings)
    table = data["key_table"]
    assert table["columns"] == scaling.KEY_COLUMNS
    eager = dict(zip(table["columns"], next(r for r in table["rows"] if r[0] == "eager")))
    assert eager["wall / layer (ms)"] == pytest.approx(fits["eager"]["wall"]["slope"])
    assert eager["per output token (ms)"] == pytest.approx(key[("decode", 1, 1, "eager")]["tpot_ms"])
    assert set(data["elapsed_s"]) == {"depth", "prompt", "decode", "total"}


def test_cost_text_compares_thunder_with_torch_compile_from_the_fits():
    rows = [_row(name, n, wall=fixed + per_layer * n)
            for name, fixed, per_layer in (("torch.compile", 0.4, 0.3), ("thunder", 1.5, 0.9),
                                           ("torch.compile:reduce-overhead", 0.1, 0.05), ("thunder:cudagraphs", 0.3, 0.04))
            for n in (1, 2, 4)]
    text = scaling.cost_text(scaling.depth_fits(rows))
    assert "thunder - torch.compile = 1.10 + 0.600/layer ms" in text and "difference grows with depth" in text
    assert "With CUDA graphs: torch.compile:reduce-overhead 0.100 + 0.0500/layer ms" in text
    assert "thunder:cudagraphs - torch.compile:reduce-overhead = 0.200 - 0.0100/layer ms" in text
    assert "difference shrinks with depth" in text
