"""The suite's parameters: one schema, one validation function, shared by notebooks and runner.

Every notebook's ``parameters`` cell uses names from ``SCHEMA``; ``validate`` turns the raw values
(from papermill, the runner's ``-p name=value`` or a JupyterLab user) into a ``Params`` object or
raises ``ParameterError`` naming the parameter and the allowed values, before any work starts.
"""

from __future__ import annotations

import ast
import functools
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from . import builds, results
from .input_errors import ParameterError as ParameterError
from .input_errors import clip as clip
from .input_errors import short as short
from .model_config import memory_needed
from .registry import REGISTRY

PRESETS = ("seed", "tiny")
DTYPES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
}
CACHE_MODES = ("seed", "static", "none")
DEVICES = ("auto", "cpu", "cuda", "cuda:N")
OPS = ("add", "mul", "silu", "linear", "matmul", "embedding", "triu", "rms_norm")
# the parameters that make the same model and inputs: two runs that agree on these built the same step
SAME_MODEL = ("preset", "layers", "batch_size", "seq_len", "dtype", "device", "cache_mode", "seed")

# Per-device defaults for the knobs left as None: the seed's 10 warm-up + 40 timed calls on a GPU, fewer
# on a CPU (a seed step takes tens of ms there); rounds per pass enough for the fast-state headline
# (host_state.MIN_FAST). Why these counts: FINDINGS.md, 2026-12-03.
TIMING_DEFAULTS = {
    "cuda": {"warmup": 10, "iters": 40, "repeats": 20},
    "cpu": {"warmup": 2, "iters": 5, "repeats": 4},
}
TINY_TIMING = {"warmup": 2, "iters": 10, "repeats": 2}
# The seed's shapes: where every op's cost is its executor's fixed cost per call. The crossover to
# work-bound lies past 1024x the tokens on an H200; ask for it with sizes=["seed", "1024x", "4096x"].
SIZE_DEFAULTS = {"seed": ["seed"], "tiny": ["seed"]}

SEED_MAX = 2**32 - 1  # numpy's and torch's seeds are 32-bit
MAX_VALUE_CHARS = 1000  # a -p value's text: every executor's name in a list takes about 250

# Sweeps of notebook 06 (depth, prompt length, decode loop), per device; the tiny preset keeps CPU tests short.
# Every point costs each Thunder configuration a first call (17-32 s on an H200, 7-11 s on the 2-core CPU) and
# its rounds: a 1-token prefill would add one and say no more than the decode step; ask with
# prompt_lengths=[1,6,32,128,512].
SWEEP_DEFAULTS = {
    "cuda": {"depths": (1, 2, 4), "prompt_lengths": (6, 512), "decode_tokens": 32},
    "cpu": {"depths": (1, 2), "prompt_lengths": (6, 32), "decode_tokens": 8},
}
TINY_SWEEPS = {"depths": (1, 2), "prompt_lengths": (1, 6), "decode_tokens": 4}

REPO_ROOT = Path(__file__).resolve().parents[2]

