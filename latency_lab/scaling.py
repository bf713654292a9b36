"""Notebook 06's sweeps: how wall, host and kernel time, kernels per step and first-call time grow
with depth and prompt length; the decode step and a greedy decode loop; least-squares fixed cost
per call + cost per layer; each point against its memory-bandwidth floor.

At every point each executor is built afresh (``executors.prepare``: its first call is the point's
trace + compile time), measured with the suite's timing functions, then freed (``release``: del, gc,
CUDA cache) before the next is built, so 16 layers x every executor do not run out of memory; the
CUDA memory left after each release is in its row. Wall times are blocks of one executor at a time
(notebook 02 interleaves executors; a sweep would have to keep every compiled object alive to do
that). A point that fails or is unavailable is a row with its reason, and the sweep goes on.
"""

from __future__ import annotations

import gc
from dataclasses import replace

import numpy as np
import torch

from . import model as llama, timing
from .tables import number
from .executor_timing import build_and_measure, check_output

METRICS = {"wall_ms": "wall", "host_ms": "host", "kernel_ms": "kernel"}  # fitted against depth
GRAPH_VARIANTS = ("torch.compile:reduce-overhead", "thunder:cudagraphs", "thunder.compile:reduce-overhead")
PAIRS = (("thunder", "torch.compile"), ("thunder:cudagraphs", "torch.compile:reduce-overhead"),
         ("thunder.compile:reduce-overhead", "torch.compile:reduce-overhead"))  # compared in the cost paragraph


def release(prepared: dict, device: str) -> None:
    """Free the compiled objects of ``prepared`` before the next executor is built. Dynamo is not
    reset (``executors.DYNAMO_RECOMPILE_LIMIT`` says why): its entries for a freed model stay, but
    are never called again."""
    for p in prepared.values():
        p.fn = p.output = None
    prepared.clear()
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def allocated_mib(device: str) -> float | None:
    """CUDA memory still allocated (MiB), to show that freed executors leave nothing behind."""
    return torch.cuda.memory_allocated(device) / 2**20 if device.startswith("cuda") else None


def step_methods(kwargs: dict, params, reference_logits) -> dict:
    """Per executor, in order: its first call's logits against eager's (``check_output``: a mismatch
    fails the row), wall (``event_timer``: warm-up, then ``repeats`` blocks of ``iters`` calls;
    CUDA-graph recordings happen in its warm-up), kernels per step and kernel time
    (``profile_kernels``), host submit time (``host_submit``), each in its own calls."""
    device = params.device
    return {
        "output": lambda p: check_output(p, reference_logits, params.dtype, params.layers),
        "wall": lambda p: timing.event_timer(p.fn, kwargs, device, params.warmup, params.iters, params.repeats),
        "kernels": lambda p: timing.profile_kernels(p.fn, kwargs, device, max(3, min(params.iters, 10))),
        "host": lambda p: timing.host_submit(p.fn, kwargs, device, params.iters),
    }


def point_row(p, measured: dict, sweep: str, layers: int, tokens: int, floor_ms: float | None) -> dict:
    """One executor at one point: status and reason, first call, its logits' error against eager's,
    wall / host / kernel time with their spread, kernels per step, the bandwidth floor and the wall's ratio to it."""
    wall, kernels, host, output = (measured.get(k) or {} for k in ("wall", "kernels", "host", "output"))
    wall_ms = wall.get("median")
    row = p.row(sweep=sweep, layers=layers, tokens=tokens, first_call_s=p.first_call_s, rel_err=output.get("rel_err"),
                wall_ms=wall_ms, wall_iqr_ms=wall.get("iqr"), blocks=wall.get("n"), wall_method=wall.get("method"),
                host_ms=host.get("median"), host_iqr_ms=host.get("iqr"),
                kernel_ms=kernels.get("kernel_ms_per_step"), kernels_per_step=kernels.get("kernels_per_step"),
                floor_ms=floor_ms, floor_ratio=wall_ms / floor_ms if wall_ms and floor_ms else None,
                allocated_after_mib=None)
    if kernels.get("reason"):
        row["notes"] = "; ".join(filter(None, (row["notes"], kernels["reason"])))
    return row


