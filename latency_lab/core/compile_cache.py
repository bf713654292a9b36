"""Compile caches shared by the notebooks of one run.

Notebooks 02, 05 and 06 each build the same executors in their own kernel. Inductor keeps compiled
graphs in an on-disk cache (``TORCHINDUCTOR_CACHE_DIR``), and nvFuser can keep compiled kernels in a
database keyed by their CUDA source (``NVFUSER_ENABLE=kernel_db``, in ``$TMPDIR/nvfuser_kernel_db``).
``make`` creates a fresh folder for one run and ``environment`` points both at it for the run's
kernels (``notebook_run.kernel_environment``), so that the first notebook to compile a graph or
kernel pays for it and later ones load it, and so that no run starts warm from an earlier one;
``close`` removes the folder when the run ends. Only compilation is cached: Thunder still
interprets the model's Python in every notebook.

On a CPU, Inductor's first compile in a process also checks which vector instructions build and
load (``torch._inductor.cpu_vec_isa``): for each of AVX2, AVX-512 (with bf16) and AMX (with fp16) it
compiles a probe and loads it in a fresh ``python -c "import torch ..."``, six such processes on a
Sapphire Rapids host. That is 50 s of a tiny 02's 67 s torch.compile first call on the H100
machine's host (torch's CUDA build imports in 3.6 s there) and ~7 s on the 2-core CPU machine, in
every notebook's kernel. ``share_isa_checks`` has the run's kernels share the answers, as they share
the compiled probes: the first kernel checks, the others read what it found.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

MARKER = "LATENCY_LAB_COMPILE_CACHE"  # "run" for the notebooks' kernels while a run shares its caches


def make(run_id: str) -> Path:
    """A fresh cache folder for one run (in the temp folder); OSError when it cannot be made."""
    root = Path(tempfile.mkdtemp(prefix=f"latency-lab-{run_id}-"))
    (root / "tmp").mkdir()
    return root


def environment(root: Path | None) -> dict[str, str | None]:
    """The variables for the run's kernels: pointed at ``root`` (nvFuser's other options kept), or
    for None (the tools' own caches) just no marker, so an outer run's cannot leak in."""
    if root is None:
        return {MARKER: None}
    enabled = [o for o in os.environ.get("NVFUSER_ENABLE", "").split(",") if o and o != "kernel_db"]
    return {
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
        "TMPDIR": str(root / "tmp"),
        "NVFUSER_ENABLE": ",".join([*enabled, "kernel_db"]),
        MARKER: "run",
    }


def share_isa_checks() -> bool:
    """In a kernel of a run that shares its caches: Inductor's CPU instruction-set checks answered once
    per run (module docstring), each answer a file in the run's Inductor cache. Returns whether it
    is in effect (not outside such a run, nor with a torch whose checks are not where they were)."""
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if os.environ.get(MARKER) != "run" or not cache:
        return False
    from torch._inductor import cpu_vec_isa

    check = getattr(cpu_vec_isa.VecISA, "check_build", None)
    if check is None or getattr(check, "shared_by_run", False):
        return check is not None
    folder = Path(cache) / "isa-checks"

    def shared(isa, code: str) -> bool:
        key = hashlib.sha256(f"{type(isa).__name__}\0{isa.build_arch_flags()}\0{code}".encode()).hexdigest()
        answer = folder / key[:24]
        if answer.is_file():
            return answer.read_text() == "builds"
        ok = check(isa, code)
        folder.mkdir(parents=True, exist_ok=True)
        part = answer.with_suffix(f".{os.getpid()}")
        part.write_text("builds" if ok else "does not build")
        os.replace(part, answer)
        return ok

    shared.shared_by_run = True
    cpu_vec_isa.VecISA.check_build = shared
    return True


def close(root: Path) -> dict:
    """What the run's notebooks left in its cache folder (Inductor's files, nvFuser's kernels),
    then the folder removed."""
    inductor = root / "inductor"
    left = {
        "inductor_files": sum(1 for f in inductor.rglob("*") if f.is_file()) if inductor.is_dir() else 0,
        "nvfuser_kernels": len(list((root / "tmp").glob("**/nvfuser_kernel_db/*.cubin"))),
    }  # one DB per GPU too
    shutil.rmtree(root, ignore_errors=True)
    return left


def describe() -> str:
    """Which compile caches this process uses, for the environment record of every result (what
    the variables do, never their values)."""
    if os.environ.get(MARKER) == "run":
        return "per run, shared by its notebooks (Inductor cache, nvFuser kernel DB)"
    inductor = (
        "Inductor's cache where TORCHINDUCTOR_CACHE_DIR says"
        if os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        else "Inductor's machine-wide cache"
    )
    kernel_db = "kernel_db" in os.environ.get("NVFUSER_ENABLE", "").split(",")
    return f"not per run: {inductor}, {'nvFuser kernel DB on' if kernel_db else 'no nvFuser kernel DB'}"
