"""The suite's parameters: one schema, one validation function, shared by notebooks and runner.

Every notebook's ``parameters`` cell uses names from ``SCHEMA``; ``validate`` turns the raw values
(from papermill, the runner's ``-p name=value`` or a JupyterLab user) into a ``Params`` object or
raises ``ParameterError`` naming the parameter and the allowed values, before any work starts.
"""

from __future__ import annotations

import ast
import functools
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from . import ab_parameters, builds, catalog, fits, results
from .input_errors import ParameterError as ParameterError
from .input_errors import clip as clip
from .input_errors import integer
from .input_errors import short as short
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

# Parameters only 08 reads (its builds, slots, target, plants, budget and confidence)
AB_ONLY = ("build_a", "build_b", "planted_pct", "workers", "resolve_pct", "budget_s", "confidence", "planted_ops")

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

    @property
    def arms(self) -> int:
        """08's arms (``ab_parameters.arm_count``)."""
        return ab_parameters.arm_count(self.planted_pct, self.planted_ops, self.build_b)

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
        "08's core slots, one worker process of every arm on each, an integer from 2 to 8 per core (None: on a GPU "
        "the cores less one, at most 12, as many as the GPU's memory holds; on a CPU 4)",
    ),
    "resolve_pct": (None, "08 stops once B's interval is this narrow on each side, a % in (0, 50) (None: per device)"),
    "budget_s": (
        None,
        "08's seconds in all, builds included, more than its builds take: it adds no rounds past it (None: 160 on "
        "a GPU, 165 on a CPU)",
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
    fit this machine (``fits.check_fits``), and a build other than this environment must start and import
    torch (``builds.check``)."""
    values = {**(raw or {}), **kwargs}
    p = resolved(values, device=resolve_device(values.get("device", SCHEMA["device"][0])))
    fits.check_fits(p, values)
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
    for name, allowed in (("preset", PRESETS), ("dtype", DTYPES), ("cache_mode", CACHE_MODES)):
        if v[name] not in allowed:
            raise ParameterError(name, v[name], ", ".join(allowed))
    for name in ("layers", "batch_size", "seq_len"):
        integer(name, v[name], 1)
    integer("seed", v["seed"], 0, SEED_MAX)
    if not isinstance(v["output_dir"], str):
        raise ParameterError("output_dir", v["output_dir"], "a folder path as a string")
    executors = _names("executors", v["executors"], tuple(REGISTRY))
    ops = _names("ops", v["ops"], OPS)
    sizes = _sizes(v["sizes"], v["preset"])
    device = v["device"]
    if device not in ("cpu", "cuda") and not str(device).startswith("cuda:"):
        raise ParameterError("device", device, "cpu, cuda or cuda:N (resolved)")
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
        **_rounds_and_sweeps(v, device),
        **ab_parameters.resolved(v, device),
    )


def _rounds_and_sweeps(v: dict, device: str) -> dict:
    """The blocks and rounds, the sweeps and the threads of ``v`` (raw values), defaults per device and preset."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    timing = TINY_TIMING if v["preset"] == "tiny" else TIMING_DEFAULTS[kind]
    sweeps = TINY_SWEEPS if v["preset"] == "tiny" else SWEEP_DEFAULTS[kind]
    chosen = {
        name: timing[name] if v[name] is None else integer(name, v[name], low)
        for name, low in (("warmup", 0), ("iters", 1))
    }
    chosen["repeats"] = timing["repeats"] if v["repeats"] is None else _repeats(v["repeats"])
    for name in ("depths", "prompt_lengths"):
        chosen[name] = _int_list(name, v[name], sweeps[name])
    chosen["decode_tokens"] = (
        sweeps["decode_tokens"] if v["decode_tokens"] is None else integer("decode_tokens", v["decode_tokens"], 1)
    )
    chosen["threads"] = _threads(v["threads"], device)
    return chosen


def from_namespace(namespace: dict) -> Params:
    """Validate the parameters a notebook's ``parameters`` cell defined (pass ``globals()``)."""
    return validate({name: namespace[name] for name in SCHEMA if name in namespace})


@functools.cache
def torch_default_threads() -> int:
    """torch's intra-op threads before this process changed them (read once, before ``harness.set_up``)."""
    import torch

    return torch.get_num_threads()


def _threads(value, device: str) -> int:
    if value is None:
        return 1 if device == "cpu" else torch_default_threads()
    return integer("threads", value, 1, os.cpu_count() or 1)


def notebook_defaults(notebook: str) -> dict:
    """The package's default of every parameter for ``notebook``: SCHEMA's, then its catalog entry's."""
    return {name: default for name, (default, _) in SCHEMA.items()} | dict(catalog.entry(notebook).defaults)


def own_defaults(notebook: str, device: str) -> dict:
    """``notebook``'s own defaults on ``device`` (its catalog entry's): ``defaults``, then on a CPU
    ``cpu_defaults``."""
    entry = catalog.entry(notebook)
    return {**entry.defaults, **(entry.cpu_defaults if device == "cpu" else {})}


def for_notebook(notebook: str, given: dict) -> Params:
    """The parameters ``notebook`` runs with in a batch run: ``given`` over its own defaults on the device
    it resolves to (``own_defaults``), checked to fit with the models it holds at once (its catalog entry's
    ``models_held``, or its worker processes: ``fits.check_workers_fit``)."""
    values = {**own_defaults(notebook, resolve_device(given.get("device", SCHEMA["device"][0]))), **given}
    p = validate(values)
    if catalog.entry(notebook).worker_processes:
        if "workers" in given:
            fits.check_workers_fit(p, values)
        elif (fit := fits.workers_that_fit(p)) < p.workers:  # the default: as many as fit now, at least 2
            p = validate({**values, "workers": max(2, fit)})
    elif catalog.entry(notebook).models_held(p):
        fits.check_fits(p, values, notebook=notebook)
    return p
