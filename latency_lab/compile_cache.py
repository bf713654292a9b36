"""Compile caches shared by the notebooks of one run.

Notebooks 02, 03, 05 and 06 each build the same executors in their own kernel. Inductor keeps
compiled graphs in an on-disk cache (``TORCHINDUCTOR_CACHE_DIR``), and nvFuser can keep compiled
kernels in a database keyed by their CUDA source (``NVFUSER_ENABLE=kernel_db``, in
``$TMPDIR/nvfuser_kernel_db``). ``for_run`` points both at a fresh folder for one run, so that
the first notebook to compile a graph or kernel pays for it and later ones load it, and so that no
run starts warm from an earlier one. The folder is removed when the run ends. Only compilation is
cached: Thunder still interprets the model's Python in every notebook.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

MARKER = "LATENCY_LAB_COMPILE_CACHE"  # set for the notebooks' kernels while a run shares its caches


def environment(root: Path) -> dict[str, str]:
    """The variables that point Inductor and nvFuser at ``root`` (nvFuser's options kept)."""
    enabled = [o for o in os.environ.get("NVFUSER_ENABLE", "").split(",") if o and o != "kernel_db"]
    return {"TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"), "TMPDIR": str(root / "tmp"),
            "NVFUSER_ENABLE": ",".join([*enabled, "kernel_db"]), MARKER: "run"}


@contextmanager
def for_run(run_id: str) -> Iterator[Path]:
    """A fresh cache folder for one run, in the variables the notebooks' kernels inherit; the
    previous variables and no folder are left afterwards."""
    root = Path(tempfile.mkdtemp(prefix=f"latency-lab-{run_id}-"))
    (root / "tmp").mkdir()
    values = environment(root)
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield root
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(root, ignore_errors=True)


def usage(root: Path) -> dict:
    """What the run's notebooks left in its cache folder: Inductor's files, nvFuser's kernels."""
    inductor = root / "inductor"
    return {"inductor_files": sum(1 for f in inductor.rglob("*") if f.is_file()) if inductor.is_dir() else 0,
            "nvfuser_kernels": len(list((root / "tmp" / "nvfuser_kernel_db").glob("*.cubin")))}


def describe() -> str:
    """What this process compiles against, for the environment record of every result."""
    if os.environ.get(MARKER) == "run":
        return "per run, shared by its notebooks (Inductor cache, nvFuser kernel DB)"
    return "the tools' defaults (Inductor's machine-wide cache, no nvFuser kernel DB)"