# Notebooks whose defaults differ from SCHEMA's. Each parameters cell mirrors SCHEMA and this table (a
# test checks it), and the runner injects every parameter a notebook declares with the package's value,
# so an edited parameters cell (JupyterLab's autosave) never changes a batch run.
NOTEBOOK_DEFAULTS: dict[str, dict[str, object]] = {
    results.EXPLORER: {"executors": "eager,torch.compile"},
    # the seed's executors and the CUDA-graph variants: the full registry is one executors=all away
    results.EXECUTOR_TIMING: {
        "executors": "eager,torch.compile,torch.compile:reduce-overhead,thunder,thunder:torch,"
        "thunder:torchcompile,thunder:cudagraphs"
    },
    results.TRACE_COUNTERS: {"executors": "thunder,thunder:torch,thunder:torchcompile,thunder:cudagraphs"},  # 02's
    results.OP_MICROBENCHMARKS: {"executors": "eager,torch.compile,thunder,thunder:torch,thunder:torchcompile"},
    # each CUDA-graph variant beside its baseline, and thunder:torch: Thunder's own host costs without
    # nvFuser (the one Thunder configuration a CPU takes apart). 20 rounds: with the host slow 25-75%
    # of the time, enough rounds run fast for a fast-state headline (host_state.MIN_FAST) and a sign test
    results.HOST_OVERHEAD: {
        "executors": "eager,torch.compile,torch.compile:reduce-overhead,thunder,thunder:torch,thunder:cudagraphs",
        "repeats": 10,
    },
    results.SCALING: {"executors": "eager,torch.compile,torch.compile:reduce-overhead,thunder", "repeats": 10},
    # the levers and torch.compile; thunder:torchcompile and thunder:cudagraphs are 02's rows, beside thunder
    results.LEVERS: {
        "executors": "thunder,thunder:nv-linear,thunder:nv-embedding,thunder:nv-skip-cache,"
        "thunder:cache-same-input,thunder:cache-symbolic,torch.compile",
        "repeats": 10,
        "depths": [1],
    },
    # the seed's Thunder-nvFuser and Thunder's own host costs without nvFuser (the Thunder a CPU runs). Many short
    # blocks: the host's state flips within 0.1-5 s, and two blocks 20-30 ms apart mostly share it (08's module)
    # rounds are added 2 x repeats at a time until resolved (docs/method.md); 6 workers per arm (FINDINGS, 08's pilot)
    results.AB_BUILDS: {"executors": "thunder", "warmup": 2, "iters": 10, "repeats": 10},
}
# Where a notebook's defaults differ on a CPU, which runs no nvFuser: Thunder without nvFuser in its place.
CPU_DEFAULTS: dict[str, dict[str, object]] = {
    results.SCALING: {"executors": "eager,torch.compile,thunder:torch"},
    results.AB_BUILDS: {"executors": "thunder:torch"},
}
# 08's per-device defaults: workers per arm, the half-width it stops at (%), the seconds it may take in all
AB_DEFAULTS = {
    "cuda": {"workers": 4, "resolve_pct": 1.0, "budget_s": 120},
    "cpu": {"workers": 4, "resolve_pct": 5.0, "budget_s": 180},
}
PLANTED_MIN = 0.1  # % of a step: below it a busy wait is under a µs of a fast step
# CPU seconds one worker takes to start and build (import torch and Thunder, build the model, first calls): 12 s on
# the 2-core CPU machine (12 workers in 73 s); a budget under the builds' share of the cores is refused
AB_BUILD_CPU_S = 12
# Parameters every notebook applies in its setup (``from_namespace``), whether its cell declares them or not.
EVERY_NOTEBOOK = ("threads",)


@dataclass(frozen=True)
class Params:
    """Validated, fully resolved parameters of one notebook run: ``validate`` (or ``resolved``) makes
    them from ``SCHEMA`` and the per-device defaults, which are declared there only."""

    preset: str
    layers: int
    batch_size: int
    seq_len: int
    dtype: str
    device: str
    executors: tuple[str, ...]
    cache_mode: str
    warmup: int
    iters: int
    repeats: int
    ops: tuple[str, ...]
    sizes: tuple[str, ...]
    output_dir: str
    seed: int
    depths: tuple[int, ...]
    prompt_lengths: tuple[int, ...]
    decode_tokens: int
    threads: int
    build_a: dict
    build_b: dict | None
    planted_pct: tuple[float, ...]
    workers: int
    resolve_pct: float
    budget_s: float
    confidence: float
    planted_ops: int

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def to_dict(self) -> dict:
        return asdict(self)


