"""Notebook 07, the levers: what each remedy the seed proposes does to Thunder-nvFuser's step, measured
against the baseline in the same rounds; rows, key table, findings and the counterfactual, all from
``run(params) -> Result``, written by ``Result.save``.

A lever is a registry entry (``registry.LEVERS``: one compile option changed); ``thunder:torchcompile``
(a fusion executor that takes the linears) and ``thunder:cudagraphs`` (the known cure) can stand beside
them (02 times them by default). Each configuration's row: its output check, fusion regions and symbols
of its final trace, kernels and kernel time, wall and steady-state host time (interleaved rounds with
the baseline), and its host time taken apart in place (``thunder_breakdown.InSitu``), so each lever's
saving lands on the part it is meant to shrink (``savings``). The best levers are then combined and timed
again beside the baseline and torch.compile at every depth asked for; the counterfactual model and the
sentences are ``findings``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...core import harness, registry, results, sweep
from ...core.harness import Rounds
from ...core.measurement import Measurement
from ...core.metrics import Stat
from ...core.parameters import Params
from ...core.row_types import CombinationRow, LeverRow
from ...instruments import thunder_breakdown
from ...instruments.probes import breakdowns, insitu_probes
from ...instruments.thunder_breakdown import CallRow
from ...instruments.trace_row import trace_row
from ...pages.tables import number
from ..base import Study, begin, rounds_text, saved, written
from .findings import counterfactual, findings
from .rows import ConfigurationRow, CounterfactualRow, LeverPartRow
from .savings import BASELINE, REFERENCE, best_levers, host_saved, part_deltas, saved_per_reference, saving_verdict

# Remedies the seed names for which thunder 0.2.6 has no switch: rows with their reason.
NO_SWITCH = {
    "triu in nvFuser": "the seed asks nvFuser to take torch.triu; thunder 0.2.6 has no compile option for it",
    "RoPE in nvFuser": "the seed found RoPE blocked by an nvFuser bug; thunder 0.2.6 has no compile option for it",
}
KEY_COLUMNS = [
    "executor",
    "options",
    "lever",
    "nvfusion_regions",
    "other_regions",
    "bound_symbols",
    "kernels_per_step",
    "wall_ms",
    "host_ms",
    "host_per_ref_x",
    "host_saved_us",
    "host_saved_lo_us",
    "host_saved_hi_us",
    "host_saved_per_ref_x",
    "saving",
    "status",
    "reason",
]


def baseline_first(executors: list) -> list:
    """The configurations in registry order with the baseline first: the others are read against its trace."""
    return sorted(executors, key=lambda ex: ex.name != BASELINE)


def unsupported(p: Measurement) -> Measurement:
    """A lever whose first call this Thunder refuses (an option it rejects or cannot trace) is not a
    broken run but a finding: such a ``p`` comes back ``unavailable``, the error kept as the reason;
    any other ``p`` comes back as it is."""
    if not (p.executor.lever and p.status == "failed" and (p.reason or "").startswith("first call: ")):
        return p
    why = p.reason.removeprefix("first call: ")
    return replace(p, status="unavailable", reason=f"this Thunder cannot run {options_text(p.executor)}: {why}")


def options_text(ex) -> str | None:
    """The compile options ``ex`` passes, as ``key=value`` text, or None."""
    return ", ".join(f"{k}={v!r}" for k, v in ex.options.items()) or None


def regions_of(trace: dict | None) -> tuple[int | None, int | None, int | None]:
    """(nvFusion regions, other fusion regions, top-level symbols) of a configuration's final trace."""
    comp = (trace or {}).get("composition")
    if not comp:
        return None, None, None
    nv = comp.get("nvFusion regions", 0)
    other = sum(v for k, v in comp.items() if k.endswith(" regions")) - nv
    return nv, other, trace.get("bound_symbols")