def measure_point(executors, setup: llama.Setup, sweep: str, bandwidth: float | None) -> list[dict]:
    """Every executor at one configuration (``setup``), one after another, each freed after."""
    prm = setup.params
    print(f"{sweep}: {prm.layers} layers, {prm.seq_len} tokens", flush=True)
    floor = llama.bandwidth_floor(setup, bandwidth)["floor_ms_measured"]
    reference = llama.logits_of(setup.model(**setup.kwargs)).detach().clone()
    rows = []
    for ex in executors:
        prepared, measured = build_and_measure([ex], setup, step_methods(setup.kwargs, prm, reference), prm.device)
        rows.append(point_row(prepared[ex.name], measured.get(ex.name, {}), sweep, prm.layers, prm.seq_len, floor))
        release(prepared, prm.device)
        rows[-1]["allocated_after_mib"] = allocated_mib(prm.device)
    return rows


def depth_sweep(params, executors, bandwidth: float | None) -> list[dict]:
    """``params.depths`` layers at ``params.seq_len`` tokens; a new model per depth."""
    rows = []
    for layers in params.depths:
        setup = llama.build(replace(params, layers=layers))
        rows += measure_point(executors, setup, "depth", bandwidth)
        del setup
        release({}, params.device)
    return rows


def prompt_sweep(params, executors, bandwidth: float | None, depth_rows: list[dict]) -> list[dict]:
    """``params.prompt_lengths`` tokens at ``params.layers`` layers, one model for all lengths. The
    point the depth sweep already measured (same layers and tokens) is reused, not measured again."""
    setup, rows = llama.build(params), []
    for tokens in params.prompt_lengths:
        same = [r for r in depth_rows if (r["layers"], r["tokens"]) == (params.layers, tokens)]
        if same:
            rows += [{**r, "sweep": "prompt", "notes": "; ".join(filter(None, (r["notes"], "measured once, in the depth sweep")))}
                     for r in same]
            continue
        prm = replace(params, seq_len=tokens)
        rows += measure_point(executors, llama.Setup(prm, setup.config, setup.model,
                                                     llama.make_kwargs(prm, setup.config, prm.device)), "prompt", bandwidth)
    del setup
    release({}, params.device)
    return rows


def decode_sweep(params, executors, bandwidth: float | None) -> list[dict]:
    """The decode step (one token at ``cache_position=[seq_len]`` against a ``StaticCache``
    pre-filled with ``seq_len`` prompt tokens) per executor, then a greedy loop of
    ``decode_tokens`` tokens: its time per output token, tokens per second, and how many of its
    tokens agree with eager's greedy tokens from the first on. Every executor gets its own freshly
    pre-filled cache."""
    setup, prompt, new = llama.build(params), params.seq_len, params.decode_tokens
    step_params = replace(params, seq_len=1, cache_mode="static")  # the floor: one token, cache written
    floor = llama.bandwidth_floor(llama.Setup(step_params, setup.config, setup.model, {}), bandwidth)["floor_ms_measured"]
    reference = _tokens(llama.greedy_decode(setup.model, llama.build_decode(setup, prompt, new), new))
    print(f"decode: {params.layers} layers, prompt {prompt} tokens, {new} new tokens", flush=True)
    rows = []
    for ex in executors:
        decode = llama.build_decode(setup, prompt, new)
        step_reference = llama.logits_of(setup.model(**decode.kwargs)).detach().clone()  # re-writes the same slot
        methods = step_methods(decode.kwargs, step_params, step_reference)
        methods["decode loop"] = lambda p, d=decode: timing.event_timer(
            lambda: llama.greedy_decode(p.fn, d, new), {}, params.device, 1, 1, params.repeats)
        methods["tokens"] = lambda p, d=decode: {"generated": _tokens(llama.greedy_decode(p.fn, d, new))}
        prepared, measured = build_and_measure(
            [ex], llama.Setup(step_params, setup.config, setup.model, decode.kwargs), methods, params.device)
        m = measured.get(ex.name, {})
        row = point_row(prepared[ex.name], m, "decode", params.layers, 1, floor)
        row.update(prompt_tokens=prompt, **decode_numbers(m.get("decode loop"), new, params.batch_size),
                   tokens_match_eager=_agreement(m.get("tokens"), reference))
        release(prepared, params.device)
        row["allocated_after_mib"] = allocated_mib(params.device)
        rows.append(row)
    del setup
    release({}, params.device)
    return rows