# name -> (default, help). Defaults of None are resolved from the device or preset.
SCHEMA: dict[str, tuple[object, str]] = {
    "preset": ("seed", f"model preset, one of {', '.join(PRESETS)}"),
    "layers": (1, "num_hidden_layers, an integer >= 1"),
    "batch_size": (1, "batch size, an integer >= 1"),
    "seq_len": (6, "tokens per step, an integer >= 1 (6 = the seed's token ids)"),
    "dtype": ("bfloat16", "one of bfloat16 (bf16), float16 (fp16), float32 (fp32)"),
    "device": ("auto", "auto (CUDA when present, else CPU), cpu, cuda or cuda:N"),
    "executors": ("all", "'all' or a list / comma-separated string of executor names"),
    "cache_mode": ("seed", f"one of {', '.join(CACHE_MODES)}"),
    "warmup": (None, "warm-up calls, an integer >= 0 (None: per-device default)"),
    "iters": (None, "timed calls per block, an integer >= 1 (None: per-device default)"),
    "repeats": (
        None,
        "rounds per ABBA pass (2 x repeats rounds, one block of each executor in each), an even integer >= 2"
        " (None: per-device default)",
    ),
    "ops": ("all", f"'all' or a list of ops from {', '.join(OPS)}"),
    "sizes": (None, "list of size labels: 'seed' or '<k>x' (k times the seed's tokens)"),
    "output_dir": ("", "folder for results JSON ('' = outputs/interactive)"),
    "seed": (0, "random seed for weights and inputs, an integer 0..2**32-1"),
    "depths": (None, "num_hidden_layers of the depth sweep, a list of integers >= 1 (None: per-device default)"),
    "prompt_lengths": (None, "prompt tokens of the prefill sweep, a list of integers >= 1 (None: per-device default)"),
    "decode_tokens": (None, "new tokens of the greedy decode loop, an integer >= 1 (None: per-device default)"),
    "threads": (
        None,
        "torch's intra-op threads, an integer 1..CPUs (None: 1 on a CPU, for stable timing; torch's default on a GPU)",
    ),
    "build_a": ({}, "build A of 08: {} (this environment) or {'python': PATH, 'path': [FOLDER], 'env': {NAME: VALUE}}"),
    "build_b": (None, "build B of 08, as build_a; None: no B, only the controls (A against A, A with a planted delay)"),
    "planted_pct": (
        None,
        "08's planted delays, each a % of A's host time per step, a list of numbers in [0.1, 100] (None: twice "
        "resolve_pct, the smallest change a resolved run detects nearly always)",
    ),
    "planted_ops": (
        0,
        "08's planted regression inside the step: this many more elementwise ops, an arm of its own, an integer "
        "0..100 (0: none)",
    ),
    "confidence": (
        0.95,
        "08's confidence level, in [0.8, 0.9999]: its intervals hold a true change this often, and an identical B "
        "is called changed 1 - confidence of the time",
    ),
    "workers": (
        None,
        "08's worker processes per arm, an integer >= 2, at most the cores this process may use or a multiple of "
        "them (None: 4)",
    ),
    "resolve_pct": (None, "08 stops once B's interval is this narrow on each side, a % in (0, 50) (None: per device)"),
    "budget_s": (
        None,
        "08's seconds in all, builds included, more than its builds take: it adds no rounds past it (None: 120 on "
        "a GPU, 180 on a CPU)",
    ),
}


def parse_value(text: str):
    """Parse a ``-p name=value`` string safely: a Python literal if it is one, else the string.
    Never raises: text the parser cannot take (too deeply nested, too large, null bytes) is not a
    literal either. Bound its length before (``MAX_VALUE_CHARS``): parsing costs memory."""
    try:
        return ast.literal_eval(text)
    except Exception:  # SyntaxError, ValueError, RecursionError, MemoryError, OverflowError, ...
        return text


