"""Notebook 06's findings: sentences over the rows (every depth's points, prefill by prompt length, decode
and its greedy tokens, first calls, the points that did not run) and the depth fits (cost per layer,
host against kernel, Thunder against torch.compile), with ratios taken within rounds."""

from __future__ import annotations

from ...core.harness import Rounds
from ...core.metrics import Stat
from ...core.rounds import host_moved_note, state_text
from ...pages.tables import number
from .fits import fit_line, negative_flag, plus_minus, slope_difference
from .rows import DepthFit

FIRST_CALL_FIT_DEPTHS = 3  # cold first calls at this many depths or more get a line
# Compared within rounds at every depth and in decode: (a, b) reads "a / b".
PAIRS = (
    ("thunder", "torch.compile"),
    ("thunder:cudagraphs", "torch.compile:reduce-overhead"),
    ("thunder.compile:reduce-overhead", "torch.compile:reduce-overhead"),
)


def rows_of_sweep(table: list[dict], name: str) -> list[dict]:
    """The rows of sweep ``name``."""
    return [r for r in table if name in r["sweep"].split(", ")]


def _ms(value) -> str:
    return f"{number(value)} ms"


def n_layers(n: int) -> str:
    return f"{n} layer{'s' if n != 1 else ''}"


def _line(line: dict, unit: str = "ms") -> str:
    """``fixed + per layer``: the slope with its interval from the blocks where measured, else ± SE."""
    if line.get("slope_lo") is not None:
        per_layer = (
            f"{number(line['slope'])} {unit} (interval {number(line['slope_lo'])} to {number(line['slope_hi'])})"
        )
    else:
        per_layer = plus_minus(line["slope"], line["slope_se"], unit)
    return f"{plus_minus(line['intercept'], line['intercept_se'], unit)} + {per_layer} per layer"


def versus_text(a: str, fa: dict, b: str, fb: dict, depths: list[int]) -> str:
    """``a`` against ``b`` by their depth fits: the per-layer difference with its standard error, and
    whether the difference grows or shrinks with depth, said only when it exceeds twice its error."""
    d = slope_difference(fa, fb)
    at_first = d["intercept"] + d["slope"] * min(depths)
    if "lo" in d:
        text = f"{a} − {b}: {number(d['slope'])} ms per layer (interval {number(d['lo'])} to {number(d['hi'])})"
        if not d["resolved"]:
            return text + " (not resolved: the interval includes zero)."
        trend = "grows" if d["slope"] * at_first > 0 else "shrinks"
        return text + f": the difference {trend} with depth (the interval excludes zero)."
    text = f"{a} − {b}: {'+' if d['slope'] >= 0 else '−'}{plus_minus(abs(d['slope']), d['se'], 'ms')} per layer"
    if d["resolved"] is None:
        return text + " (not resolved: two depths give no standard error)."
    if not d["resolved"]:
        return text + " (not resolved: within twice its standard error)."
    trend = "grows" if d["slope"] * at_first > 0 else "shrinks"
    return text + f": the difference {trend} with depth (more than twice its standard error)."


def cost_text(fits: list[DepthFit], seq_len: int) -> str:
    """Wall time = fixed + per layer x layers per executor, with standard errors and RMS residual; a
    negative per-layer cost flagged; Thunder against torch.compile (``PAIRS``) by the fits."""
    fitted = [f for f in fits if f.wall_ms]
    if not fitted:
        return (
            f"No depth fit of the prefill ({seq_len} tokens): fewer than two depths measured per executor "
            "(the measured points are in the key table and the sentences above)."
        )
    depths = sorted({x for f in fitted for x in f.wall_ms["layers"]})
    parts = []
    for f in fitted:
        line = f.wall_ms
        flag = negative_flag("wall", line, "ms")
        fit = (
            f"RMS residual {_ms(line['rms_residual'])}"
            if line["slope_se"] is not None
            else "two depths: an exact line, no standard error"
        )
        parts.append(f"{f.executor}: {flag}" if flag else f"{f.executor} {_line(line)} ({fit})")
    text = (
        f"Wall time of the prefill ({seq_len} tokens) = fixed + per layer × layers, least squares over "
        f"{', '.join(map(str, depths))} layers: {'; '.join(parts)}."
    )
    by = {f.executor: f.wall_ms for f in fitted}
    text += "".join(f" {versus_text(a, by[a], b, by[b], depths)}" for a, b in PAIRS if a in by and b in by)
    missing = [f"{f.executor} ({f.reason})" for f in fits if not f.wall_ms]
    return text + (f" No fit: {'; '.join(missing)}." if missing else "")