def _tokens(generated: list[torch.Tensor]) -> list[list[int]]:
    return torch.cat(generated, dim=1).tolist()


def _agreement(measured: dict | None, reference: list[list[int]]) -> int | None:
    """How many generated tokens, from the first on, equal eager's (all sequences of the batch)."""
    if not measured:
        return None
    agree = 0
    for got, ref in zip(zip(*measured["generated"]), zip(*reference)):
        if got != ref:
            break
        agree += 1
    return agree


def decode_numbers(loop: dict | None, tokens: int, batch_size: int) -> dict:
    """Time per output token (loop median / tokens, and its IQR) and tokens per second
    (batch x tokens / loop median) from the decode loop's timer record."""
    if not loop:
        return {"decode_tokens": tokens, "loop_ms": None, "tpot_ms": None, "tpot_iqr_ms": None, "tokens_per_s": None}
    return {"decode_tokens": tokens, "loop_ms": loop["median"], "tpot_ms": loop["median"] / tokens,
            "tpot_iqr_ms": loop["iqr"] / tokens, "tokens_per_s": batch_size * tokens / (loop["median"] / 1e3)}


def fit_line(xs, ys) -> dict:
    """Least-squares line ``y = intercept + slope * x``: its coefficients, the residual of each
    point (y - fitted), their root mean square and the number of points."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.ndim != 1 or x.shape != y.shape or len(np.unique(x)) < 2:
        raise ValueError(f"fit_line needs one y per x and at least two distinct x values, got xs={list(xs)} ys={list(ys)}")
    (intercept, slope), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(x), x]), y, rcond=None)
    residuals = y - (intercept + slope * x)
    residuals[np.abs(residuals) <= 1e-12 * np.abs(y).max()] = 0.0  # rounding noise of an exact fit
    return {"intercept": float(intercept), "slope": float(slope), "residuals": residuals.tolist(),
            "rms_residual": float(np.sqrt(np.mean(residuals ** 2))), "n": int(len(x))}


def depth_fits(rows: list[dict]) -> list[dict]:
    """Per executor of the depth sweep, for wall, host and kernel time: fixed cost per call (ms at
    0 layers) and cost per layer (ms), fitted over its ok points; a metric with fewer than two
    depths gets no fit, and the row says why."""
    fits = []
    for name in dict.fromkeys(r["executor"] for r in rows):
        mine = [r for r in rows if r["executor"] == name]
        ok = [r for r in mine if r["status"] == "ok"]
        fit = {"executor": name, "label": mine[0]["label"], "depths": [r["layers"] for r in ok], "reason": None}
        for key, metric in METRICS.items():
            points = [(r["layers"], r[key]) for r in ok if r[key] is not None]
            line = fit_line(*zip(*points)) if len({x for x, _ in points}) >= 2 else None
            fit[metric] = line and {**line, "layers": [x for x, _ in points]}
        if not ok:
            fit["reason"] = next((r["reason"] for r in mine if r["reason"]), "no ok point")
        elif fit["wall"] is None:
            fit["reason"] = "fewer than two depths measured"
        fits.append(fit)
    return fits


def fit_rows(fits: list[dict]) -> list[dict]:
    """The fits as flat rows: fixed (ms), per layer (ms) and RMS residual (ms) per metric."""
    rows = []
    for f in fits:
        row = {"executor": f["executor"], "label": f["label"]}
        for metric in METRICS.values():
            line = f[metric] or {}
            row.update({f"{metric}_fixed_ms": line.get("intercept"), f"{metric}_per_layer_ms": line.get("slope"),
                        f"{metric}_rms_residual_ms": line.get("rms_residual")})
        rows.append({**row, "depths": ", ".join(map(str, f["depths"])), "reason": f["reason"]})
    return rows


KEY_COLUMNS = ["executor", "wall fixed (ms)", "wall / layer (ms)", "host fixed (ms)", "host / layer (ms)",
               "kernel fixed (ms)", "kernel / layer (ms)", "decode step (ms)", "per output token (ms)", "tokens / s", "reason"]


def key_rows(fits: list[dict], decode_rows: list[dict]) -> list[dict]:
    """The run index's table: per executor its fitted costs and its decode numbers."""
    decode = {r["executor"]: r for r in decode_rows}
    rows = []
    for f in fit_rows(fits):
        d = decode.get(f["executor"], {})
        rows.append({"executor": f["executor"], **{f"{m} {part} (ms)": f[f"{m}_{key}_ms"] for m in METRICS.values()
                                                   for part, key in (("fixed", "fixed"), ("/ layer", "per_layer"))},
                     "decode step (ms)": d.get("wall_ms"), "per output token (ms)": d.get("tpot_ms"),
                     "tokens / s": d.get("tokens_per_s"), "reason": f["reason"] or d.get("reason")})
    return rows