def nothing_to_move(trace: dict | None, ops: tuple[str, ...]) -> bool:
    """Whether none of ``ops`` runs outside a fusion in a configuration's final trace."""
    unfused = (trace or {}).get("unfused") or {}
    return bool(trace) and not any(any(op in name for op in ops) for name in unfused)


def row(p: Measurement, timed: Rounds, taken_apart: dict[str, dict], floor_ms: float | None) -> LeverRow:
    """One configuration: options and lever, its trace's regions and symbols, kernels, wall and host
    time (same rounds as the baseline), the host time it saves per step and where the saving lands."""
    kernels = p.record("kernels")
    nv, other, symbols = regions_of(p.steps.get("trace"))
    s = host_saved(timed, p.name) if p.name != BASELINE else None
    verdict, p_value = saving_verdict(timed, p.name) if p.name != BASELINE else (None, None)
    deltas = part_deltas(taken_apart, p.name) if p.name != BASELINE else {}
    largest = max(deltas.items(), key=lambda kv: abs(kv[1])) if deltas else None
    return LeverRow.of(
        p,
        kernel_ms=kernels.get("kernel_ms"),
        kernels_per_step=kernels.get("kernels_per_step"),
        options=options_text(p.executor),
        lever=p.executor.lever,
        nvfusion_regions=nv,
        other_regions=other,
        bound_symbols=symbols,
        host_saved_us=s,
        host_saved_per_ref_x=saved_per_reference(timed, p.name) if s else None,
        saving=verdict,
        saving_p=p_value,
        largest_change=f"{largest[0]} {number(largest[1])} µs" if largest else None,
        floor_ms=floor_ms,
    )


def lever_rows(chosen: list) -> list[ConfigurationRow]:
    """Each configuration with the options it passes and its lever, then the remedies without a switch."""
    return [ConfigurationRow(ex.name, options_text(ex), ex.lever, ex.summary) for ex in chosen] + [
        ConfigurationRow(r["executor"], status=r["status"], reason=r["reason"]) for r in no_switch_rows()
    ]


def no_switch_rows() -> list[dict]:
    """The remedies without a switch (``NO_SWITCH``), as unavailable rows with their reason."""
    return [{"executor": name, "status": "unavailable", "reason": why} for name, why in NO_SWITCH.items()]


def breakdown_rows(taken_apart: dict[str, dict]) -> list[LeverPartRow]:
    """Per configuration and in-place part (``thunder_breakdown.part_rows``), its µs per call and the change
    against the baseline."""
    out = []
    for n, b in taken_apart.items():
        if "phases" not in b:
            continue
        deltas = part_deltas(taken_apart, n) if n != BASELINE else {}
        out += [LeverPartRow(r.executor, r.part, r.us, deltas.get(r.part)) for r in thunder_breakdown.part_rows(n, b)]
    return out


def alone_regions(measured: dict[str, Measurement], kwargs: dict, device: str, calls: int) -> list[CallRow]:
    """The baseline's regions run alone (``thunder_breakdown.alone``), for their kernel counts (the
    counterfactual's kernels)."""
    p = measured.get(BASELINE)
    if not (p and p.ok and thunder_breakdown.jit_parts(p.fn)):
        return []
    return thunder_breakdown.alone(p.fn, kwargs, device, calls, BASELINE)


