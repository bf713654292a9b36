#!/usr/bin/env python
"""Each executor's step counted (``instruments.counts``) in this process, as data, so that counts from several
processes and machines can be held against each other:

    python tools/count_steps.py --preset seed --executors eager,thunder --json OUT.json
    python tools/count_steps.py --check benchmarks/counts/*/counts-*.json.xz

builds the model and each executor as the suite does (``harness.prepare``, then a warm-up), counts one step
with instructions where ``sys.monitoring`` has them, and writes per executor its counters, the counters whose
two counted steps differed, its top functions, what was unavailable, and the counting pass's seconds.
``--check`` reads such files (``.json`` or ``.json.xz``) and prints per executor whether every judged counter
and every function's starts are the same in all of them, or which differ and their values.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from latency_lab.core import harness, model, parameters, registry, timing  # noqa: E402
from latency_lab.instruments import counts  # noqa: E402


def check(files: list[str]) -> int:
    """Per executor in ``files``: ``identical`` over them, or the judged counters and functions that differ;
    1 where any differ."""
    runs = [
        json.loads(lzma.decompress(Path(f).read_bytes()) if f.endswith(".xz") else Path(f).read_text()) for f in files
    ]
    differ = False
    for name in dict.fromkeys(k for r in runs for k in r):
        got = [r.get(name, {}) for r in runs]
        spread = {
            k: [g.get("counters", {}).get(k) for g in got]
            for k in counts.JUDGED
            if len({json.dumps(g.get("counters", {}).get(k)) for g in got}) > 1
        }
        if len({json.dumps(g.get("all_functions") or g.get("functions")) for g in got}) > 1:
            spread["functions"] = ["differ"]
        differ |= bool(spread)
        print(f"{name}: {'identical' if not spread else spread} over {len(runs)} files")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="seed")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--executors", default="eager,thunder")
    ap.add_argument("--json")
    ap.add_argument("--check", nargs="+", metavar="FILE", help="compare files this tool wrote; count nothing")
    args = ap.parse_args()
    if args.check:
        return check(args.check)
    if not args.json:
        ap.error("--json FILE is required (or --check FILE ...)")
    p = parameters.resolved(preset=args.preset, device=parameters.resolve_device(args.device), executors=args.executors)
    harness.set_up(p)
    setup = model.build(p)
    out = {}
    for ex in registry.selected(p.executors):
        m = harness.prepare(ex, setup.model, setup.kwargs, p.device)
        if not m.ok:
            out[ex.name] = {"status": m.status, "reason": m.reason}
            Path(args.json).write_text(json.dumps(out, indent=1))
            continue
        timing.warm_up(m.fn, setup.kwargs, p.warmup)
        out[ex.name] = counts.count_step(m.fn, setup.kwargs, p.device, instructions=True).to_dict()
        print(ex.name, out[ex.name]["counters"], f"{out[ex.name]['seconds']:.2f} s", flush=True)
        harness.release(m, p.device)
        Path(args.json).write_text(json.dumps(out, indent=1))  # after each executor: a run cut short keeps its counts
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
