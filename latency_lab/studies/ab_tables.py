"""Notebook 08's tables, read from its rounds and its workers' records: the key table (per executor,
comparison and metric, the paired change against A, ``paired.change``) and its rows for what could not be
compared; the planted controls, known against found; the in-place parts, paired per round against the A/A
control's; logits against A's; kernels per step of A and B; each worker's build and versions; and each
executor's status per worker.
"""

from __future__ import annotations

from pathlib import Path

from ..core import builds, model, paired
from ..core.harness import Rounds
from ..core.parameters import Params
from .ab_remote import TWIN, A, B, Worker, WorkerError, entry_name, planted_label, usable


def comparisons(name: str, timed: Rounds, params: Params) -> list[tuple[str, str]]:
    """(comparison, the entry read against A) for one executor: B, the A/A control, each planted."""
    whos = [B] if entry_name(name, B) in timed.entries else []
    whos += [TWIN, *(planted_label(p) for p in params.planted_pct)]
    label = {B: "B vs A", TWIN: "A' vs A (A/A control)"}
    return [(label.get(w, f"{w} vs A"), entry_name(name, w)) for w in whos if entry_name(name, w) in timed.entries]


def metrics_for(device: str) -> tuple[str, ...]:
    """The numbers read against A: host and wall time per step (on a CPU the wall is the host time)."""
    return ("host_ms", "wall_ms") if device.startswith("cuda") else ("host_ms",)


def change_rows(timed: Rounds, params: Params, min_effect: dict) -> list[dict]:
    """The key table: per executor, comparison and metric, the paired change against A."""
    rows = []
    for name in params.executors:
        base = timed.entries.get(entry_name(name, A))
        if base is None:
            continue
        for comparison, other in comparisons(name, timed, params):
            t = timed.entries[other]
            for metric in metrics_for(params.device):
                c = paired.change(
                    metric, getattr(base, metric), getattr(t, metric), base.keep(), t.keep(), min_effect.get(metric, 0)
                )
                error = "; ".join(filter(None, (base.error, t.error)))
                rows.append(change_row(name, comparison, metric, c, error))
    return rows


def change_row(name: str, comparison: str, metric: str, c: paired.Change | None, error: str) -> dict:
    status = "ok" if c and not error else "partial" if c else "failed"
    row = {"executor": name, "comparison": comparison, "metric": metric, "status": status, "reason": error or None}
    if c is None:
        return {**row, "reason": error or "no round with both blocks"}
    return {
        **row,
        "a_ms": c.a,
        "b_ms": c.b,
        "ratio_x": c.ratio,
        "ratio_lo_x": c.lo,
        "ratio_hi_x": c.hi,
        "change_pct": c.change_pct,
        "resolution_pct": 100 * c.resolution,
        "p": c.p,
        "verdict": c.text("B" if comparison == "B vs A" else comparison.split(" vs ")[0]),
        "called": c.called,
        "rounds": c.rounds,
        "fast_only": c.fast_only,
    }


def control_rows(table: list[dict], delays: dict, timed: Rounds) -> list[dict]:
    """Each planted delay's host-time row: the delay planted (µs and % of A's host time in these
    rounds), the change found, the estimate's error in percentage points, and whether it was called."""
    out = []
    for r in table:
        if r["metric"] != "host_ms" or "planted" not in r["comparison"] or r.get("ratio_x") is None:
            continue
        pct = float(r["comparison"].split("+ ")[1].split("%")[0])
        us = delays[r["executor"]][pct]
        planted = 100 * us / (r["a_ms"] * 1e3)
        out.append(
            {
                "executor": r["executor"],
                "comparison": r["comparison"],
                "planted_pct_asked": pct,
                "planted_us": us,
                "planted_pct": planted,
                "found_pct": r["change_pct"],
                "error_pp": r["change_pct"] - planted,
                "detected": r["called"] and r["change_pct"] > 0,
                "verdict": r["verdict"],
            }
        )
    return out


def parts_rows(timed: Rounds, params: Params) -> list[dict]:
    """Per Thunder configuration and in-place part: A' against A (the A/A control), and B against A,
    each paired per round (``paired.difference``). A part of B **moved** when its test calls it and
    its whole interval lies beyond the control's interval for the same part (what two workers of build
    A differ by in this run); the control's own rows show what no change looks like, part by part."""
    rows = []
    for name in params.executors:
        a = timed.entries.get(entry_name(name, A))
        if a is None or "parts" not in a.probes:
            continue
        control = {}
        for other in (TWIN, B):
            b = timed.entries.get(entry_name(name, other))
            if b is None:
                continue
            pa, pb = a.probes["parts"], b.probes["parts"]
            reason = next((x.get("reason") for x in pa + pb if "reason" in x), None)
            if reason:
                rows.append({"executor": name, "against": other, "part": None, "reason": reason})
                continue
            n = min(len(pa), len(pb))
            for part in dict.fromkeys([*pa[0]["us"], *pb[0]["us"]] if n else []):
                d = paired.difference(*([x["us"].get(part, 0.0) for x in side[:n]] for side in (pa, pb)))
                if d is None:
                    continue
                if other == TWIN:
                    control[part] = (d["diff_lo_us"], d["diff_hi_us"])
                else:
                    lo, hi = control.get(part, (0.0, 0.0))
                    d["control_lo_us"], d["control_hi_us"] = lo, hi
                    d["moved"] = d["moved"] and (d["diff_lo_us"] > hi or d["diff_hi_us"] < lo)
                rows.append({"executor": name, "against": other, "part": part, **d})
    return rows