def host_kernel_text(fits: list[DepthFit], seq_len: int) -> str | None:
    """Per-layer host and kernel costs where both were fitted (kernel time needs a GPU); negatives flagged."""
    both = [f for f in fits if f.host_ms and f.kernel_ms]
    if not both:
        return None
    parts = []
    for f in both:
        flags = [
            flag
            for flag in (negative_flag("host", f.host_ms, "ms"), negative_flag("kernel", f.kernel_ms, "ms"))
            if flag
        ]
        parts.append(
            f"{f.executor} "
            + (
                "; ".join(flags)
                if flags
                else f"{plus_minus(f.host_ms['slope'], f.host_ms['slope_se'], 'ms')} host, "
                f"{plus_minus(f.kernel_ms['slope'], f.kernel_ms['slope_se'], 'ms')} kernel"
            )
        )
    return f"Per layer of the prefill ({seq_len} tokens), host vs kernel time: {'; '.join(parts)}."


def _ratio(timed: Rounds, a: dict, b: dict) -> tuple[str, Stat] | None:
    """``x1.23 within rounds, q1–q3 x1.20–x1.26``: row ``a`` over row ``b``, both timed in the same
    rounds, and the ratio; None when the rounds hold no ratio."""
    r = timed.ratio(a["key"], b["key"])
    if r is None:
        return None
    return f"x{number(r.median)} within rounds, q1–q3 x{number(r.q1)}–x{number(r.q3)}", r


def _moved(timed: Rounds, ratios: list[Stat]) -> str:
    """``rounds.host_moved_note`` for the smallest difference a sentence reports (said once)."""
    return host_moved_note(timed, min(abs(r.median - 1) for r in ratios)) if ratios else ""


def _point_part(r: dict) -> str:
    """An executor's point: wall, then host time (where it differs: on a CPU it is the wall), kernel time
    and first call."""
    extra = [
        f"host {_ms(r['host_ms'])}" if r["host_ms"] not in (None, r["wall_ms"]) else None,
        f"kernel {_ms(r['kernel_ms'])}" if r["kernel_ms"] is not None else None,
        f"first call {number(r['first_call_s'])} s" if r["first_call_s"] is not None else None,
    ]
    extra = [e for e in extra if e]
    return f"{r['executor']} {_ms(r['wall_ms'])} wall" + (f" ({', '.join(extra)})" if extra else "")


def pairs_text(at: list[dict], timed: Rounds) -> str:
    """The ``PAIRS`` among ``at`` (rows of one point), as within-round ratios."""
    by = {r["executor"]: r for r in at if r["wall_ms"] is not None}
    found = [
        (f"{a} / {b} ({x[0]})", x[1]) for a, b in PAIRS if a in by and b in by if (x := _ratio(timed, by[a], by[b]))
    ]
    return f" {'; '.join(t for t, _ in found)}{_moved(timed, [r for _, r in found])}." if found else ""


def depth_text(depth_rows: list[dict], layers: int, timed: Rounds) -> str:
    """Every executor at one depth of the prefill: wall, host, kernel time and first call, and the
    ``PAIRS`` within rounds; the points that did not run, with their status."""
    at = [r for r in depth_rows if r["layers"] == layers]
    ran = sorted((r for r in at if r["wall_ms"] is not None), key=lambda r: r["wall_ms"])
    head = f"At {n_layers(layers)} (prefill, {at[0]['tokens']} tokens)" if at else f"At {n_layers(layers)}"
    if not ran:
        return f"{head}: no executor measured."
    missing = [f"{r['executor']} {r['status']}" for r in at if r["wall_ms"] is None]
    return (
        f"{head}: {'; '.join(_point_part(r) for r in ran)}."
        + (f" Not measured: {', '.join(missing)}." if missing else "")
        + pairs_text(at, timed)
    )


def prefill_text(prompt_rows: list[dict], timed: Rounds) -> str:
    """Per executor: prefill wall at the shortest and the longest prompt, and their ratio within rounds."""
    layers = prompt_rows[0]["layers"] if prompt_rows else 0
    parts, ratios = [], []
    for name in dict.fromkeys(r["executor"] for r in prompt_rows):
        ok = sorted(
            (r for r in prompt_rows if r["executor"] == name and r["wall_ms"] is not None), key=lambda r: r["tokens"]
        )
        if len(ok) >= 2 and (found := _ratio(timed, ok[-1], ok[0])):
            ratios.append(found[1])
            parts.append(
                f"{name} {_ms(ok[0]['wall_ms'])} at {ok[0]['tokens']} → {_ms(ok[-1]['wall_ms'])} at "
                f"{ok[-1]['tokens']} tokens ({found[0]})"
            )
    text = "; ".join(parts) if parts else "fewer than two lengths measured per executor"
    return f"Prefill wall by prompt length at {n_layers(layers)}: {text}{_moved(timed, ratios)}."


