"""The run page's headline chart: wall time per step per executor from the timing notebook's results,
split into host (CPU overhead) and kernel time, beside the seed's DGX H100 table on a GPU run of the
seed preset."""

from __future__ import annotations

import json
from pathlib import Path

from ..core import results
from ..pages import tables

TIMING_NOTEBOOK = results.EXECUTOR_TIMING  # its results give the headline chart and the seed tables
HOST, KERNEL, UNSPLIT = "host: CPU overhead (wall - kernel time)", "kernel time", "wall (no kernel time on a CPU)"
COLORS = {HOST: "#e4872d", KERNEL: "#3b6fb6", UNSPLIT: "#9a9a9a"}


def timing_results(run_dir: Path, summary: dict) -> dict | None:
    """The timing notebook's results, when it ran in this run and wrote them."""
    if not any(n["name"] == TIMING_NOTEBOOK and "results" in n["files"] for n in summary["notebooks"]):
        return None
    try:
        return results.load(results.path_for(run_dir, TIMING_NOTEBOOK))
    except (OSError, ValueError):
        return None


def seed_step(timing: dict) -> bool:
    """Whether a timing run measured the seed's step on a GPU (the only runs shown beside the seed's)."""
    p = timing.get("params") or {}
    return str(p.get("device", "")).startswith("cuda") and p.get("preset") == "seed"


def headline_figure(timing: dict, device: str) -> dict:
    """Wall time per step per executor, split into host (CPU overhead = wall - kernel time) and kernel
    time; on a GPU run of the seed preset the seed's DGX H100 table beside it, one panel each (one
    scale when within 10x). Other runs' steps are not the seed's: they get their own panel alone."""
    from ..core.registry import REGISTRY
    from ..core.seed_numbers import SEED_NSIGHT_DGX_H100 as seed

    here = sorted((r for r in timing.get("rows", []) if r.get("wall_ms") is not None), key=lambda r: r["wall_ms"])
    beside = seed_step(timing)
    order = list(dict.fromkeys([*(r["executor"] for r in here), *(seed["rows"] if beside else ())]))
    labels = {**{n: REGISTRY[n].label for n in order if n in REGISTRY}, **{r["executor"]: r["label"] for r in here}}
    cols = seed["columns"]
    panels = [
        (
            {r["executor"]: _parts(r) for r in here},
            f"here: {device}, preset {timing.get('params', {}).get('preset', '?')}",
        )
    ]
    if beside:
        panels.insert(
            0,
            (
                {
                    n: {HOST: v[cols.index("cpu_overhead_ms")], KERNEL: v[cols.index("kernel_ms")]}
                    for n, v in seed["rows"].items()
                },
                f"seed: {seed['gpu']}, {seed['method']}",
            ),
        )
    return _figure(panels, order, labels)


def _parts(row: dict) -> dict[str, float]:
    """A timing row's wall time split into host and kernel time; the wall unsplit where it has no kernel time."""
    if row.get("kernel_ms") is not None:
        return {HOST: row["wall_ms"] - row["kernel_ms"], KERNEL: row["kernel_ms"]}
    return {UNSPLIT: row["wall_ms"]}


def _figure(panels: list[tuple[dict, str]], order: list[str], labels: dict[str, str]) -> dict:
    """The panels (per executor its parts, and a title) side by side, stacked bars in ``order``, one y
    scale when their tallest bars are within 10x; as plotly's JSON."""
    from plotly.subplots import make_subplots

    tops = [max((sum(p.values()) for p in parts.values()), default=0) for parts, _ in panels]
    shared = min(tops) > 0 and max(tops) / min(tops) < 10
    fig = make_subplots(
        rows=1,
        cols=len(panels),
        shared_yaxes=shared,
        horizontal_spacing=0.08,
        subplot_titles=[title for _, title in panels],
    )
    shown = set()
    for col, (parts, _) in enumerate(panels, 1):
        _add_panel(fig, col, parts, order, labels, shown)
    fig.update_yaxes(title_text="ms per step")
    fig.update_layout(
        barmode="stack",
        height=460,
        margin={"t": 80, "b": 40},
        title="Wall time per step: host (CPU overhead) and kernel time",
        legend={"orientation": "h", "y": -0.25},
    )
    return json.loads(fig.to_json())


def _add_panel(fig, col: int, parts: dict, order: list[str], labels: dict[str, str], shown: set) -> None:
    """Panel ``col``: one bar trace per part (in the legend once, ``shown`` holding those already there)
    and each executor's total above its bar."""
    import plotly.graph_objects as go

    for part in (KERNEL, HOST, UNSPLIT):
        names = [n for n in order if part in parts.get(n, {})]
        if not names:
            continue
        fig.add_trace(
            go.Bar(
                x=[labels[n] for n in names],
                y=[parts[n][part] for n in names],
                name=part,
                legendgroup=part,
                showlegend=part not in shown,
                marker_color=COLORS[part],
                hovertemplate="%{x}: %{y:.3g} ms<extra>" + part + "</extra>",
            ),
            row=1,
            col=col,
        )
        shown.add(part)
    names = [n for n in order if n in parts]
    totals = [sum(parts[n].values()) for n in names]
    fig.add_trace(
        go.Scatter(
            x=[labels[n] for n in names],
            y=totals,
            text=[tables.number(t) for t in totals],
            mode="text",
            textposition="top center",
            showlegend=False,
            hoverinfo="skip",
        ),
        row=1,
        col=col,
    )
    fig.update_xaxes(categoryorder="array", categoryarray=[labels[n] for n in order if n in parts], row=1, col=col)
