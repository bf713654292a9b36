"""The seed issue's published numbers, kept in one place as data (ms unless named otherwise).

Each table names the GPU, the method and the software it was measured with, as the seed states.
Keys are this suite's executor names, so the seed's rows sit beside measured ones: ``seed_rows``, and
``seed_tables`` (one table per metric, seed beside a run's rows), which 02, the report and compare use.
"""

from __future__ import annotations

from dataclasses import dataclass

from .metrics import header, split_unit
from .registry import REGISTRY
from .rows import Record

SEED_TIMEIT_L40S = {
    "gpu": "L40S",
    "method": "%timeit fn(**args); torch.cuda.synchronize()",
    "software": "PyTorch 2.5.1, nvFuser pip nightly",
    "rows": {
        "thunder": {"mean_ms": 2.19, "std_ms": 0.00441},
        "eager": {"mean_ms": 2.05, "std_ms": 0.00311},
        "torch.compile": {"mean_ms": 1.36, "std_ms": 0.00986},
    },
}

SEED_NSIGHT_DGX_H100 = {
    "gpu": "DGX H100",
    "method": "Nsight Systems",
    "columns": ("wall_ms", "cpu_overhead_ms", "kernel_ms", "kernels_per_step", "overhead_per_kernel_us"),
    "rows": {
        "thunder": (1.281, 0.984, 0.297, 32, 30.7),
        "thunder:torch": (1.232, 0.814, 0.413, 77, 10.5),
        "torch.compile": (0.455, 0.163, 0.292, 24, 6.8),
        "eager": (1.014, 0.616, 0.398, 65, 9.4),
    },
}

SEED_CUDA_TIMER_DGX_H100 = {
    "gpu": "DGX H100",
    "method": "CUDA events, 10 warm-up + 40 timed calls",
    "rows": {
        "thunder": 1.082,
        "thunder:torchcompile": None,
        "thunder:torch": 0.965,
        "torch.compile": 0.313,
        "eager": 0.834,
    },
    "notes": {"thunder:torchcompile": "N/A in the seed (could not be measured then)"},
}

SEED_SINGLE_ADD_H100 = {
    "gpu": "DGX H100-80GB",
    "method": "CUDA events, one add in isolation",
    "rows": {
        "thunder": 0.072,
        "thunder:torchcompile": 0.075,
        "thunder:torch": 0.042,
        "torch.compile": 0.026,
        "eager": 0.007,
    },
}

# The seed's Counter over the final trace of thunder.jit(model) (default executors, nvFuser).
SEED_TRACE_COUNTER = {
    "python_del": 18,
    "unpack_trivial": 15,
    "linear": 8,
    "nvFusion0": 1,
    "embedding": 1,
    "triu": 1,
    "matmul": 1,
    "TorchCompile0": 1,
    "clone": 1,
    "nvFusion1": 1,
    "copy_with_setitem_impl": 1,
    "TorchCompile1": 1,
    "nvFusion2": 1,
    "sdpaex_grad_forward_scaled_dot_product_efficient_attention": 1,
    "nvFusion3": 1,
    "nvFusion4": 1,
    "nvFusion5": 1,
    "nvFusion6": 1,
    "python_return": 1,
}


@dataclass
class NsightRow(Record):
    """A row of the seed's Nsight Systems table (DGX H100): wall, CPU overhead and kernel time per step,
    kernels per step and CPU overhead per kernel."""

    executor: str
    label: str
    wall_ms: float
    cpu_overhead_ms: float
    kernel_ms: float
    kernels_per_step: int
    overhead_per_kernel_us: float
    source: str


@dataclass
class TimerRow(Record):
    """A row of the seed's ``cuda_timer`` table (DGX H100): wall per step, and the seed's note."""

    executor: str
    label: str
    wall_ms: float | None
    source: str
    reason: str | None


@dataclass
class TimeitRow(Record):
    """A row of the seed's ``%timeit`` table (L40S): mean and standard deviation per step."""

    executor: str
    label: str
    timeit_ms: float
    timeit_std_ms: float
    source: str