def combination_stage(best: list[str], measured: dict[str, Measurement], case: sweep.Case, params, plan: harness.Plan):
    """The best levers in one configuration, timed in new rounds beside the baseline and the reference
    at every depth of ``params.depths`` (the lever rounds' depth reuses their builds; other depths are
    built as a sweep and freed after). Returns (rows, depth by entry, floor by depth)."""
    combined = registry.combination(best)
    first = harness.build_and_measure([combined], case.module, case.kwargs, plan, params.device)
    kept = {n: measured[n] for n in (BASELINE, REFERENCE) if n in measured}
    stage = {f"{n} @ layers={params.layers}": p for n, p in {**first, **kept}.items()}
    entries = [harness.Entry(k, p.fn, case.kwargs) for k, p in stage.items() if p.ok]
    floor_of = {params.layers: case.floor_ms}
    deeper = [d for d in params.depths if d != params.layers]
    built = []
    if deeper:
        executors = [registry.REGISTRY[BASELINE], combined, registry.REGISTRY[REFERENCE]]
        built = sweep.build(
            sweep.Sweep(
                "depth", {"layers": tuple(deeper)}, executors, lambda point: sweep.model_case(replace(params, **point))
            ),
            params,
        )
        entries += [harness.Entry(b.key, b.measured.fn, b.case.kwargs) for b in built if b.measured.ok]
        stage.update({b.key: b.measured for b in built})
        floor_of.update({b.point["layers"]: b.case.floor_ms for b in built})
    timed = harness.rounds(entries, params.device, params.warmup, params.iters, params.repeats)
    depth_of = {k: int(k.rsplit("=", 1)[1]) for k in stage}
    rows = [combination_row(k, p, timed, depth_of, combined.name) for k, p in harness.settled(stage, timed).items()]
    sweep.release(built, params.device)
    return rows, depth_of, floor_of


def combination_row(key: str, p: Measurement, timed: Rounds, depth_of: dict[str, int], combined: str) -> CombinationRow:
    """One entry of the combination rounds: wall and host time, and its within-round wall ratio to the
    baseline and to the reference at the same depth."""
    depth = depth_of[key]

    def versus(other: str) -> Stat | None:
        return timed.ratio(key, f"{other} @ layers={depth}") if p.name != other else None

    return CombinationRow.of(
        p,
        key=key,
        layers=depth,
        combined=p.name == combined,
        vs_baseline_x=versus(BASELINE),
        vs_reference_x=versus(REFERENCE),
    )


def build(chosen: list, case: sweep.Case, plan: harness.Plan, device: str) -> dict[str, Measurement]:
    """Build and measure the baseline, then every other configuration unless its baseline's trace leaves
    it nothing to move (``nothing_to_move``); a lever this Thunder refuses is ``unavailable``."""
    measured = harness.build_and_measure(chosen[:1], case.module, case.kwargs, plan, device)
    base_trace = measured[BASELINE].steps.get("trace") if BASELINE in measured else None
    rest = []
    for ex in chosen[1:]:
        if ex.name == "thunder:nv-embedding" and nothing_to_move(base_trace, ("embedding",)):
            measured[ex.name] = Measurement(
                ex,
                "unavailable",
                reason="nothing to move: embedding already runs inside an "
                "nvFuser region in the baseline (thunder ignores nv_enable_embedding)",
            )
        else:
            rest.append(ex)
    more = harness.build_and_measure(rest, case.module, case.kwargs, plan, device)
    return {n: unsupported(p) for n, p in {**measured, **more}.items()}


@dataclass
class Result(Study):
    """Notebook 07's run: the tables it shows and saves, its findings and the lever rounds; the
    configurations' and the combination's rows as ``LeverRow``s and ``CombinationRow``s (``table`` and
    ``combination``: as the results file holds them)."""

    NOTEBOOK = results.LEVERS
    TITLE = "Levers against Thunder-nvFuser (same rounds)"
    COLUMNS = KEY_COLUMNS

    findings: list[str] = saved()
    # the key table: one ``row`` per configuration, same rounds; the file adds the remedies without a switch
    configurations: list[LeverRow] = saved("rows", write=lambda rows: written(rows) + no_switch_rows())
    breakdown: dict[str, dict] = saved()
    counterfactual: list[CounterfactualRow] = saved()  # ``findings.counterfactual``
    combined: list[CombinationRow] = saved("combination")  # ``combination_stage``
    regions: list[CallRow] = saved()  # ``alone_regions``
    timed: Rounds = saved()
    levers: list[ConfigurationRow]  # the configurations and the remedies without a switch (``lever_rows``)
    parts: list[LeverPartRow]  # ``breakdown_rows``

    @property
    def table(self) -> list[dict]:
        """One row per configuration, as the results file holds it."""
        return written(self.configurations)

    @property
    def combination(self) -> list[dict]:
        """The combination rounds' rows, as the results file holds them."""
        return written(self.combined)

    def key_table_rows(self) -> list[dict]:
        return self.table


