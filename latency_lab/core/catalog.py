"""The study catalog: every notebook of the suite declared once, as an ``Entry``: its name (the notebook's
file stem), the question it answers, its parameter defaults (and those that differ on a CPU), the models
it holds at once, its rows' identity columns, the kinds of number it holds, the sections ``compare``
reads back, each with its row type (``rows``, ``row_types``), and whether it saves the step's counts. The
runner, the start page, the memory check, ``compare`` and ``run_to_run`` read it; it imports no torch and no
study.

Each notebook's parameters cell mirrors ``parameters.SCHEMA`` and its entry's ``defaults`` (a test checks it),
and the runner injects every parameter a notebook declares with the package's value, so an edited parameters
cell (JupyterLab's autosave) never changes a batch run. A notebook found in ``notebooks/`` but not catalogued
(a draft, a test's) runs with ``SCHEMA``'s defaults (``entry``). Adding a study: CONTRIBUTING.md, "Adding a
study".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import row_types as T
from . import rows as R

if TYPE_CHECKING:
    from .parameters import Params

# The kinds of number compare judges, each with its run-to-run effects measured apart (``run_to_run``)
TIME, PER_REF, WITHIN, DIFFERENCE, KERNEL, FIRST_CALL, FIT, COUNT = (
    "host and wall time",
    "per reference",
    "ratio within rounds",
    "difference within rounds",
    "kernel time",
    "first call",
    "fit",
    "count",
)
# What a timed step's row holds: its times, host time per reference, kernel time and kernels per step
STEP_KINDS = {
    TIME: ("wall_ms", "host_ms"),
    PER_REF: ("host_per_ref_x",),
    KERNEL: ("kernel_ms",),
    COUNT: ("kernels_per_step",),
}


def none_held(p: Params) -> tuple[int, ...]:
    """No model held besides the one a notebook builds."""
    return ()


@dataclass(frozen=True)
class Entry:
    """One notebook of the suite, as the runner, the start page, the memory check and ``compare`` read it."""

    name: str  # the notebook's file stem ``NN_name``; its results are ``<name>.results.json``
    question: str  # what it answers (the start page)
    key_columns: tuple[str, ...] = ("executor",)  # its rows' identity, in the order a row's key joins them
    kinds: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # kind of number -> its metric columns
    defaults: Mapping[str, object] = field(default_factory=dict)  # where they differ from parameters.SCHEMA's
    cpu_defaults: Mapping[str, object] = field(default_factory=dict)  # where they differ again on a CPU
    # the layers of each model it holds at once besides its deepest (the memory check counts them all)
    models_held: Callable[[Params], tuple[int, ...]] = none_held
    worker_processes: bool = False  # its models live in worker processes (``fits.check_workers_fit``)
    reads_from: tuple[str, ...] = ()  # notebooks whose results of the same run it reads: it runs after them
    # the sections compare reads, in order, each with the row type it reads back (``Record.from_dict``)
    compared: Mapping[str, type[R.Record]] = field(default_factory=lambda: {"key_table": R.Columns})
    # its results hold the step's work counted per executor (``COUNTED``: ``instruments.counts``), compared exactly
    counted: bool = False


def sweep_points(p: Params) -> tuple[int, ...]:
    """06 builds every sweep point before its rounds: a model per depth, one of ``layers`` per prompt length
    and one for the decode step; the layers of each but the deepest."""
    return tuple(sorted([*p.depths, *[p.layers] * (len(p.prompt_lengths) + 1)])[:-1])


def combination_depths(p: Params) -> tuple[int, ...]:
    """07 holds one model per depth of its combination besides its own."""
    return tuple(p.depths)


COUNTED = "counts"  # the results section of a notebook whose entry is ``counted``: executor -> ``Counts.to_dict()``

EXPLORER, MODEL_SETUP, EXECUTOR_TIMING, TRACE_COUNTERS = (
    "00_explorer",
    "01_model_setup",
    "02_executor_timing",
    "03_trace_counters",
)
OP_MICROBENCHMARKS, HOST_OVERHEAD, SCALING, LEVERS, AB_BUILDS = (
    "04_op_microbenchmarks",
    "05_host_overhead",
    "06_scaling",
    "07_levers",
    "08_ab_builds",
)

# The suite's notebooks, in order.
CATALOG = (
    Entry(
        EXPLORER,
        "How fast is a setting you pick (executors, preset, dtype, device, layers, tokens, threads)? Runs side by "
        "side; from any row its Thunder trace, profiler timeline and top ops; one click sets them beside the H100 "
        "reference.",
        kinds={**STEP_KINDS, FIRST_CALL: ("first_call_s",)},
        defaults={"executors": "eager,torch.compile"},
        compared={"key_table": T.ExplorerRow},
    ),
    Entry(
        MODEL_SETUP,
        "What does one step have to do (parameters, bytes, the memory-bandwidth floor), in which environment, and "
        "which executors can run here?",
        compared={"key_table": T.AvailabilityRow},
    ),
    Entry(
        EXECUTOR_TIMING,
        "How do the executors compare on the seed's step, measured with the seed's own methods?",
        kinds={**STEP_KINDS, FIRST_CALL: ("first_call_s",), COUNT: ("kernels_per_step", "copies_per_step")},
        # the seed's executors and the CUDA-graph variants: the full registry is one executors=all away
        defaults={
            "executors": "eager,torch.compile,torch.compile:reduce-overhead,thunder,thunder:torch,"
            "thunder:torchcompile,thunder:cudagraphs"
        },
        compared={"rows": T.ExecutorRow},
        counted=True,
    ),
    Entry(
        TRACE_COUNTERS,
        "What is in Thunder's final trace (fusion regions, ops outside them), and where does its first call go?",
        defaults={"executors": "thunder,thunder:torch,thunder:torchcompile,thunder:cudagraphs"},  # 02's
        reads_from=(EXECUTOR_TIMING,),  # the Thunder trace rows 02 took right after each first call
        compared={"key_table": T.TraceSummaryRow},
    ),
    Entry(
        OP_MICROBENCHMARKS,
        "What does each executor pay per call for one op (the seed's add, and more), over sizes?",
        key_columns=("op", "size", "tokens", "executor"),
        kinds={
            **STEP_KINDS,
            FIRST_CALL: ("first_call_s",),
            WITHIN: ("vs_eager_x",),
            DIFFERENCE: ("overhead_vs_eager_us",),
        },
        defaults={"executors": "eager,torch.compile,thunder,thunder:torch,thunder:torchcompile"},
        compared={"rows": T.OpRow},
    ),
    Entry(
        HOST_OVERHEAD,
        "Where does the host time of one step go, and how much do CUDA graphs remove?",
        # ``with_graphs``, ``without``: its CUDA-graph ratios; ``claim``: its grades of the seed's claims
        key_columns=("executor", "with_graphs", "without", "claim"),
        kinds={**STEP_KINDS, WITHIN: ("wall_ratio_x",)},
        # each CUDA-graph variant beside its baseline, and thunder:torch: Thunder's own host costs without
        # nvFuser (the one Thunder configuration a CPU takes apart). 20 rounds: with the host slow 25-75%
        # of the time, enough rounds run fast for a fast-state headline (host_state.MIN_FAST) and a sign test
        defaults={
            "executors": "eager,torch.compile,torch.compile:reduce-overhead,thunder,thunder:torch,thunder:cudagraphs",
            "repeats": 10,
        },
        compared={"key_table": T.HostStepRow, "graphs": T.GraphRow, "grades": T.GradeRow},
        counted=True,
    ),
    Entry(
        SCALING,
        "How do wall, host and kernel time grow with depth, prompt length and token-by-token decoding?",
        key_columns=("step", "layers", "tokens", "prompt_tokens", "executor", "metric"),  # metric: its fit rows
        kinds={
            **STEP_KINDS,
            TIME: ("wall_ms", "host_ms", "loop_ms", "tpot_ms"),
            FIRST_CALL: ("first_call_s",),
            FIT: ("fixed_ms", "per_layer_ms", "per_layer_per_ref_x"),
        },
        defaults={"executors": "eager,torch.compile,torch.compile:reduce-overhead,thunder", "repeats": 10},
        # a CPU runs no nvFuser: Thunder without nvFuser in its place
        cpu_defaults={"executors": "eager,torch.compile,thunder:torch"},
        models_held=sweep_points,
        compared={"points": T.ScalingRow, "fit_rows": T.FitRow},
    ),
    Entry(
        LEVERS,
        "What does each remedy the seed proposes save Thunder-nvFuser, where does the saving land, and would the "
        "best together reach torch.compile?",
        key_columns=("layers", "executor"),  # layers: its combination's rows
        kinds={
            **STEP_KINDS,
            FIRST_CALL: ("first_call_s",),
            WITHIN: ("vs_baseline_x", "vs_reference_x"),
            DIFFERENCE: ("host_saved_us", "host_saved_per_ref_x"),
        },
        # the levers and torch.compile; thunder:torchcompile and thunder:cudagraphs are 02's rows, beside thunder
        defaults={
            "executors": "thunder,thunder:nv-linear,thunder:nv-embedding,thunder:nv-skip-cache,"
            "thunder:cache-same-input,thunder:cache-symbolic,torch.compile",
            "repeats": 10,
            "depths": [1],
        },
        models_held=combination_depths,
        compared={"rows": T.LeverRow, "combination": T.CombinationRow},
    ),
    Entry(
        AB_BUILDS,
        "Did a change of the stack (a Thunder or nvFuser branch, another transformers) move the step, and which "
        "part moved? Two builds in the same rounds, with what this run can resolve.",
        key_columns=("executor", "metric", "comparison"),  # comparison: B, the A/A control and the planted arms
        # the seed's Thunder-nvFuser and Thunder's own host costs without nvFuser (the Thunder a CPU runs). Many
        # short blocks: the host's state flips within 0.1-5 s, and two blocks 20-30 ms apart mostly share it (08's
        # module); rounds are added 2 x repeats at a time until resolved (docs/method.md)
        defaults={"executors": "thunder", "warmup": 2, "iters": 10, "repeats": 10},
        cpu_defaults={"executors": "thunder:torch"},
        worker_processes=True,
        compared={"key_table": T.ComparisonRow},
    ),
)
NAMES = tuple(s.name for s in CATALOG)
_BY_NAME = {s.name: s for s in CATALOG}
READS_FROM = {s.name: s.reads_from for s in CATALOG if s.reads_from}


def entry(name: str | None) -> Entry:
    """The catalog's entry of notebook ``name``; for a notebook it lacks (or None: a notebook run by hand),
    one with no question and no defaults of its own."""
    return _BY_NAME.get(name) or Entry(name or "", "")


def merged(orders: list[tuple[str, ...]]) -> tuple[str, ...]:
    """Every column of ``orders`` once, each in the order its tuples give: a column new to the result goes
    right before the first column after it in its tuple that the result holds, else last."""
    out: list[str] = []
    for order in orders:
        for i, column in enumerate(order):
            if column not in out:
                out.insert(next((out.index(c) for c in order[i + 1 :] if c in out), len(out)), column)
    return tuple(out)


KEY_COLUMNS = merged([s.key_columns for s in CATALOG])  # a row's identity, whichever notebook it is of
KINDS = tuple(dict.fromkeys(k for s in CATALOG for k in s.kinds))
METRIC_KINDS = {metric: k for s in CATALOG for k, metrics in s.kinds.items() for metric in metrics}