SeedRow = NsightRow | TimerRow | TimeitRow  # a row of one of the seed's tables


def seed_rows() -> list[SeedRow]:
    """The seed's published tables as rows in the suite's vocabulary (02's results file keeps them as
    "reference"), labelled with GPU and method."""
    nsight, timer, l40s = SEED_NSIGHT_DGX_H100, SEED_CUDA_TIMER_DGX_H100, SEED_TIMEIT_L40S
    return [
        *(
            NsightRow(name, REGISTRY[name].label, *values, f"seed: {nsight['gpu']}, {nsight['method']}")
            for name, values in nsight["rows"].items()
        ),
        *(
            TimerRow(
                name, REGISTRY[name].label, ms, f"seed: {timer['gpu']}, {timer['method']}", timer["notes"].get(name)
            )
            for name, ms in timer["rows"].items()
        ),
        *(
            TimeitRow(name, REGISTRY[name].label, t["mean_ms"], t["std_ms"], f"seed: {l40s['gpu']}, %timeit")
            for name, t in l40s["rows"].items()
        ),
    ]


# (title, metric of a row here, seed table, its column): the seed's numbers beside this run's
SEED_METRICS = [
    ("Wall time per step", "wall_ms", "nsight", "wall_ms"),
    ("CPU overhead per step (wall - kernel time)", "cpu_overhead_ms", "nsight", "cpu_overhead_ms"),
    ("Kernel time per step", "kernel_ms", "nsight", "kernel_ms"),
    ("Kernels per step", "kernels_per_step", "nsight", "kernels_per_step"),
    ("CPU overhead per kernel", "overhead_per_kernel_us", "nsight", "overhead_per_kernel_us"),
    ("Wall time per step, the seed's cuda_timer", "wall_ms", "cuda_timer", None),
    ("%timeit per step", "timeit_ms", "timeit", None),
]


def _seed_values(source: str, column: str | None) -> tuple[str, dict]:
    """The seed's GPU and method, and its value per executor, for one metric."""
    if source == "nsight":
        t = SEED_NSIGHT_DGX_H100
        i = t["columns"].index(column)
        return f"{t['gpu']}, {t['method']}", {n: v[i] for n, v in t["rows"].items()}
    if source == "cuda_timer":
        t = SEED_CUDA_TIMER_DGX_H100
        return f"{t['gpu']}, CUDA events", dict(t["rows"])
    t = SEED_TIMEIT_L40S
    return f"{t['gpu']}, %timeit", {n: r["mean_ms"] for n, r in t["rows"].items()}


def seed_tables(table: list[dict]) -> list[dict]:
    """One table per metric of the seed's tables: executor, seed, here, here / seed (a ``key_table``
    shape plus its ``gpu``). Lines with neither number are left out; a table with no number measured
    here is left out too. Meant for GPU runs of the seed preset (``executor_timing.seed_order_text`` says why)."""
    here_rows = {r["executor"]: r for r in table}
    out = []
    for title, metric, source, column in SEED_METRICS:
        where, seed = _seed_values(source, column)
        gpu, unit = where.split(",")[0], split_unit(metric)[1]
        lines = []
        for name in dict.fromkeys([*here_rows, *seed]):
            here, base = here_rows.get(name, {}).get(metric), seed.get(name)
            if here is not None or base is not None:
                label = here_rows[name]["label"] if name in here_rows else REGISTRY[name].label
                lines.append([label, base, here, here / base if here is not None and base else None])
        suffix = header(f"x_{unit}")[1:] if unit else ""
        if any(line[2] is not None for line in lines):
            out.append(
                {
                    "title": f"{title}: seed ({where}) and here",
                    "gpu": gpu,
                    "columns": ["executor", f"seed {gpu}{suffix}", f"here{suffix}", "here / seed"],
                    "rows": lines,
                }
            )
    return out
