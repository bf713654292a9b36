"""The environment a run measured in: versions, hardware, torch's threads and the machine's load, which
compile caches it used (never environment variables' values), the known noise filtered from the pages,
and the device's memory bandwidth (datasheet and measured) for bandwidth floors."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import io
import logging
import os
import platform
import re
import subprocess
import sys
import warnings
from datetime import datetime, timezone
from pathlib import Path

import torch

from . import compile_cache, planted

# Datasheet HBM/GDDR bandwidth in bytes/s, matched by substring of the device name (first match).
DATASHEET_BANDWIDTH = (
    ("H200", 4.8e12),
    ("H100 PCIe", 2.0e12),
    ("H100", 3.35e12),
    ("A100-SXM4-80GB", 2.039e12),
    ("A100 80GB PCIe", 1.935e12),
    ("A100", 1.555e12),
    ("L40S", 0.864e12),
    ("L40", 0.864e12),
    ("L4", 0.3e12),
    ("A10G", 0.6e12),
    ("RTX 4090", 1.008e12),
    ("V100", 0.9e12),
    ("T4", 0.32e12),
)
PACKAGES = ("torch", "lightning-thunder", "transformers", "triton", "papermill", "nbconvert", "plotly", "numpy")
NVFUSER_DISTS = ("nvfuser-cu128-torch29", "nvfuser-cu130-torch210", "nvfuser")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def nvfuser_version() -> str | None:
    """The installed nvFuser build's version, whatever its distribution name."""
    for dist in NVFUSER_DISTS:
        if v := _version(dist):
            return f"{v} ({dist})"
    for module in ("nvfuser_direct", "nvfuser"):
        try:
            return str(__import__(module).version())
        except Exception:
            continue
    return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_id(device: str) -> str:
    """Which machine this is, as a short hash (no host name is published): of the host's name, its
    ``/etc/machine-id`` and, on a GPU, the card's UUID. Two runs on one host (and card) share it; a VM
    started again elsewhere, or another card, reads another. ``compare`` judges timings across machines
    only with effects measured across machines."""
    parts = [platform.node()]
    try:
        parts.append(Path("/etc/machine-id").read_text().strip())
    except OSError:
        pass
    if device.startswith("cuda"):
        parts.append(str(getattr(torch.cuda.get_device_properties(device), "uuid", "")))
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


def gpu_info(device: str) -> dict | None:
    if not device.startswith("cuda"):
        return None
    props = torch.cuda.get_device_properties(device)
    info = {
        "name": props.name,
        "count": torch.cuda.device_count(),
        "compute_capability": f"{props.major}.{props.minor}",
        "memory_gib": round(props.total_memory / 2**30, 1),
        "multiprocessors": props.multi_processor_count,
        "driver": None,
    }
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        info["driver"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    return info


# Known, harmless messages that would clutter the rendered pages: (what, pattern, why it is harmless).
KNOWN_NOISE = (
    (
        "No CUDA runtime is found",
        r"No CUDA runtime is found",
        "torch.utils.cpp_extension's log line where a CUDA toolkit is installed but no GPU is visible",
    ),
    (
        "%timeit: The slowest run took ...",
        r"The slowest run took .* times longer than the fastest",
        "IPython's %timeit note; the spread of its runs is in the results",
    ),
    (
        "Profiler clears events at the end of each cycle",
        r"(?s).*Profiler clears events at the end of each cycle",
        "torch.profiler's warning (torch 2.10+) for a profiler without a schedule, which this suite never cycles",
    ),
    (
        "TF32 settings",
        r"(?s).*(TF32|tf32|fp32_precision)",
        "torch's notes on its TF32 settings API, which Inductor and thunder read; no value is changed",
    ),
)
KINETO_ON_CPU = (
    "gpuGetDeviceCount failed with code 35",
    "kineto's log line for every profile on a machine without a GPU (KINETO_LOG_LEVEL=5 there)",
)
_quieted: list[dict] = []  # what quiet_known_noise filters in this process, for the environment record


class _DropMessages(logging.Filter):
    def __init__(self, pattern: str):
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.search(record.getMessage())


def quiet_known_noise() -> list[dict]:
    """Filter the ``KNOWN_NOISE`` messages from this process's output: the log line, the warnings, in
    IPython %timeit's slowest-run note (its result line stays), and without a GPU kineto's log line.
    Idempotent; ``collect`` records what is filtered, once per environment record."""
    if _quieted:
        return _quieted
    (what, pattern, why), timeit_note, profiler, tf32 = KNOWN_NOISE
    logging.getLogger("torch.utils.cpp_extension").addFilter(_DropMessages(pattern))
    for _, message, _ in (profiler, tf32):
        warnings.filterwarnings("ignore", message=message, category=UserWarning)
    entries = [(what, why), (profiler[0], profiler[2]), (tf32[0], tf32[2])]
    if _quiet_timeit(re.compile(timeit_note[1])):
        entries.insert(1, (timeit_note[0], timeit_note[2]))
    if not torch.cuda.is_available() and os.environ.setdefault("KINETO_LOG_LEVEL", "5") == "5":  # read by a profile
        entries.append(KINETO_ON_CPU)
    _quieted.extend({"message": m, "why": w} for m, w in entries)
    return _quieted


class _Captured(io.StringIO):
    """A StringIO with the encoding of the stream it stands in for (%timeit prints µ and ± where it allows)."""

    def __init__(self, encoding: str | None):
        super().__init__()
        self._encoding = encoding

    @property
    def encoding(self):
        return self._encoding


def _quiet_timeit(note: re.Pattern) -> bool:
    """Wrap IPython's %timeit so that its slowest-run note is dropped; False outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    manager = shell.magics_manager  # IPython 9 registers magics lazily: find() loads the real one
    original = manager.find("line", "timeit") if hasattr(manager, "find") else manager.magics["line"]["timeit"]

    def timeit(line="", cell=None, local_ns=None):
        with contextlib.redirect_stdout(_Captured(getattr(sys.stdout, "encoding", None))) as out:
            result = original(line, cell, local_ns)
        sys.stdout.write("".join(s for s in out.getvalue().splitlines(keepends=True) if not note.search(s)))
        return result

    timeit.needs_local_scope = True  # IPython passes the caller's namespace, as to the original
    manager.magics["line"]["timeit"] = timeit
    return True


def collect(device: str) -> dict:
    """Versions and hardware of this process, for the run's ``environment.json`` and every result."""
    return {
        "collected": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "machine": machine_id(device),
        "device": device,
        "gpu": gpu_info(device),
        "torch_cuda_build": torch.version.cuda,
        "packages": {name: _version(name) for name in PACKAGES} | {"nvfuser": nvfuser_version()},
        "compile_cache": compile_cache.describe(),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "quieted_noise": list(_quieted),
        **({"planted_us": delays} if (delays := planted.here()) else {}),
    }


def datasheet_bandwidth(device: str) -> float | None:
    if not device.startswith("cuda"):
        return None
    name = torch.cuda.get_device_name(device)
    return next((bw for key, bw in DATASHEET_BANDWIDTH if key in name), None)


def measured_bandwidth(device: str, gib: float = 1.0, iters: int = 10) -> float | None:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read plus bytes written."""
    if not device.startswith("cuda"):
        return None
    n = int(gib * 2**30)
    src = torch.empty(n, dtype=torch.uint8, device=device).random_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        dst.copy_(src)
    end.record()
    torch.cuda.synchronize(device)
    seconds = start.elapsed_time(end) / 1e3
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n * iters / seconds