def fitted_curve(fits: list[dict], metric: str = "wall") -> list[dict]:
    """Points of each executor's fitted line at its measured depths (for charts beside the data)."""
    return [{"executor": f["executor"], "layers": x, "ms": f[metric]["intercept"] + f[metric]["slope"] * x}
            for f in fits if f[metric] for x in f[metric]["layers"]]


def table(rows: list[dict], columns: dict[str, str]) -> list[dict]:
    """Rows for ``display.frame``: ``columns`` maps a header (with its unit) to a row key; the values
    stay numbers, which the frame shows to 3 significant figures, blanks for missing ones."""
    return [{header: r.get(key) for header, key in columns.items()} for r in rows]


def _ms(value) -> str:
    return f"{number(value)} ms"


def _line(fit: dict) -> str:
    """'fixed + per layer/layer ms' of a fitted line, with the slope's sign."""
    sign = "-" if fit["slope"] < 0 else "+"
    return f"{number(fit['intercept'])} {sign} {number(abs(fit['slope']))}/layer ms"


def _versus(a: str, fa: dict, b: str, fb: dict) -> str:
    """``a`` minus ``b`` as a line in layers, and whether the difference grows or shrinks with depth."""
    diff = {"intercept": fa["intercept"] - fb["intercept"], "slope": fa["slope"] - fb["slope"]}
    trend = "grows" if diff["slope"] * (diff["intercept"] + diff["slope"]) > 0 else "shrinks"
    return (f"{a} - {b} = {_line(diff)}: fixed {_ms(fa['intercept'])} vs {_ms(fb['intercept'])}, per layer "
            f"{_ms(fa['slope'])} vs {_ms(fb['slope'])}; by these fits the difference {trend} with depth.")


def cost_text(fits: list[dict]) -> str:
    """Fixed and per-layer wall costs of every executor; Thunder against torch.compile, with and
    without CUDA graphs (``PAIRS``)."""
    by = {f["executor"]: f for f in fits}
    fitted = [f for f in fits if f["wall"]]
    if not fitted:
        return "No executor has a depth fit (fewer than two depths measured, or none ran)."
    depths = ", ".join(map(str, sorted({x for f in fitted for x in f["wall"]["layers"]})))
    parts = [f"{f['executor']} {_line(f['wall'])} (RMS residual {_ms(f['wall']['rms_residual'])})"
             for f in fitted if f["executor"] not in GRAPH_VARIANTS]
    graphs = [f"{f['executor']} {_line(f['wall'])}" for f in fitted if f["executor"] in GRAPH_VARIANTS]
    text = f"Wall time per call = fixed + per layer x layers, least squares over depths {depths}: {'; '.join(parts)}."
    if graphs:
        text += f" With CUDA graphs: {'; '.join(graphs)}."
    for a, b in PAIRS:
        if by.get(a) and by.get(b) and by[a]["wall"] and by[b]["wall"]:
            text += " " + _versus(a, by[a]["wall"], b, by[b]["wall"])
    missing = [f"{f['executor']} ({f['reason']})" for f in fits if not f["wall"]]
    if missing:
        text += f" No fit: {'; '.join(missing)}."
    return text


