"""Notebook 03, Thunder's final execution trace per configuration: ``run(params) -> Result``, written by
``Result.save``.

Each configuration's row (``trace_row``) is taken right after its first call: the call's phases
(``first_call_phases``), thunder's compile statistics for it and for a second, cached call, and the final
trace taken apart (``trace_analysis``: fusion regions and their ops, unfused ops, the prologue). The rows
are the ones notebook 02 took from its own builds in this runner run (``from_run``), else one jit per
configuration built here (``build_row``); ``tables`` makes the tables over them.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from ...core import model, registry, results, seed_numbers
from ...core.parameters import SAME_MODEL, Params
from ...core.row_types import TraceSummaryRow
from ...instruments.first_call_phases import first_call_finding, first_call_table
from ...instruments.trace_row import TraceRow, build_row
from ..base import Study, begin, saved
from .tables import counter_table, ok_rows, placement, region_table, stats_table, summary, unfused_table


def from_run(params, names: list[str]) -> list[TraceRow] | None:
    """The rows of ``names`` that notebook 02 took from its own builds (``trace_row`` right after each
    first call) in this runner run, when 02 ran before with the same model and inputs; else None, and
    the caller builds its own."""
    data = results.of_this_run(params.output_dir, results.EXECUTOR_TIMING)
    if data is None or any(data["params"].get(k) != v for k, v in params.to_dict().items() if k in SAME_MODEL):
        return None
    rows = data.get("thunder_rows") or {}
    return [TraceRow.from_dict(rows[n]) for n in names] if all(rows.get(n) for n in names) else None


def _regions(kinds: dict[str, int]) -> str:
    """``9 fusion regions (7 nvFusion, 2 TorchCompile)``."""
    total = sum(kinds.values())
    by_kind = ", ".join(f"{v} {k}" for k, v in kinds.items() if v)
    return f"{total} fusion region{'' if total == 1 else 's'}" + (f" ({by_kind})" if by_kind else "")


def findings(configurations: list[TraceRow], seed_counter: dict[str, int]) -> list[str]:
    """The notebook's findings: fusion regions, unfused ops and top-level symbols of each
    configuration's final trace, beside the seed's counter."""
    seed_kinds = {
        kind: sum(v for k, v in seed_counter.items() if k.startswith(kind)) for kind in ("nvFusion", "TorchCompile")
    }
    seed = f"The seed's thunder trace had {_regions(seed_kinds)} in {sum(seed_counter.values())} top-level symbols."
    ran = [r for r in configurations if r["status"] == "ok"]
    if not ran:
        return ["No Thunder configuration produced a trace here.", seed]
    parts = []
    for r in ran:
        kinds = {k.removesuffix(" regions"): v for k, v in r["composition"].items() if k.endswith(" regions")}
        parts.append(
            f"{r['executor']}: {_regions(kinds)}, {r['composition'].get('unfused ops', 0)} unfused ops, "
            f"{r['bound_symbols']} top-level symbols"
        )
    text = "Final trace per step, " + "; ".join(parts) + "."
    if skipped := [r["executor"] for r in configurations if r["status"] != "ok"]:
        text += f" Not traced here: {', '.join(skipped)}."
    return [text, seed] + ([phases] if (phases := first_call_finding(configurations)) else [])


def composition_long(rows: list[dict]) -> list[dict]:
    """(configuration, category, count) lines for a stacked bar chart; a configuration without a
    trace is one line of count 0 with its status in the label, so it still shows on the axis."""
    out = []
    for r in rows:
        if r["status"] != "ok":
            out.append({"configuration": f"{r['executor']} ({r['status']})", "category": "bookkeeping", "count": 0})
            continue
        for cat, count in r["composition"].items():
            out.append({"configuration": r["executor"], "category": cat, "count": count})
    return out


def composition_figure(rows: list[dict]):
    """Stacked bars (a ``pages.charts.Chart``): the final trace's top-level symbols per configuration, by
    category."""
    from ...pages.charts import Chart

    return Chart(
        kind="bar",
        rows=composition_long(rows),
        x="configuration",
        y="count",
        color="category",
        title="Top-level bound symbols of the final trace (what thunder's Python runs per call)",
        labels={"count": "bound symbols"},
    )


def details_html(summary_text: str, body: str) -> str:
    """A collapsed HTML <details> block with ``body`` as escaped preformatted text."""
    return (
        f"<details><summary>{html.escape(summary_text)}</summary>"
        f"<pre style='font-size:11px;max-height:40em;overflow:auto'>{html.escape(body)}</pre></details>"
    )


SEED_LABEL = "seed: thunder, L40S (reference)"
KEY_COLUMNS = [
    "executor",
    "status",
    "bound_symbols",
    "fusion_regions",
    "unfused_ops",
    "bookkeeping",
    "prologue_bound_symbols",
    "reason",
]


@dataclass(kw_only=True)
class Result(Study):
    """What notebook 03 shows and saves."""

    NOTEBOOK = results.TRACE_COUNTERS
    TITLE = "Final trace composition per Thunder configuration"
    COLUMNS = KEY_COLUMNS

    configurations: list[TraceRow] = saved()  # one row per Thunder configuration (``trace_row``)
    traces_from: str = saved()  # notebook 02's builds in this run, or built here
    seed_counter: dict = saved(
        default_factory=lambda: {"label": SEED_LABEL, "counter": seed_numbers.SEED_TRACE_COUNTER}
    )  # the seed's counter
    summary_rows: list[TraceSummaryRow]  # final trace per configuration (``summary``)
    counter_rows: list[dict]  # the seed's counter beside each configuration's
    region_rows: list[dict]
    placement_rows: list[dict]  # where the seed's ops ended up
    unfused_rows: list[dict]
    stats_rows: list[dict]  # thunder's compile statistics
    first_call_rows: list[dict]  # first call by phase
    traces: list[dict]  # per configuration with a trace: its summary line and the trace's text
    findings: list[str] = saved()

    def key_table_rows(self) -> list[TraceSummaryRow]:
        return self.summary_rows


def run(params: Params) -> Result:
    """The rows of the selected Thunder configurations: the ones notebook 02 took in this runner run
    (``from_run``), else one jit per configuration built here; then the tables over them."""
    env = begin(params)
    configs = [ex for ex in registry.selected(params.executors) if ex.name in registry.THUNDER_NAMES]
    rows = from_run(params, [ex.name for ex in configs])
    source = "notebook 02's builds in this run" if rows is not None else "built here"
    if rows is None:
        setup = model.build(params)
        rows = [build_row(ex, setup.model, setup.kwargs, params.device) for ex in configs]
    return Result(
        params=params,
        env=env,
        configurations=rows,
        traces_from=source,
        summary_rows=summary(rows),
        counter_rows=counter_table(rows, seed_numbers.SEED_TRACE_COUNTER, SEED_LABEL),
        region_rows=region_table(rows),
        placement_rows=placement(rows),
        unfused_rows=unfused_table(rows),
        stats_rows=stats_table(rows),
        first_call_rows=first_call_table(rows),
        traces=[
            {
                "summary": f"{r['executor']}: {r['bound_symbols']} bound symbols, {r['trace_lines']} lines; "
                f"prologue {r['prologue_bound_symbols']} bound symbols, {r['prologue_lines']} lines",
                "trace": r["trace"],
            }
            for r in ok_rows(rows)
        ],
        findings=findings(rows, seed_numbers.SEED_TRACE_COUNTER),
    )