def _int(name: str, value, minimum: int, maximum: int | None = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        raise ParameterError(
            name, value, f"an integer >= {minimum}" if maximum is None else f"an integer {minimum}..{maximum}"
        )
    return value


def _repeats(value) -> int:
    """Rounds per ABBA pass: even, so that the ABBA split of ``2 * repeats`` wall-time rounds gives both
    passes the same mean position in time (a steady drift then moves both alike)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 2 or value % 2:
        raise ParameterError("repeats", value, "an even integer >= 2 (rounds per ABBA pass)")
    return value


def _names(name: str, value, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """'all', or a comma list (or list) of names from ``allowed``, each given once."""
    if value in (None, "all"):
        return allowed
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
    choices = ", ".join(allowed)
    if not isinstance(items, (list, tuple)) or not items or not all(isinstance(v, str) for v in items):
        raise ParameterError(name, value, f"'all' or a non-empty list of {choices}")
    unknown = [v for v in items if v not in allowed]
    if unknown:
        raise ParameterError(name, value, f"'all' or names from {choices} (unknown: {', '.join(unknown)})")
    twice = list(dict.fromkeys(v for i, v in enumerate(items) if v in items[:i]))
    if twice:
        raise ParameterError(name, value, f"'all' or names from {choices}, each once (twice: {', '.join(twice)})")
    return tuple(items)


def _sizes(value, preset: str) -> tuple[str, ...]:
    if value is None:
        return tuple(SIZE_DEFAULTS[preset])
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
    ok = (
        isinstance(items, (list, tuple))
        and items
        and all(
            isinstance(v, str) and (v == "seed" or (v.endswith("x") and v[:-1].isdigit() and int(v[:-1]) > 0))
            for v in items
        )
    )
    if not ok:
        raise ParameterError("sizes", value, "a list of 'seed' or '<k>x' labels, e.g. ['seed', '4x', '64x']")
    return tuple(items)


def _int_list(name: str, value, default: tuple[int, ...]) -> tuple[int, ...]:
    """A sweep's points: a non-empty list of integers >= 1, sorted, duplicates dropped."""
    if value is None:
        return tuple(default)
    if (
        not isinstance(value, (list, tuple))
        or not value
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
    ):
        raise ParameterError(name, value, "a non-empty list of integers >= 1, e.g. [1, 2, 4, 8]")
    return tuple(sorted(set(value)))


def resolve_device(value: str) -> str:
    """'auto' -> 'cuda' when a CUDA device is present, else 'cpu'; explicit CUDA must exist."""
    if not isinstance(value, str):
        raise ParameterError("device", value, ", ".join(DEVICES))
    if value == "cpu":
        return value
    import torch  # only to look for CUDA: 'cpu' is validated without it

    if value == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if value == "cuda" or (value.startswith("cuda:") and value[5:].isdigit()):
        if not torch.cuda.is_available():
            raise ParameterError("device", value, "auto or cpu (no CUDA device is available here)")
        index = int(value[5:]) if ":" in value else 0
        if index >= torch.cuda.device_count():
            raise ParameterError("device", value, f"cuda:0 .. cuda:{torch.cuda.device_count() - 1}")
        return value
    raise ParameterError("device", value, ", ".join(DEVICES))


def validate(raw: dict | None = None, **kwargs) -> Params:
    """Check and resolve parameters; unknown names and bad values raise ``ParameterError``; sizes must
    fit this machine (``check_fits``), and a build other than this environment must start and import
    torch (``builds.check``)."""
    values = {**(raw or {}), **kwargs}
    p = resolved(values, device=resolve_device(values.get("device", SCHEMA["device"][0])))
    check_fits(p, values)
    for name in ("build_a", "build_b"):
        if getattr(p, name) is not None and not builds.parse(name, getattr(p, name)).here:
            found = builds.check(name, builds.parse(name, getattr(p, name)))
            if p.cache_mode == "seed" and found.get("seed_call") is False:
                version = (found["packages"].get("transformers") or {}).get("version")
                raise ParameterError(
                    name,
                    getattr(p, name),
                    f"a build whose transformers takes the seed's call (cache_positions=...); its transformers "
                    f"{version} refuses it: -p cache_mode=none (or static) runs on both builds",
                )
    return p


def resolved(raw: dict | None = None, **kwargs) -> Params:
    """``validate``'s checks and resolution with ``device`` taken as given (``cpu``, ``cuda``, ``cuda:N``;
    default ``cpu``), not looked for, and no fit check: a run described without making it (tests, scripts)."""
    values = {"device": "cpu", **(raw or {}), **kwargs}
    unknown = sorted(set(values) - set(SCHEMA))
    if unknown:
        raise ParameterError(unknown[0], values[unknown[0]], f"parameter names {', '.join(SCHEMA)}")
    v = {name: values.get(name, default) for name, (default, _) in SCHEMA.items()}

    if v["preset"] not in PRESETS:
        raise ParameterError("preset", v["preset"], ", ".join(PRESETS))
    if v["dtype"] not in DTYPES:
        raise ParameterError("dtype", v["dtype"], ", ".join(DTYPES))
    if v["cache_mode"] not in CACHE_MODES:
        raise ParameterError("cache_mode", v["cache_mode"], ", ".join(CACHE_MODES))
    for name in ("layers", "batch_size", "seq_len"):
        _int(name, v[name], 1)
    _int("seed", v["seed"], 0, SEED_MAX)
    if not isinstance(v["output_dir"], str):
        raise ParameterError("output_dir", v["output_dir"], "a folder path as a string")
    executors = _names("executors", v["executors"], tuple(REGISTRY))
    ops = _names("ops", v["ops"], OPS)
    sizes = _sizes(v["sizes"], v["preset"])
    device = v["device"]
    if device not in ("cpu", "cuda") and not str(device).startswith("cuda:"):
        raise ParameterError("device", device, "cpu, cuda or cuda:N (resolved)")

    timing = TINY_TIMING if v["preset"] == "tiny" else TIMING_DEFAULTS["cuda" if device.startswith("cuda") else "cpu"]
    chosen = {}
    for name, minimum in (("warmup", 0), ("iters", 1)):
        chosen[name] = timing[name] if v[name] is None else _int(name, v[name], minimum)
    chosen["repeats"] = timing["repeats"] if v["repeats"] is None else _repeats(v["repeats"])
    sweeps = TINY_SWEEPS if v["preset"] == "tiny" else SWEEP_DEFAULTS["cuda" if device.startswith("cuda") else "cpu"]
    for name in ("depths", "prompt_lengths"):
        chosen[name] = _int_list(name, v[name], sweeps[name])
    chosen["decode_tokens"] = (
        sweeps["decode_tokens"] if v["decode_tokens"] is None else _int("decode_tokens", v["decode_tokens"], 1)
    )
    chosen["threads"] = _threads(v["threads"], device)
    chosen["build_a"] = builds.parse("build_a", v["build_a"]).to_dict()
    chosen["build_b"] = None if v["build_b"] is None else builds.parse("build_b", v["build_b"]).to_dict()
    ab = AB_DEFAULTS["cuda" if device.startswith("cuda") else "cpu"]
    chosen["workers"] = _workers(ab["workers"] if v["workers"] is None else v["workers"], usable_cores())
    chosen["resolve_pct"] = _resolve(ab["resolve_pct"] if v["resolve_pct"] is None else v["resolve_pct"])
    chosen["planted_pct"] = _planted(2 * chosen["resolve_pct"] if v["planted_pct"] is None else v["planted_pct"])
    chosen["planted_ops"] = _int("planted_ops", v["planted_ops"], 0, 100)
    if not _number(v["confidence"]) or not 0.8 <= v["confidence"] <= 0.9999:
        raise ParameterError("confidence", v["confidence"], "a number in [0.8, 0.9999], e.g. 0.95")
    chosen["confidence"] = float(v["confidence"])
    arms = 2 + len(chosen["planted_pct"]) + (chosen["planted_ops"] > 0) + (chosen["build_b"] is not None)
    chosen["budget_s"] = _budget(ab["budget_s"] if v["budget_s"] is None else v["budget_s"], arms * chosen["workers"])

    return Params(
        preset=v["preset"],
        layers=v["layers"],
        batch_size=v["batch_size"],
        seq_len=v["seq_len"],
        dtype=DTYPES[v["dtype"]],
        device=device,
        executors=executors,
        cache_mode=v["cache_mode"],
        ops=ops,
        sizes=sizes,
        output_dir=v["output_dir"] or str(REPO_ROOT / "outputs" / results.INTERACTIVE),
        seed=v["seed"],
        **chosen,
    )


# --- sizes bounded by what the machine can hold ------------------------------------------------------

SIZE_PARAMS = ("layers", "depths", "batch_size", "seq_len", "prompt_lengths", "decode_tokens", "sizes")


def available_ram(meminfo: str = "/proc/meminfo") -> tuple[int, str]:
    """Bytes of host RAM a run can take now, and what they are: ``MemAvailable`` of ``meminfo`` (free
    memory and the caches the kernel can drop); all the RAM where there is no such line (not Linux)."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "RAM available"
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "RAM (its total: no MemAvailable here)"


def machine_memory(device: str) -> tuple[int, str]:
    """Bytes of memory the run's tensors can take now, and what they are: the GPU's free memory
    (``torch.cuda.mem_get_info``), or the host's available RAM (``available_ram``)."""
    if device.startswith("cuda"):
        import torch

        index = int(device[5:]) if ":" in device else 0
        return torch.cuda.mem_get_info(index)[0], f"GPU memory ({device}) available"
    return available_ram()


def _largest_point(p: Params, name: str) -> int:
    if name == "sizes":
        return max((int(s[:-1]) for s in p.sizes if s != "seed"), default=1)
    value = getattr(p, name)
    return max(value) if isinstance(value, tuple) else value


def _with_point(p: Params, name: str, n: int) -> Params:
    """``p`` with the largest point of parameter ``name`` set to ``n`` (the others do not count)."""
    from dataclasses import replace

    value = (f"{n}x",) if name == "sizes" else (n,) if isinstance(getattr(p, name), tuple) else n
    return replace(p, **{name: value})


def models_held(notebook: str | None, p: Params) -> tuple[int, ...]:
    """The layers of each model ``notebook`` holds besides its deepest one: 06 one per sweep point
    (every point is built before the rounds), 07 one per depth of its combination; the others (and None: a
    notebook run by hand) none. 08's workers are processes of their own (``check_workers_fit``)."""
    if notebook == results.SCALING:
        points = sorted([*p.depths, *[p.layers] * (len(p.prompt_lengths) + 1)])
        return tuple(points[:-1])
    if notebook == results.LEVERS:
        return tuple(p.depths)
    return ()


def check_fits(p: Params, given: dict, memory: tuple[int, str] | None = None, notebook: str | None = None) -> None:
    """ParameterError for the first size parameter (``SIZE_PARAMS``) whose value makes the run need
    more memory than is available (``model_config.memory_needed`` with the models ``notebook`` holds against
    ``memory``: bytes and what they are, by default ``machine_memory``), naming the largest value that
    fits with the other parameters as they are."""
    memory, kind = memory or machine_memory(p.device)

    def need_of(q: Params) -> int:
        return memory_needed(q, models_held(notebook, q))

    need = need_of(p)
    if need <= memory:
        return
    held = models_held(notebook, p)
    others = f", {len(held) + 1} models held at once" if held else ""
    for name in SIZE_PARAMS:
        lo, hi = 1, _largest_point(p, name)
        if need_of(_with_point(p, name, lo)) > memory:
            continue  # even its smallest value does not fit: another parameter is too large
        while lo < hi:  # the largest point that fits, by bisection (memory_needed grows with each)
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if need_of(_with_point(p, name, mid)) <= memory else (lo, mid - 1)
        what = (
            "'seed' or '<k>x' labels with k"
            if name == "sizes"
            else "integers"
            if isinstance(getattr(p, name), tuple)
            else "an integer"
        )
        raise ParameterError(
            name,
            given.get(name, getattr(p, name)),
            f"{what} up to {lo:,} on this machine: the run would need about {need / 2**30:.3g} GiB "
            f"(the model's build or its largest step{others}, with a margin; estimate), more than its "
            f"{memory / 2**30:.3g} GiB of {kind}",
        )
    name = next((n for n in SIZE_PARAMS if n in given), "preset")  # several too large at once
    raise ParameterError(
        name,
        given.get(name, getattr(p, name)),
        f"smaller sizes: as given, the run would need about {need / 2**30:.3g} GiB, more than this "
        f"machine's {memory / 2**30:.3g} GiB of {kind}, and no one of {', '.join(SIZE_PARAMS)} alone "
        f"brings it within",
    )


def from_namespace(namespace: dict) -> Params:
    """Validate the parameters a notebook's ``parameters`` cell defined (pass ``globals()``)."""
    return validate({name: namespace[name] for name in SCHEMA if name in namespace})


@functools.cache
def torch_default_threads() -> int:
    """torch's intra-op threads before this process changed them (read once, before ``harness.set_up``)."""
    import torch

    return torch.get_num_threads()


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _planted(value) -> tuple[float, ...]:
    """08's planted delays: a non-empty list of percentages in [``PLANTED_MIN``, 100], each once, sorted.
    Below 0.1% a busy wait is under a µs of a fast step (``time.perf_counter``'s loop cannot make it)."""
    items = [value] if _number(value) else value
    allowed = f"a number or a non-empty list of numbers in [{PLANTED_MIN:g}, 100], e.g. [1, 5]"
    if not isinstance(items, (list, tuple)) or not items or not all(_number(x) for x in items):
        raise ParameterError("planted_pct", value, allowed)
    if not all(PLANTED_MIN <= x <= 100 for x in items):
        raise ParameterError("planted_pct", value, allowed)
    chosen = sorted({float(x) for x in items})
    if len({f"{x:g}" for x in chosen}) < len(chosen):  # each names an arm of its own: "A + 1% planted"
        raise ParameterError("planted_pct", value, "numbers in [0.1, 100] that differ in their first 6 digits")
    return tuple(chosen)


def _workers(value, cores: int) -> int:
    """08's workers per arm: at least 2 (an interval over workers needs two), and at most the cores or a
    multiple of them, so that pinning worker i of every arm to core i mod cores meets every core equally."""
    allowed = f"an integer >= 2, at most {cores} (the cores here) or a multiple of {cores}"
    if isinstance(value, bool) or not isinstance(value, int) or value < 2 or (value > cores and value % cores):
        raise ParameterError("workers", value, allowed)
    if value > 8 * cores:
        raise ParameterError("workers", value, f"{allowed}, up to {8 * cores}")
    return value


def _resolve(value) -> float:
    if not _number(value) or not 0 < value < 50:
        raise ParameterError("resolve_pct", value, "a % in (0, 50), the half-width 08 stops at, e.g. 1")
    return float(value)


def _budget(value, workers: int) -> float:
    """08's budget: more than its ``workers`` take to build on the cores here (``AB_BUILD_CPU_S`` each)."""
    builds_s = math.ceil(workers * AB_BUILD_CPU_S / usable_cores())
    if not _number(value) or value <= builds_s:
        raise ParameterError(
            "budget_s",
            value,
            f"seconds over {builds_s}, what building its {workers} workers takes on {usable_cores()} cores, e.g. 180",
        )
    return float(value)


def usable_cores() -> int:
    """The cores this process may run on (08 pins worker i of every arm to core slot i)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _threads(value, device: str) -> int:
    if value is None:
        return 1 if device == "cpu" else torch_default_threads()
    return _int("threads", value, 1, os.cpu_count() or 1)


def notebook_defaults(notebook: str) -> dict:
    """The package's default of every parameter for ``notebook``: SCHEMA's, then ``NOTEBOOK_DEFAULTS``."""
    return {name: default for name, (default, _) in SCHEMA.items()} | NOTEBOOK_DEFAULTS.get(notebook, {})


def own_defaults(notebook: str, device: str) -> dict:
    """``notebook``'s own defaults on ``device``: ``NOTEBOOK_DEFAULTS``, then ``CPU_DEFAULTS`` on a CPU."""
    return NOTEBOOK_DEFAULTS.get(notebook, {}) | (CPU_DEFAULTS.get(notebook, {}) if device == "cpu" else {})


def for_notebook(notebook: str, given: dict) -> Params:
    """The parameters ``notebook`` runs with in a batch run: ``given`` over its package defaults on the
    device it resolves to (``own_defaults``), checked to fit with the models it holds at once."""
    values = {**NOTEBOOK_DEFAULTS.get(notebook, {}), **given}
    p = validate(values)
    own = own_defaults(notebook, p.device)
    if own != NOTEBOOK_DEFAULTS.get(notebook, {}):
        values = {**own, **given}
        p = validate(values)
    if notebook == results.AB_BUILDS:
        if "workers" in given:
            check_workers_fit(p, values)
        elif (fit := workers_that_fit(p)) < p.workers:  # the default: as many as the memory holds now, at least 2
            p = validate({**values, "workers": max(2, fit)})
    elif models_held(notebook, p):
        check_fits(p, values, notebook=notebook)
    return p


# What one worker process of 08 holds besides its model (``memory_needed``): the CUDA context, cuBLAS's and
# nvFuser's workspaces, or on a CPU torch and Thunder imported. Measured: 3.16 GiB per worker on the H100
# (seed, 1 layer, thunder; memory_needed 2.90), 0.8 GB of RSS per worker on the CPU machine (tiny)
PROCESS_BYTES = {"cuda": 0.5 * 2**30, "cpu": 0.6 * 2**30}


def ab_processes(p: Params) -> int:
    """08's worker processes: ``workers`` per arm (A, A', each planted arm, B)."""
    return p.workers * (2 + len(p.planted_pct) + (p.planted_ops > 0) + (p.build_b is not None))


def process_bytes(p: Params) -> int:
    """Memory one worker process of 08 holds: its model (``memory_needed``) and ``PROCESS_BYTES``."""
    return memory_needed(p) + int(PROCESS_BYTES["cuda" if p.is_cuda else "cpu"])


def workers_that_fit(p: Params, memory: tuple[int, str] | None = None) -> int:
    """The most workers per arm of 08 whose processes fit in the memory available (``check_workers_fit``)."""
    memory, _ = memory or machine_memory(p.device)
    return int(memory // (process_bytes(p) * (ab_processes(p) // p.workers)))


def check_workers_fit(p: Params, given: dict, memory: tuple[int, str] | None = None) -> None:
    """ParameterError naming ``workers`` (or the model's size) when 08's worker processes, each its model and
    ``PROCESS_BYTES``, need more memory than is available, with the most workers per arm that fit."""
    memory, kind = memory or machine_memory(p.device)
    each = process_bytes(p)
    if ab_processes(p) * each <= memory:
        return
    arms = ab_processes(p) // p.workers
    fit = workers_that_fit(p, (memory, kind))
    if fit < 2:  # not even 2 workers per arm: the model is too large; name the size that fits 2 per arm
        share = memory // (2 * arms) - (each - memory_needed(p))
        check_fits(p, given, (int(share), kind))
    raise ParameterError(
        "workers",
        given.get("workers", p.workers),
        f"at most {fit} workers per arm on this machine: {arms} arms of {p.workers} workers would hold about "
        f"{ab_processes(p) * each / 2**30:.3g} GiB ({each / 2**30:.2g} GiB each, estimate), more than its "
        f"{memory / 2**30:.3g} GiB of {kind}; or fewer planted sizes",
    )


def injected(params: Params, names) -> dict:
    """``params``' values of ``names`` as papermill literals (tuples as lists)."""
    return {n: list(v) if isinstance(v, tuple) else v for n, v in params.to_dict().items() if n in names}