def decode_text(decode_rows: list[dict], timed: Rounds) -> str:
    """Decode step, time per output token and tokens per second per executor; ``PAIRS`` within rounds."""
    ok = [r for r in decode_rows if r["wall_ms"] is not None]
    if not ok:
        return "No executor completed the decode step here."
    r0 = ok[0]
    parts = [
        f"{r['executor']} {_ms(r['wall_ms'])} per step"
        + (
            f"; the loop {_ms(r['tpot_ms'])} per output token, {number(r['tokens_per_s'])} tokens/s"
            if r["tpot_ms"]
            else ""
        )
        for r in ok
    ]
    return (
        f"Decode at {n_layers(r0['layers'])} (prompt {r0['prompt_tokens']} tokens, StaticCache; the step timed "
        f"in rounds, and a greedy loop of {r0['decode_tokens']} tokens): {'; '.join(parts)}."
        + pairs_text(decode_rows, timed)
        + tokens_text(ok)
    )


def tokens_text(decode_rows: list[dict]) -> str:
    """How many greedy tokens of each executor equal eager's, from the first, and what the first
    difference is: a near-tie of eager's own logits (bf16 reorderings flip those) or a real gap."""
    judged = [r for r in decode_rows if r.get("tokens_match_eager") is not None and r["executor"] != "eager"]
    if not judged:
        return ""
    parts = []
    for r in judged:
        part = f"{r['executor']} {r['tokens_match_eager']} of {r['decode_tokens']}"
        if r.get("divergence_ulps") is not None:
            kind = (
                "an exact tie in eager's own logits"
                if r["divergence_ulps"] == 0
                else "a near-tie"
                if r["near_tie"]
                else "not a near-tie: check this executor's output"
            )
            margin = number(r["divergence_ulps"])
            part += f" (where they first differ, eager's margin between the two tokens is {margin} ulps: {kind})"
        parts.append(part)
    return f" Greedy tokens equal to eager's, from the first: {'; '.join(parts)}."


def first_call_text(depth_rows: list[dict]) -> str:
    """First call against depth per executor, each marked when a compile cache was hit during it, with a
    least-squares line over the cold ones where ``FIRST_CALL_FIT_DEPTHS`` or more depths were cold; a
    negative slope is flagged, never printed as a result."""
    parts = []
    for name in dict.fromkeys(r["executor"] for r in depth_rows):
        ran = [r for r in depth_rows if r["executor"] == name and r["first_call_s"] is not None]
        if not ran:
            continue
        cold = [r for r in ran if r["first_call_cache_hits"] == 0]
        text = f"{name} " + ", ".join(
            f"{number(r['first_call_s'])} s at {r['layers']}" + ("" if r in cold else " (compile cache hit)")
            for r in ran
        )
        if len({r["layers"] for r in cold}) >= FIRST_CALL_FIT_DEPTHS:
            line = fit_line([r["layers"] for r in cold], [r["first_call_s"] for r in cold])
            flag = negative_flag("the first call", line, "s")
            text += (
                f" ({flag})"
                if flag
                else (f" (cold compiles: {_line(line, 's')}, RMS residual {number(line['rms_residual'])} s)")
            )
        elif len(cold) < len(ran):
            text += (
                f" (no line: compile caches were hit, {len(cold)} cold of {len(ran)}, so a fit would be meaningless)"
            )
        parts.append(text)
    tokens = depth_rows[0]["tokens"] if depth_rows else "?"
    return (
        f"First call (trace + compile + run) of the prefill ({tokens} tokens) by layers: "
        + ("; ".join(parts) if parts else "none ran")
        + "."
    )


def not_ok_text(table: list[dict]) -> str | None:
    """The points that did not run fully, with their reasons (each reason once)."""
    bad = [r for r in table if r["status"] != "ok"]
    if not bad:
        return None
    reasons = dict.fromkeys(f"{r['executor']} at {n_layers(r['layers'])}: {r['status']} ({r['reason']})" for r in bad)
    return f"{len(bad)} of {len(table)} points did not run fully: " + "; ".join(reasons) + "."


def findings(table: list[dict], fits: list[DepthFit], timed: Rounds, params) -> list[str]:
    """Every depth's measured points, the depth fits, host vs kernel per layer, prefill by prompt
    length, decode, first calls, the host's drift and the points that did not run."""
    depth_rows = rows_of_sweep(table, "depth")
    texts = [depth_text(depth_rows, n, timed) for n in params.depths]
    texts += [
        cost_text(fits, params.seq_len),
        host_kernel_text(fits, params.seq_len),
        prefill_text(rows_of_sweep(table, "prompt"), timed),
        decode_text(rows_of_sweep(table, "decode"), timed),
        first_call_text(depth_rows),
        state_text(timed),
        not_ok_text(table),
    ]
    return [t for t in texts if t]
