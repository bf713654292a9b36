"""One step (or any labelled call) under ``torch.profiler``, read back from its Chrome trace as plain
spans, and the timeline metrics of the host-overhead notebook.

Every profiled call runs inside ``record_function("latency_lab|<label>|<i>")`` with the device
drained after it, so a call's window on the host is its annotation and its kernels are the ones that
start between that annotation's start and the next one's. The metrics work on ``Span`` lists, so the
GPU-only logic is tested on CPU with fake events.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from dataclasses import dataclass
from typing import Callable

from ..core.phases import phase
from ..core.timing import device_event_kind, sync

MARK = "latency_lab"  # prefix of the annotation around each profiled call

# Chrome-trace category -> span kind. Device kinds run on the GPU; the rest on a host thread.
KIND_BY_CATEGORY = {
    "cpu_op": "cpu_op",
    "user_annotation": "annotation",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "gpu_user_annotation": "gpu_annotation",
}
DEVICE_KINDS = frozenset({"kernel", "memcpy", "memset", "gpu_annotation"})
HOST_KINDS = frozenset({"cpu_op", "annotation", "runtime"})


@dataclass(frozen=True)
class Span:
    """One profiler event: its name, kind (``KIND_BY_CATEGORY``), times in µs, the CUDA correlation id
    that ties a kernel to the runtime call that launched it, and its host thread."""

    name: str
    kind: str
    start_us: float
    end_us: float
    correlation: int | None = None
    tid: object = None

    @property
    def dur_us(self) -> float:
        return self.end_us - self.start_us


def is_kernel(span: Span) -> bool:
    """A device kernel: not a memcpy/memset and not a user annotation's device range (torch.compile
    wraps each compiled graph in one), by the suite's one filter (``timing.device_event_kind``)."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    event = SimpleNamespace(
        device_type=DeviceType.CUDA, key=span.name, is_user_annotation=span.kind == "gpu_annotation"
    )
    return span.kind == "kernel" and device_event_kind(event) == "kernel"


def spans_from_chrome(trace: dict) -> list[Span]:
    """The complete ('X') events of an exported Chrome trace whose category this module knows."""
    spans = []
    for e in trace.get("traceEvents", []):
        kind = KIND_BY_CATEGORY.get(e.get("cat"))
        if e.get("ph") != "X" or kind is None:
            continue
        start = float(e["ts"])
        spans.append(
            Span(
                e.get("name", ""),
                kind,
                start,
                start + float(e.get("dur", 0.0)),
                (e.get("args") or {}).get("correlation"),
                e.get("tid"),
            )
        )
    return spans