GPU_ANSWER = f"the GPU answer is in outputs/reference-h100 ({results.LEVERS})"


def nothing_to_set_beside(chosen: list, device: str) -> str | None:
    """Why no lever can be measured on ``device`` (the baseline cannot run here, or no lever can), or
    None. Decided from availability (``Executor.check``), before anything is built."""
    missing = {ex.name: ex.check(device) for ex in chosen}
    base = missing.get(BASELINE, ("unavailable", "not asked for"))
    levers = [ex.name for ex in chosen if ex.lever and not missing[ex.name]]
    if base is None and levers:
        return None
    why = f"the baseline {BASELINE} cannot run here ({base[1]})" if base else "no lever can run here"
    return f"Nothing measured on {device}: {why}; {GPU_ANSWER}."


def skipped(params: Params, env: dict, chosen: list, why: str) -> Result:
    """07 where ``nothing_to_set_beside`` says why: every configuration a row with its reason, nothing
    built or timed, and that one sentence as the finding."""
    print(why)
    measured = []
    for ex in chosen:
        status, reason = ex.check(params.device) or ("unavailable", "not run: no lever to set it beside here")
        measured.append(Measurement(ex, status, reason=reason))
    timed = Rounds({}, [], "none", params.warmup, params.iters, 0)
    return Result(
        params=params,
        env=env,
        levers=lever_rows(chosen),
        configurations=[row(p, timed, {}, None) for p in measured],
        breakdown={},
        parts=[],
        regions=[],
        counterfactual=[],
        combined=[],
        findings=[why],
        timed=timed,
    )


def run(params: Params) -> Result:
    """Build every configuration, time them in the same rounds each taken apart in place, model the
    counterfactual, and time the best levers combined at every depth (module docstring)."""
    env = begin(params)
    chosen = baseline_first(registry.selected(params.executors))
    if why := nothing_to_set_beside(chosen, params.device):
        return skipped(params, env, chosen, why)
    case = sweep.model_case(params)
    print(
        f"device {params.device} · {params.layers} layer(s) · {rounds_text(params)} · "
        f"combination at depths {', '.join(map(str, params.depths))}"
    )
    plan = harness.standard_plan(case.kwargs, params, trace=trace_row, check=case.check)
    measured = build(chosen, case, plan, params.device)
    probes, insitu, not_taken_apart = insitu_probes(measured, case.kwargs, params.iters)
    measured, timed = harness.time_in_rounds(measured, case.kwargs, params, probes)
    taken_apart = {
        **breakdowns(insitu, timed),
        **{n: {"reason": why} for n, why in not_taken_apart.items()},
    }
    table = [row(p, timed, taken_apart, case.floor_ms) for p in measured.values()]
    regions = alone_regions(measured, case.kwargs, params.device, params.iters)
    base_kernel_ms = measured[BASELINE].record("kernels").get("kernel_ms") if BASELINE in measured else None
    model_rows = counterfactual(taken_apart, regions, timed, base_kernel_ms, case.floor_ms)
    best = best_levers(table)
    combo_rows, depth_of, floor_of = combination_stage(best, measured, case, params, plan) if best else ([], {}, {})
    return Result(
        params=params,
        env=env,
        levers=lever_rows(chosen),
        configurations=table,
        breakdown=taken_apart,
        parts=breakdown_rows(taken_apart),
        regions=regions,
        counterfactual=model_rows,
        combined=combo_rows,
        findings=findings(table, timed, model_rows, combo_rows, depth_of, floor_of),
        timed=timed,
    )