def logits_rows(built: dict, params: Params) -> list[dict]:
    """Per executor, A' and B's first-call logits against A's (``model.compare_to_eager``'s tolerance)."""
    import torch

    def logits(label, name):
        r = built[label][name]
        return torch.frombuffer(bytearray(r["logits"]), dtype=torch.float32).reshape(r["shape"])

    rows = []
    for name in params.executors:
        for who in (TWIN, B):
            if not (usable(built, A, name) and usable(built, who, name)):
                continue
            check = model.compare_to_eager(logits(who, name), logits(A, name), "float32", params.layers)
            check = {**check, "tolerance": model.tolerance(params.dtype, params.layers)}
            check["passed"] = check["rel_err"] is not None and check["rel_err"] <= check["tolerance"]
            rows.append({"executor": name, "against": f"{who} vs A", **check})
    return rows


def kernel_rows(workers: dict[str, Worker], built: dict, params: Params) -> list[dict]:
    """Kernels per step and kernel ms per step of each executor in A and B (the profiler), and B - A."""
    rows = []
    who = [w for w in (A, B) if w in workers]
    for name in params.executors:
        row = {"executor": name}
        for w in who:
            if not usable(built, w, name):
                continue
            try:
                k = workers[w].call("kernels", executor=name, steps=max(3, min(params.iters, 10)))
            except WorkerError as e:
                row[f"{w}_reason"] = str(e)
                continue
            if "reason" in k:
                row["reason"] = k["reason"]
                continue
            row[f"{w.lower()}_kernels_per_step"] = k["kernels_per_step"]
            row[f"{w.lower()}_kernel_ms"] = k["kernel_ms"]
        if "b_kernel_ms" in row and "a_kernel_ms" in row:
            row["diff_kernels_per_step"] = row["b_kernels_per_step"] - row["a_kernels_per_step"]
            row["diff_kernel_us"] = 1e3 * (row["b_kernel_ms"] - row["a_kernel_ms"])
        rows.append(row)
    return rows


def build_rows(workers: list[Worker], hello: dict) -> list[dict]:
    """Per worker: what the build is, python and package versions, and each folder's git state."""
    rows = []
    for w in workers:
        h = hello.get(w.label) or {}
        row = {"worker": w.label, "build": w.build.text(), "python": h.get("python"), "error": h.get("error")}
        for dist, info in (h.get("packages") or {}).items():
            row[dist] = info.get("version") or f"missing ({info.get('error')})"
        row["folders"] = [{"folder": f, "git": builds.git_state(f)} for f in w.build.path]
        row["git"] = "; ".join(git_text(f["folder"], f["git"]) for f in row["folders"] if f["git"]) or None
        rows.append(row)
    return rows


def git_text(folder: str, git: dict) -> str:
    """A folder's git state in a few words: ``lightning-thunder at 1a2b3c4d5e (my-branch, with changes)``."""
    changes = ", with changes" if git["dirty"] else ""
    return f"{Path(folder).name} at {git['commit'][:10]} ({git['branch']}{changes})"


def executor_rows(workers: list[Worker], built: dict, params: Params) -> list[dict]:
    """Per executor and worker: its status and reason (a worker that did not build: its error)."""
    rows = []
    for name in params.executors:
        for w in workers:
            r = built.get(w.label) or {}
            record = r.get(name) or {"status": "failed", "reason": r.get("error") or w.error or "not built"}
            rows.append(
                {
                    "executor": name,
                    "worker": w.label,
                    "status": record["status"],
                    "reason": record.get("reason"),
                    "first_call_s": record.get("first_call_s"),
                }
            )
    return rows


def failed_entries(params: Params, built: dict, workers: dict) -> list[dict]:
    """Key-table rows for what could not be compared: an executor A could not run (one row), else
    each other worker that could not run it, with the reason."""
    rows = []
    for name in params.executors:
        for who in workers:
            if usable(built, who, name):
                continue
            r = (built.get(who) or {}).get(name) or {}
            status = r.get("status") or "failed"
            reason = r.get("reason") or (built.get(who) or {}).get("error") or "not built"
            rows.append(
                {"executor": name, "comparison": f"{who} build", "metric": None, "status": status, "reason": reason}
            )
            if who == A:
                break
    return rows