def host_kernel_text(fits: list[dict]) -> str | None:
    """Per-layer host and kernel costs where both were fitted (kernel time needs a GPU)."""
    both = [f for f in fits if f["host"] and f["kernel"]]
    if not both:
        return None
    return "Per layer, host vs kernel time: " + "; ".join(
        f"{f['executor']} {_ms(f['host']['slope'])} host, {_ms(f['kernel']['slope'])} kernel "
        f"(fixed {_ms(f['host']['intercept'])} host, {_ms(f['kernel']['intercept'])} kernel)" for f in both) + "."


def prefill_text(rows: list[dict]) -> str:
    """Wall time at the shortest and longest prompt, per executor."""
    parts = []
    for name in dict.fromkeys(r["executor"] for r in rows):
        ok = sorted((r for r in rows if r["executor"] == name and r["status"] == "ok" and r["wall_ms"]), key=lambda r: r["tokens"])
        if len(ok) >= 2:
            parts.append(f"{name} {_ms(ok[0]['wall_ms'])} at {ok[0]['tokens']} -> {_ms(ok[-1]['wall_ms'])} at {ok[-1]['tokens']} tokens "
                         f"(x{number(ok[-1]['wall_ms'] / ok[0]['wall_ms'])})")
    return "Prefill wall time by prompt length: " + ("; ".join(parts) if parts else "fewer than two lengths measured") + "."


def decode_text(rows: list[dict]) -> str:
    """Decode step latency, time per output token and tokens per second, per executor."""
    ok = [r for r in rows if r["status"] == "ok" and r["wall_ms"] is not None]
    if not ok:
        return "No executor completed the decode step here."
    r0 = ok[0]
    parts = [f"{r['executor']} {_ms(r['wall_ms'])} per step, {_ms(r['tpot_ms'])} per output token, "
             f"{number(r['tokens_per_s'])} tokens/s" for r in ok]
    return (f"Decode ({r0['layers']} layer{'s' if r0['layers'] > 1 else ''}, prompt {r0['prompt_tokens']} tokens, StaticCache; loop of {r0['decode_tokens']} "
            f"greedy tokens): {'; '.join(parts)}.")


def first_call_text(rows: list[dict]) -> str:
    """First call (trace + compile + run) against depth, per executor, with its least-squares line
    (seconds at 0 layers and per layer, and the RMS residual) where three or more depths ran."""
    parts = []
    for name in dict.fromkeys(r["executor"] for r in rows):
        ok = [r for r in rows if r["executor"] == name and r["status"] == "ok" and number(r["first_call_s"])]
        if ok:
            text = f"{name} " + ", ".join(f"{number(r['first_call_s'])} s at {r['layers']}" for r in ok)
            if len({r["layers"] for r in ok}) >= 3:
                line = fit_line([r["layers"] for r in ok], [r["first_call_s"] for r in ok])
                sign = "+" if line["slope"] >= 0 else "-"
                text += (f" ({number(line['intercept'])} s {sign} {number(abs(line['slope']))} s per layer, "
                         f"RMS residual {number(line['rms_residual'])} s)")
            parts.append(text)
    return "First call (trace + compile + run) by layers: " + ("; ".join(parts) if parts else "none ran") + "."


def not_ok_text(rows: list[dict]) -> str | None:
    """The points that did not run, with their reasons (each reason once)."""
    bad = [r for r in rows if r["status"] != "ok"]
    if not bad:
        return None
    reasons = dict.fromkeys(f"{r['executor']}: {r['status']} ({r['reason']})" for r in bad)
    return f"{len(bad)} of {len(rows)} points did not run: " + "; ".join(reasons) + "."
