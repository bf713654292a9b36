"""Executor registry: a name maps to a display label (the seed's wording), a factory, the options
it passes, and an availability check that returns the reason it cannot run here instead of raising.
Declarations only: building and measuring is ``harness``'s. Importing it imports no torch.

The levers of notebook 07 are plain entries too (``thunder:nv-linear``, ``thunder:cache-same-input``,
...): Thunder with one compile option changed, usable by every notebook and the explorer.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field
from typing import Callable

# The seed's executor lists; names not registered in the installed thunder (e.g. apex, cudnn) are
# dropped with a note by ``thunder_executors``.
THUNDER_TORCH = ("apex", "cudnn", "sdpa")
THUNDER_TORCHCOMPILE = ("apex", "cudnn", "sdpa", "torchcompile")
THUNDER_TORCHCOMPILE_CAT = ("apex", "cudnn", "sdpa", "torchcompile_cat", "nvfuser")
# What thunder needs before it registers an optional executor of those lists (thunder 0.2.6).
OPTIONAL_NEEDS = {"cudnn": "the cuDNN frontend, pip nvidia-cudnn-frontend", "apex": "NVIDIA Apex"}


# Each CUDA-graph variant and the same executor without graphs (05 times them side by side; 02 says
# which steps stay host-bound under graphs).
GRAPH_PAIRS = (
    ("torch.compile:reduce-overhead", "torch.compile"),
    ("thunder:cudagraphs", "thunder"),
    ("thunder.compile:reduce-overhead", "thunder.compile"),
)


@dataclass(frozen=True)
class Executor:
    name: str
    label: str
    summary: str
    factory: Callable  # (module, notes: list[str]) -> callable
    needs_cuda: bool = False
    needs_thunder: bool = False
    needs_nvfuser: bool = False
    entry_point: str | None = None  # a thunder attribute (``compile``, ``dynamo.thunderfx``) it calls
    options: dict = field(default_factory=dict)  # the compile options it passes (levers), shown in tables
    lever: str | None = None  # for a lever: the part of the host time it is meant to shrink

    def check(self, device: str) -> tuple[str, str] | None:
        """None when it can run on ``device``; else ``("unavailable", reason)`` when this machine
        cannot run it (no GPU), or ``("failed", reason)`` for a broken install (an import error)."""
        if self.needs_cuda and not device.startswith("cuda"):
            return "unavailable", f"needs a CUDA device (running on {device})"
        if self.needs_thunder and (reason := thunder_missing()):
            return "failed", reason
        if self.entry_point and (reason := thunder_lacks(self.entry_point)):
            return "unavailable", reason
        if self.needs_nvfuser and not device.startswith("cuda"):
            return "unavailable", f"nvFuser needs a CUDA device (running on {device})"
        if self.needs_nvfuser and (reason := nvfuser_missing()):
            return "failed", reason
        if "cache" in self.options and (reason := thunder_refuses_cache(self.options["cache"])):
            return "unavailable", reason
        return None

    def build(self, module) -> tuple[Callable, list[str]]:
        """The compiled callable and notes about what was filtered or changed."""
        notes: list[str] = []
        return self.factory(module, notes), notes


@functools.cache
def thunder_missing() -> str | None:
    try:
        import thunder  # noqa: F401
    except Exception as e:  # an import error of any kind is a reason, not a crash
        return f"thunder fails to import: {type(e).__name__}: {e}"
    return None


@functools.cache
def thunder_lacks(entry_point: str) -> str | None:
    """None when the installed thunder has ``thunder.<entry_point>``, else why not."""
    import importlib

    import thunder

    module, _, attr = f"thunder.{entry_point}".rpartition(".")
    try:
        getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        return f"thunder {getattr(thunder, '__version__', '?')} has no thunder.{entry_point} ({type(e).__name__})"
    return None


def _indexes_a_list(x, n):
    return [x, x + 1][n]


@functools.cache
def thunder_refuses_cache(cache: str) -> str | None:
    """None when the installed thunder runs ``thunder.jit(..., cache=cache)`` on a function that, as a
    Llama step does, indexes a list by an int argument; else why not (checked once, on a CPU tensor)."""
    import thunder
    import torch

    try:
        with warnings.catch_warnings():  # "symbolic values" warns that it is experimental
            warnings.simplefilter("ignore")
            thunder.jit(_indexes_a_list, cache=cache)(torch.ones(2), 1)
    except Exception as e:  # the option refused or the trace broken: a reason, not a crash
        version = getattr(thunder, "__version__", "?")
        return f"thunder {version} cannot run cache={cache!r}: {type(e).__name__}: {str(e)[:200]}"
    return None


@functools.cache
def nvfuser_missing() -> str | None:
    """None when thunder registered its nvFuser executor (checked on a CUDA machine), else the error."""
    import thunder

    if "nvfuser" in {ex.name for ex in thunder.get_all_executors()}:
        return None
    try:
        import nvfuser  # noqa: F401
    except Exception as e:
        return f"nvFuser fails to import: {type(e).__name__}: {e}"
    return "nvFuser imports but thunder did not register its executor"


def thunder_executors(wanted: tuple[str, ...], notes: list[str]) -> list:
    """The executors of ``wanted`` that thunder has registered here; the rest go to ``notes``."""
    import thunder

    registered = {ex.name: ex for ex in thunder.get_all_executors()}
    missing = [n for n in wanted if n not in registered]
    if missing:
        needs = "; ".join(f"{n} needs {OPTIONAL_NEEDS.get(n, 'its library')}" for n in missing)
        notes.append(
            f"skipped {', '.join(missing)}: in the seed's executor list, not in thunder's here (thunder registers "
            f"these optional executors only where their library is installed, and it is not here: {needs}); the "
            "list's other executors run"
        )
    return [registered[n] for n in wanted if n in registered]


def _eager(module, notes):
    return module


# Dynamo keeps every compiled executor's code until a reset, and a reset would make torch.compile's
# CUDA graphs record again on their next call, freeing cuBLAS workspaces that a thunder CUDA graph
# captured earlier (see THUNDER_CUDAGRAPHS_HAZARD): so no executor resets Dynamo. Instead, shapes are
# static (a second size of an op is a recompile, never a switch to dynamic kernels) and the
# recompile limit is high enough for every build of a run.
DYNAMO_RECOMPILE_LIMIT = 256


def _dynamo_static() -> dict:
    """torch.compile's keyword arguments for static shapes, with Dynamo's recompile limit raised."""
    import torch

    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(getattr(config, name), DYNAMO_RECOMPILE_LIMIT))
    return {"dynamic": False}


def _torch_compile(mode: str | None):
    def factory(module, notes):
        import torch

        return torch.compile(module, mode=mode, **_dynamo_static())

    return factory


# Found on the H200 (torch 2.11, thunder 0.2.6): thunder's CUDAGraphTransform warms a region up on
# a side stream, so the cuBLAS GEMMs it then captures use that stream's cuBLAS workspace, which lives
# outside the graph's pool. torch.compile's CUDA graphs free every cuBLAS workspace whenever they warm
# up or record, and their capture's empty_cache() hands that memory back to the driver: the thunder
# graph's next replay is an illegal memory access, which poisons the process. Freeing the workspaces
# alone reproduces it; allocating the workspace inside the capture avoids it. The registry order
# (reduce-overhead first) and a warm-up before the next executor is built keep every recording
# before thunder's capture.
THUNDER_CUDAGRAPHS_HAZARD = (
    "its graphs keep the cuBLAS workspace of thunder's warm-up stream; a torch.compile "
    "CUDA-graph recording after its capture frees it and the next replay faults "
    "(illegal memory access), so it is built after reduce-overhead has recorded"
)


def _thunder(wanted: tuple[str, ...] | None, cudagraphs: bool = False, options: dict | None = None):
    def factory(module, notes):
        import thunder

        kwargs = dict(options or {})
        if wanted is not None:
            kwargs["executors"] = thunder_executors(wanted, notes)
        if cudagraphs:
            from thunder.transforms.cudagraph import CUDAGraphTransform

            kwargs["transforms"] = [CUDAGraphTransform()]
            notes.append(THUNDER_CUDAGRAPHS_HAZARD)
        if wanted is None:
            notes.append("default executors: " + ", ".join(ex.name for ex in thunder.get_default_executors()))
        return thunder.jit(module, **kwargs)

    return factory


def _thunder_compile(plugins: str | None):
    def factory(module, notes):
        import thunder
        import thunder.recipes  # registers the recipes that get_for_model picks from

        recipe = thunder.Recipe.get_for_model(module)
        notes.append(f"recipe {type(recipe).__name__}" + (f", plugins={plugins!r}" if plugins else ""))
        return thunder.compile(module, recipe=recipe, plugins=plugins)

    return factory


def _thunderfx(module, notes):
    from thunder.dynamo import thunderfx

    return thunderfx(module, **_dynamo_static())


_ALL = [
    Executor("eager", "torch-eager", "the module as is", _eager),
    Executor(
        "torch.compile", "torch.compile", "torch.compile(model), Inductor defaults, static shapes", _torch_compile(None)
    ),
    Executor(
        "torch.compile:reduce-overhead",
        "torch.compile+CUDA graphs",
        "torch.compile(model, mode='reduce-overhead'): Inductor with CUDA graphs, static shapes",
        _torch_compile("reduce-overhead"),
        needs_cuda=True,
    ),
    Executor(
        "thunder",
        "Thunder-nvFuser",
        "thunder.jit(model), default executors (nvFuser on GPU)",
        _thunder(None),
        needs_thunder=True,
        needs_nvfuser=True,
    ),
    Executor(
        "thunder:torch",
        "Thunder-torch",
        f"thunder.jit(model, executors={list(THUNDER_TORCH)}): no fusion executor",
        _thunder(THUNDER_TORCH),
        needs_thunder=True,
    ),
    Executor(
        "thunder:torchcompile",
        "Thunder-torch.compile",
        f"thunder.jit(model, executors={list(THUNDER_TORCHCOMPILE)})",
        _thunder(THUNDER_TORCHCOMPILE),
        needs_thunder=True,
    ),
    Executor(
        "thunder:torchcompile_cat",
        "Thunder-torch.compile_cat",
        f"thunder.jit(model, executors={list(THUNDER_TORCHCOMPILE_CAT)})",
        _thunder(THUNDER_TORCHCOMPILE_CAT),
        needs_thunder=True,
    ),
    Executor(
        "thunder.compile",
        "thunder.compile",
        "thunder.compile(model): the recipe thunder picks for the model (nvFuser for HF models)",
        _thunder_compile(None),
        needs_thunder=True,
        needs_nvfuser=True,
        entry_point="compile",
    ),
    Executor(
        "thunderfx",
        "ThunderFX",
        "thunder.dynamo.thunderfx(model): Dynamo front end, Thunder back end",
        _thunderfx,
        needs_thunder=True,
        entry_point="dynamo.thunderfx",
    ),
    Executor(
        "thunder:cudagraphs",
        "Thunder-nvFuser+CUDA graphs",
        "thunder.jit(model, transforms=[CUDAGraphTransform()]), default executors",
        _thunder(None, cudagraphs=True),
        needs_cuda=True,
        needs_thunder=True,
    ),
    Executor(
        "thunder.compile:reduce-overhead",
        "thunder.compile+CUDA graphs",
        "thunder.compile(model, plugins='reduce-overhead'): the recipe plus CUDAGraphTransform",
        _thunder_compile("reduce-overhead"),
        needs_cuda=True,
        needs_thunder=True,
        needs_nvfuser=True,
        entry_point="compile",
    ),
]


def _lever(name: str, label: str, lever: str, options: dict, needs_nvfuser: bool = True) -> Executor:
    """Thunder-nvFuser (default executors) with ``options`` passed to ``thunder.jit``."""
    shown = ", ".join(f"{k}={v!r}" for k, v in options.items())
    return Executor(
        name,
        label,
        f"thunder.jit(model, {shown}), default executors",
        _thunder(None, options=options),
        needs_thunder=True,
        needs_nvfuser=needs_nvfuser,
        options=dict(options),
        lever=lever,
    )


# The seed's remedies as compile options of thunder 0.2.6 (thunder/executors/nvfuserex_impl.py, thunder.jit).
LEVERS = [
    _lever(
        "thunder:nv-linear",
        "Thunder-nvFuser, linear+matmul in nvFuser",
        "ops outside fusions",
        {"nv_enable_linear": True, "nv_enable_matmul": True},
    ),
    _lever("thunder:nv-sdpa", "Thunder-nvFuser, SDPA in nvFuser", "ops outside fusions", {"nv_enable_sdpa": True}),
    _lever(
        "thunder:nv-embedding",
        "Thunder-nvFuser, embedding in nvFuser",
        "ops outside fusions",
        {"nv_enable_embedding": True},
    ),
    _lever(
        "thunder:nv-skip-cache",
        "Thunder-nvFuser, no FusionDefinition lookup",
        "nvFusion regions",
        {"nv_skip_cache": True},
    ),
    _lever(
        "thunder:cache-same-input",
        "Thunder, cache='same input'",
        "cache lookup + prologue",
        {"cache": "same input"},
        needs_nvfuser=False,
    ),
    _lever(
        "thunder:cache-symbolic",
        "Thunder, cache='symbolic values'",
        "cache lookup + prologue",
        {"cache": "symbolic values"},
        needs_nvfuser=False,
    ),
]
_ALL += LEVERS
REGISTRY: dict[str, Executor] = {ex.name: ex for ex in _ALL}
THUNDER_NAMES = tuple(n for n, ex in REGISTRY.items() if ex.needs_thunder)
LEVER_NAMES = tuple(ex.name for ex in LEVERS)


def combination(names) -> Executor:
    """One Thunder configuration with the options of several levers together (``thunder:a+b``)."""
    levers = [REGISTRY[n] for n in names]
    options = {k: v for ex in levers for k, v in ex.options.items()}
    name = "thunder:" + "+".join(n.removeprefix("thunder:") for n in names)
    return _lever(
        name,
        "Thunder, " + " + ".join(ex.label.split(", ", 1)[-1] for ex in levers),
        ", ".join(dict.fromkeys(ex.lever for ex in levers)),
        options,
        needs_nvfuser=any(ex.needs_nvfuser for ex in levers),
    )


def selected(names) -> list[Executor]:
    """Registry entries for validated names, in registry order."""
    return [ex for n, ex in REGISTRY.items() if n in names]