@phase("profile")
def profile_calls(calls: list[tuple[str, Callable]], device: str, repeat: int) -> dict:
    """Run each ``(label, fn)`` ``repeat`` times under the profiler (CPU, and CUDA on a GPU), each call
    in its own annotation with the device drained after it; the Chrome trace as a dict."""
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    sync(device)
    with profile(activities=activities) as prof:
        for label, fn in calls:
            for i in range(repeat):
                with record_function(f"{MARK}|{label}|{i}"):
                    fn()
                sync(device)
    fd, path = tempfile.mkstemp(suffix=".trace.json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f)
    finally:
        os.unlink(path)


def write_chrome_trace(trace: dict, w: "Window", path) -> None:
    """Save the part of ``trace`` that covers window ``w`` (its call and its kernels) as a gzipped
    Chrome trace that Perfetto and chrome://tracing open; metadata events are kept."""
    end = max([w.call.end_us] + [s.end_us for s in w.device])
    keep = [
        e
        for e in trace.get("traceEvents", [])
        if "ts" not in e or (float(e["ts"]) <= end and float(e["ts"]) + float(e.get("dur", 0)) >= w.call.start_us)
    ]
    with gzip.open(path, "wt") as f:
        json.dump({**trace, "traceEvents": keep}, f)


@dataclass(frozen=True)
class Window:
    """One profiled call: its annotation (the host side) and the spans that belong to it."""

    label: str
    repeat: int
    call: Span
    host: list[Span]  # host spans on the call's thread inside its annotation
    device: list[Span]  # device spans that start between this annotation and the next
    runtime: list[Span]  # CUDA runtime/driver calls on any thread inside the annotation


def windows(spans: list[Span]) -> list[Window]:
    """The profiled calls of ``profile_calls``, in time order, with their spans."""
    import bisect

    ordered = sorted(spans, key=lambda s: s.start_us)
    starts = [s.start_us for s in ordered]
    marks = [s for s in ordered if s.kind == "annotation" and s.name.startswith(MARK + "|")]
    out = []
    for k, mark in enumerate(marks):
        until = marks[k + 1].start_us if k + 1 < len(marks) else float("inf")
        after = ordered[bisect.bisect_left(starts, mark.start_us) : bisect.bisect_left(starts, until)]
        inside = [s for s in after if s is not mark and s.end_us <= mark.end_us]
        _, label, i = mark.name.split("|", 2)
        out.append(
            Window(
                label,
                int(i),
                mark,
                host=[s for s in inside if s.kind in HOST_KINDS and s.tid == mark.tid],
                device=[s for s in after if s.kind in DEVICE_KINDS],
                runtime=[s for s in inside if s.kind == "runtime"],
            )
        )
    return out


def top_level(spans: list[Span]) -> list[Span]:
    """The spans not nested in another of ``spans`` (events of one thread nest properly)."""
    out: list[Span] = []
    for s in sorted(spans, key=lambda s: (s.start_us, -s.end_us)):
        if not out or s.start_us >= out[-1].end_us:
            out.append(s)
    return out


def union_us(spans: list[Span]) -> float:
    """Time covered by at least one of ``spans`` (overlaps counted once)."""
    total, end = 0.0, float("-inf")
    for s in sorted(spans, key=lambda s: s.start_us):
        if s.end_us > end:
            total += s.end_us - max(s.start_us, end)
            end = s.end_us
    return total


def window_metrics(w: Window) -> dict:
    """Host time of the call, where its host time went by top-level kind, and on a GPU: kernels, their
    device time, time from the call to the first kernel, GPU idle time between the first kernel's start
    and the last kernel's end, and host time after the last kernel launch."""
    host_us = w.call.dur_us
    tops = top_level(w.host)
    by_kind = {k: sum(s.dur_us for s in tops if s.kind == k) for k in ("cpu_op", "annotation", "runtime")}
    m = {
        "host_us": host_us,
        "host_ops": len(tops),
        "host_in_ops_us": by_kind["cpu_op"],
        "host_in_annotations_us": by_kind["annotation"],
        "host_in_runtime_us": by_kind["runtime"],
        "kernels": 0,
        "kernel_us": 0.0,
        "copies": sum(s.kind in ("memcpy", "memset") for s in w.device),
        "first_kernel_us": None,
        "gpu_idle_us": None,
        "host_tail_us": None,
        "wall_us": host_us,
    }
    kernels = [s for s in w.device if is_kernel(s)]
    if not kernels:
        return m
    first, last_end = min(s.start_us for s in kernels), max(s.end_us for s in kernels)
    busy = union_us(kernels)
    launched = {s.correlation for s in kernels if s.correlation is not None}
    launches = [s for s in w.runtime if s.correlation in launched] or [s for s in w.runtime if "aunch" in s.name]
    m.update(
        kernels=len(kernels),
        kernel_us=sum(s.dur_us for s in kernels),
        kernel_busy_us=busy,
        first_kernel_us=first - w.call.start_us,
        gpu_idle_us=(last_end - first) - busy,
        host_tail_us=w.call.end_us - max(s.end_us for s in launches) if launches else None,
        wall_us=max(w.call.end_us, last_end) - w.call.start_us,
    )
    return m


def timeline_rows(w: Window, limit: int = 400) -> list[dict]:
    """Spans of one call for a timeline chart, in µs from the call's start: the host lane holds the
    top-level host spans, the device lane every device span (kernels, copies), ``limit`` per lane."""

    def row(s: Span, lane: str) -> dict:
        return {
            "lane": lane,
            "kind": s.kind,
            "name": s.name[:100],
            "start_us": s.start_us - w.call.start_us,
            "dur_us": s.dur_us,
        }

    host = [row(s, "host") for s in top_level(w.host)[:limit]]
    device = [
        row(s, "device")
        for s in sorted((s for s in w.device if s.kind != "gpu_annotation"), key=lambda s: s.start_us)[:limit]
    ]
    return host + device


def timeline_figure(rows: list[dict], title: str):
    """Horizontal bars from each span's start: host lane above device lane, one colour per kind."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for kind in dict.fromkeys(r["kind"] for r in rows):
        rs = [r for r in rows if r["kind"] == kind]
        fig.add_bar(
            y=[r["lane"] for r in rs],
            x=[r["dur_us"] for r in rs],
            base=[r["start_us"] for r in rs],
            orientation="h",
            name=kind,
            hovertext=[r["name"] for r in rs],
            hovertemplate="%{hovertext}<br>start %{base:.1f} µs, %{x:.1f} µs<extra></extra>",
        )
    fig.update_layout(
        title=title,
        barmode="overlay",
        height=260,
        xaxis_title="µs from the call's start",
        yaxis={"categoryorder": "array", "categoryarray": ["device", "host"]},
    )
    return fig
