#!/usr/bin/env python
"""What one notebook-08 worker holds on the GPU, to size ``fits.PROCESS_BYTES`` from a measurement:

    python tools/worker_memory.py --preset seed --executors thunder [--json OUT]

builds one worker in this process as 08 does (``studies.ab.worker.Worker.build``: the model, each executor and
its first call, then the caching allocator emptied) and prints the allocator's peak and what it holds after,
the process's whole GPU memory as the driver counts it (``nvidia-smi``: context, kernels, workspaces
included), its RSS, and ``fits.worker_bytes``' estimate beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from latency_lab.core import fits, parameters  # noqa: E402
from latency_lab.studies.ab import worker  # noqa: E402


def driver_mib(pid: int) -> float | None:
    """The process's GPU memory as ``nvidia-smi`` counts it (MiB), or None."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    rows = [line.split(",") for line in out.strip().splitlines() if line.strip()]
    return next((float(mib) for p, mib in rows if int(p) == pid), None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="seed")
    ap.add_argument("--executors", default="thunder")
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch

    p = parameters.resolved(preset=args.preset, executors=args.executors, device="cuda", budget_s=10_000)
    w = worker.Worker()
    built = w.build(p.to_dict(), list(p.executors))
    rss = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    out = {
        "executors": {k: {"status": v["status"], "reason": v["reason"]} for k, v in built.items()},
        "peak_reserved_mib": torch.cuda.max_memory_reserved() / 2**20,
        "reserved_after_mib": torch.cuda.memory_reserved() / 2**20,
        "allocated_after_mib": torch.cuda.memory_allocated() / 2**20,
        "driver_mib": driver_mib(os.getpid()),
        "rss_mib": rss / 2**20,
        "estimate_mib": fits.worker_bytes(p) / 2**20,
        "build_peak_estimate_mib": (fits.memory_needed(p) + fits.PROCESS_BYTES["cuda"]) / 2**20,
    }
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
