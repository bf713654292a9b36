"""The environment a run measured in: versions, hardware and which compile caches it used (never
environment variables' values), and the device's memory bandwidth (datasheet and measured) for
bandwidth floors."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from datetime import datetime, timezone

import torch

from . import compile_cache

# Datasheet HBM/GDDR bandwidth in bytes/s, matched by substring of the device name (first match).
DATASHEET_BANDWIDTH = (
    ("H200", 4.8e12), ("H100 PCIe", 2.0e12), ("H100", 3.35e12), ("A100-SXM4-80GB", 2.039e12),
    ("A100 80GB PCIe", 1.935e12), ("A100", 1.555e12), ("L40S", 0.864e12), ("L40", 0.864e12),
    ("L4", 0.3e12), ("A10G", 0.6e12), ("RTX 4090", 1.008e12), ("V100", 0.9e12), ("T4", 0.32e12),
)
PACKAGES = ("torch", "lightning-thunder", "transformers", "triton", "papermill", "nbconvert",
            "plotly", "numpy")
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


def gpu_info(device: str) -> dict | None:
    if not device.startswith("cuda"):
        return None
    props = torch.cuda.get_device_properties(device)
    info = {"name": props.name, "count": torch.cuda.device_count(),
            "compute_capability": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1),
            "multiprocessors": props.multi_processor_count, "driver": None}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        info["driver"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    return info


def collect(device: str) -> dict:
    """Versions and hardware of this process, for the run's ``environment.json`` and every result."""
    return {
        "collected": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "device": device,
        "gpu": gpu_info(device),
        "torch_cuda_build": torch.version.cuda,
        "packages": {name: _version(name) for name in PACKAGES} | {"nvfuser": nvfuser_version()},
        "compile_cache": compile_cache.describe(),
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
