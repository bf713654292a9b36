"""The timing notebook's measurements per executor and the seed-shaped table built from them.

Each executor is built, warmed up and measured before the next is built: ``%timeit`` (issued by the
notebook itself, as in the seed), the profiler's kernel count and time and the host submit time,
each in its own calls so that none leaks into another. Then the CUDA-event wall time runs on all
executors in interleaved rounds, as two passes that show how well each row repeats. A failure,
even one that poisons the CUDA context, stays in its own row.
"""

from __future__ import annotations

from . import reference, timing, traces
from .executors import Prepared, cuda_context_error, describe, prepare
from .model import compare_to_eager, logits_of
from .tables import number

AGREEMENT = 0.10  # two wall-time passes of one executor should agree within 10%
TIMEIT_RUNS = 7  # %timeit -r: the seed's "mean ± std. dev. of 7 runs"
HOST_REFERENCE = "host reference"  # the fixed Python loop timed in every wall-time round
HOST_BOUND = 0.85  # a GPU step whose host submit time is >= 85% of its wall time is host-bound

# The seed's DGX H100 table, in its column order, then this suite's additions.
SEED_COLUMNS = ["Execution Type", "Wall Clock Time (ms)", "CPU Overhead (ms)", "Kernel Time (ms)",
                "Kernels", "Overhead / Kernel (us)"]
COLUMNS = SEED_COLUMNS + ["%timeit (ms)", "wall IQR (%)", "floor (ms)", "wall / floor", "noisy", "pass 2 / pass 1", "host submit (ms)",
                          "host-bound", "first call (s)", "source", "status", "reason"]


def build_and_measure(executors, setup, methods: dict, device: str) -> tuple[dict[str, Prepared], dict[str, dict]]:
    """Build each executor and run ``methods`` ({label: callable(prepared) -> dict}) on it before the
    next is built, so each is measured right after its own first call and a failure stays in its
    own row. A failure that poisons the CUDA context (a sticky error) leaves the executors after it
    as rows that say so; the notebook itself never crashes."""
    prepared: dict[str, Prepared] = {}
    measured: dict[str, dict] = {}
    for ex in executors:
        p = prepared[ex.name] = prepare(ex, setup.model, setup.kwargs, device)
        print(f"{ex.label}: first call {p.first_call_s:.2f} s; " if p.ok else f"{ex.label}: ", end="", flush=True)
        if p.ok:
            measured[ex.name] = {}
            for label, method in methods.items():
                try:
                    measured[ex.name][label] = method(p)
                except Exception as e:  # one executor's failure is its row's reason
                    p.fail(e, label)
                    break
        print(p.status if p.ok else f"{p.status}: {p.reason}", flush=True)
    return prepared, measured


def check_output(p: Prepared, reference_logits, dtype: str, layers: int) -> dict:
    """The first call's logits against eager's (``model.compare_to_eager``); a mismatch fails the row,
    since the timings of a wrong computation mean nothing."""
    check = compare_to_eager(logits_of(p.output), reference_logits, dtype, layers)
    if not check["passed"]:
        raise ValueError(f"logits differ from eager's: rel err {check['rel_err']} > {check['tolerance']} "
                         f"{check.get('mismatch') or ''}".strip())
    return check


def methods(kwargs: dict, params, timeit, reference_logits) -> dict:
    """The per-executor methods, in the order they run on each executor. ``timeit(fn)`` runs
    IPython's ``%timeit`` in the notebook and returns its ``TimeitResult``. The output check comes
    first, before a later call can overwrite a CUDA graph's output; then the warm-up: torch.compile's
    CUDA graphs record on a later call than the first, and must do so before the next executor is
    built (``executors.THUNDER_CUDAGRAPHS_HAZARD`` says why). A Thunder executor's trace row for notebook
    03 (``traces.row_of``) is taken between the two, right after the first call."""
    device = params.device
    steps = max(3, min(params.iters, 10))
    return {
        "output": lambda p: check_output(p, reference_logits, params.dtype, params.layers),
        "trace": lambda p: traces.row_of(p, kwargs) if p.executor.needs_thunder else None,
        "warm-up": lambda p: timing.warm_up(p.fn, kwargs, params.warmup),
        "timeit": lambda p: timing.timeit_record(timeit(p.fn)),
        "kernels": lambda p: timing.profile_kernels(p.fn, kwargs, device, steps),
        "host": lambda p: timing.host_submit(p.fn, kwargs, device, params.iters),
    }


def pass_of(round_index: int) -> int:
    """The pass (0 or 1) of a wall-time round, in ABBA order: rounds 0, 3, 4, 7, ... make pass 1 and
    rounds 1, 2, 5, 6, ... pass 2, so that a steady drift of the machine falls on both passes alike."""
    return (0, 1, 1, 0)[round_index % 4]


def interleaved_walls(prepared: dict[str, Prepared], kwargs: dict, params) -> dict[str, dict]:
    """The seed's CUDA-event timer on every executor that runs, in 2 x ``repeats`` interleaved rounds
    after one discarded warm-up round. Each round gives every executor one block (``warmup`` calls,
    then ``iters`` timed calls), in forward then reverse order, and times ``timing.host_reference_ms``
    beside them, so a drift of the machine itself shows. Rounds split into two passes (``pass_of``)
    whose medians show how well a row repeats. A failure ends that executor's blocks (the blocks
    before it stand); a lost CUDA context ends everyone's."""
    names = [n for n, p in prepared.items() if p.ok]
    rounds: dict[str, list[float]] = {n: [] for n in [*names, HOST_REFERENCE]}
    errors: dict[str, str] = {}
    for r in range(-1, 2 * params.repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            if name in errors:
                continue
            if lost := cuda_context_error(params.device):
                errors.update({n: f"not run: the CUDA context was lost earlier ({lost})" for n in names if n not in errors})
                break
            try:
                block = timing.event_timer(prepared[name].fn, kwargs, params.device, params.warmup, params.iters, 1)
            except Exception as e:  # one executor's failure is its row's reason
                errors[name] = f"{'warm-up round' if r < 0 else f'round {r + 1}'}: {describe(e)}"
                continue
            if r >= 0:
                rounds[name].append(block["median"])
        reference_ms = timing.host_reference_ms()
        if r >= 0:
            rounds[HOST_REFERENCE].append(reference_ms)
    walls = {n: _wall_record(rounds[n], errors.get(n), timing.method_name(params.device), params) for n in names}
    walls[HOST_REFERENCE] = _wall_record(rounds[HOST_REFERENCE], None, "perf_counter", params)
    return walls


def _wall_record(rounds_ms: list[float], error: str | None, method: str, params) -> dict:
    """Statistics over an executor's blocks, all and per pass, and its error if it stopped early."""
    record = {"method": method, "warmup": params.warmup, "iters": params.iters, "repeats": params.repeats,
              "rounds_ms": rounds_ms, "error": error}
    if rounds_ms:
        by_pass = ([ms for i, ms in enumerate(rounds_ms) if pass_of(i) == k] for k in (0, 1))
        record.update(timing.stats(rounds_ms), passes=[timing.stats(p) if p else None for p in by_pass])
    return record


def pass_medians(wall: dict | None) -> list[float | None]:
    """The median of each of a wall record's two passes (None for a pass with no block)."""
    return [p and p["median"] for p in (wall or {}).get("passes") or [None, None]]


def wall_rows(walls: dict[str, dict]) -> list[dict]:
    """Per executor: median and spread of all its wall-time blocks, each pass's median, its error."""
    rows = []
    for name, w in walls.items():
        first, second = pass_medians(w)
        rows.append({"executor": name, **{k: w.get(k) for k in ("median", "iqr", "min", "max", "n", "noisy")},
                     "pass 1": first, "pass 2": second, "warmup": w["warmup"], "iters": w["iters"], "error": w["error"]})
    return rows


def drift_rows(walls: dict[str, dict]) -> list[dict]:
    """Every block in time order, relative to its executor's median: a drift of the machine moves
    all executors (and the host reference) together; an executor's own noise moves it alone."""
    return [{"executor": name, "round": i + 1, "pass": pass_of(i) + 1, "ms": ms, "relative to median": ms / w["median"]}
            for name, w in walls.items() for i, ms in enumerate(w["rounds_ms"])]


def measured_row(p: Prepared, measured: dict | None, wall: dict | None, floor_ms: float | None = None) -> dict:
    """One executor's row in the seed's column order, with spread, repeatability, its ratio to the
    memory-bandwidth floor and status: ``partial`` when its wall-time blocks stopped part-way."""
    measured = measured or {}
    timeit, host = measured.get("timeit"), measured.get("host")
    kernels = measured.get("kernels") or {}
    wall = wall or {}
    wall_ms = wall.get("median")
    derived = timing.seed_table_row(wall_ms, kernels.get("kernel_ms_per_step"), kernels.get("kernels_per_step")) \
        if wall_ms is not None else {}
    first, second = pass_medians(wall)
    ratio = second / first if first and second else None
    status = p.status if not (p.ok and wall.get("error")) else "partial" if wall_ms is not None else "failed"
    row = {
        "Execution Type": p.executor.label,
        "Wall Clock Time (ms)": wall_ms,
        "CPU Overhead (ms)": derived.get("cpu_overhead_ms"),
        "Kernel Time (ms)": kernels.get("kernel_ms_per_step"),
        "Kernels": kernels.get("kernels_per_step"),
        "Overhead / Kernel (us)": derived.get("overhead_per_kernel_us"),
        "%timeit (ms)": f"{number(timeit['mean_ms'])} ± {number(timeit['std_ms'])}" if timeit else None,
        "wall IQR (%)": wall["rel_spread"] * 100 if wall_ms is not None else None,
        "floor (ms)": floor_ms,
        "wall / floor": wall_ms / floor_ms if wall_ms is not None and floor_ms else None,
        "noisy": bool(wall_ms is not None and (wall["noisy"] or (ratio is not None and abs(ratio - 1) > AGREEMENT))),
        "pass 2 / pass 1": ratio,
        "host submit (ms)": host["median"] if host else None,
        "host-bound": bool(host["median"] >= HOST_BOUND * wall_ms) if host and wall_ms and "kernel_ms_per_step" in kernels else None,
        "first call (s)": p.first_call_s,
        "source": "measured here",
        "status": status,
        "reason": "; ".join(filter(None, (p.reason, kernels.get("reason"), wall.get("error") and f"wall: {wall['error']}"))) or None,
        "executor": p.executor.name,
    }
    return row


def reference_rows() -> list[dict]:
    """The seed's published tables as rows, labelled with their GPU and method."""
    from .executors import REGISTRY

    rows = []
    nsight = reference.SEED_NSIGHT_DGX_H100
    for name, values in nsight["rows"].items():
        rows.append({"Execution Type": REGISTRY[name].label, **dict(zip(SEED_COLUMNS[1:], values)),
                     "source": f"seed: {nsight['gpu']}, {nsight['method']}", "executor": name})
    timer = reference.SEED_CUDA_TIMER_DGX_H100
    for name, ms in timer["rows"].items():
        rows.append({"Execution Type": REGISTRY[name].label, "Wall Clock Time (ms)": ms,
                     "source": f"seed: {timer['gpu']}, {timer['method']}", "executor": name,
                     "reason": timer["notes"].get(name)})
    l40s = reference.SEED_TIMEIT_L40S
    for name, t in l40s["rows"].items():
        rows.append({"Execution Type": REGISTRY[name].label, "%timeit (ms)": f"{number(t['mean_ms'])} ± {number(t['std_ms'])}",
                     "source": f"seed: {l40s['gpu']}, %timeit", "executor": name})
    return rows


def ranking_text(rows: list[dict], walls: dict[str, dict]) -> str:
    """Which executor is fastest here, and whether the seed's wall-time order holds here. Two
    executors whose pass medians overlap are a tie ("~"): this run cannot order them."""
    measured = sorted((r for r in rows if r.get("Wall Clock Time (ms)") is not None and r["source"] == "measured here"),
                      key=lambda r: r["Wall Clock Time (ms)"])
    if not measured:
        return "No executor produced a wall time here."
    medians = {r["executor"]: [m for m in pass_medians(walls.get(r["executor"])) if m] for r in measured}

    def tied(fast: str, slow: str) -> bool:  # the slower row's lowest pass is not above the faster's highest
        return bool(medians[fast] and medians[slow] and min(medians[slow]) <= max(medians[fast]))

    order = f"{measured[0]['Execution Type']} ({number(measured[0]['Wall Clock Time (ms)'])} ms)"
    for prev, r in zip(measured, measured[1:]):
        order += f" {'~' if tied(prev['executor'], r['executor']) else '<'} {r['Execution Type']} ({number(r['Wall Clock Time (ms)'])} ms)"
    seed = reference.SEED_NSIGHT_DGX_H100["rows"]
    here = [r["executor"] for r in measured if r["executor"] in seed]
    seed_order = sorted(here, key=lambda n: seed[n][0])
    flipped = [(a, b) for i, a in enumerate(here) for b in here[i + 1:]
               if seed_order.index(b) < seed_order.index(a) and not tied(a, b)]
    ties = [f"{a} ~ {b}" for i, a in enumerate(here) for b in here[i + 1:] if tied(a, b)]
    if len(here) < 2:
        verdict = "Too few of the seed's executors ran here to compare orders."
    elif not flipped:
        verdict = f"The seed's executors keep the seed's DGX H100 order ({' < '.join(seed_order)})"
        verdict += f", within this run's noise for {', '.join(ties)}." if ties else "."
    else:
        verdict = (f"The order differs from the seed's DGX H100 table: here {' < '.join(here)}, seed {' < '.join(seed_order)}; "
                   f"this run separates {', '.join(f'{a} < {b}' for a, b in flipped)}.")
    return f"Fastest to slowest by median wall time: {order}. {verdict}"
