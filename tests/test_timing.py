"""Timing primitives on a simulated GPU (a launch queue, events, a host clock), the metric vocabulary,
and notebook 02's rows built on them."""

from types import SimpleNamespace

import pytest

from latency_lab.core import harness, metrics, registry, seed_numbers, timing
from latency_lab.core.rounds import state_text
from latency_lab.studies import executor_timing


class FakeGPU:
    """A host clock and a GPU queue: each call costs the host ``host_ms`` (more when the GPU was idle
    when it started: ``idle_penalty_ms``) and enqueues ``kernel_ms`` of GPU work, which runs after the
    work before it. Events fire when the GPU reaches them; ``synchronize`` waits for the queue."""

    def __init__(self, host_ms, kernel_ms, idle_penalty_ms=0.0):
        self.now = self.free = 0.0
        self.host_ms, self.kernel_ms, self.idle_penalty_ms = host_ms, kernel_ms, idle_penalty_ms
        self.calls = 0

    def step(self, **kwargs):
        idle = self.free <= self.now
        self.now += self.host_ms + (self.idle_penalty_ms if idle else 0.0)
        self.free = max(self.free, self.now) + self.kernel_ms
        self.calls += 1

    def perf_counter(self):
        return self.now / 1e3

    def synchronize(self, device=None):
        self.now = max(self.now, self.free)

    def install(self, monkeypatch):
        gpu = self

        class Event:
            def __init__(self, enable_timing):
                assert enable_timing

            def record(self):
                self.t = max(gpu.now, gpu.free)  # fires once the GPU has done the work before it

            def elapsed_time(self, end):
                return end.t - self.t

        monkeypatch.setattr(timing.torch.cuda, "Event", Event)
        monkeypatch.setattr(timing.torch.cuda, "synchronize", self.synchronize)
        monkeypatch.setattr(timing.time, "perf_counter", self.perf_counter)


@pytest.mark.parametrize("host_ms, kernel_ms", [(1.0, 0.1), (0.1, 1.0), (0.5, 0.5)])
def test_block_host_never_exceeds_wall(monkeypatch, host_ms, kernel_ms):
    gpu = FakeGPU(host_ms, kernel_ms)
    gpu.install(monkeypatch)
    b = timing.block(gpu.step, {}, "cuda", iters=40)
    assert b.host_ms == pytest.approx(host_ms)
    assert b.wall_ms >= b.host_ms
    assert b.wall_ms == pytest.approx(max(host_ms, kernel_ms), rel=0.05)  # the slower side sets the pace


def test_latency_from_idle_can_exceed_the_steady_wall_which_is_why_host_time_is_taken_in_blocks(monkeypatch):
    """The old host submit (device drained before every call) measured the latency of a call issued to an
    idle GPU: here it comes out above the steady-state wall, which no steady per-call host cost can."""
    gpu = FakeGPU(host_ms=0.9, kernel_ms=0.3, idle_penalty_ms=0.6)
    gpu.install(monkeypatch)
    block = timing.block(gpu.step, {}, "cuda", iters=40)
    idle = timing.latency_from_idle(gpu.step, {}, "cuda", calls=10)
    assert idle.median == pytest.approx(1.5) and idle.median > block.wall_ms  # the flaw, reproduced
    assert block.host_ms <= block.wall_ms  # the steady-state host time is not


def test_profile_kernels_on_cpu_says_why():
    assert timing.profile_kernels(lambda **kw: None, {}, "cpu", steps=3) == {"reason": "no device kernels on CPU"}


def _event(key, kind="cuda", count=1, us=10.0, annotation=False):
    from torch.autograd import DeviceType

    return SimpleNamespace(
        key=key,
        device_type=DeviceType.CUDA if kind == "cuda" else DeviceType.CPU,
        count=count,
        self_device_time_total=us,
        is_user_annotation=annotation,
    )


def test_kernel_summary_counts_kernels_only():
    events = [
        _event("ampere_bf16_gemm", count=2, us=20.0),
        _event("triton_poi_fused_add_0", us=3.0),
        _event("Memcpy HtoD (Pageable -> Device)", us=5.0),
        _event("Memset (Device)", us=1.0),
        _event("Torch-Compiled Region: 0/0", us=30.0, annotation=True),
        _event("CompiledFunction", us=30.0),  # an annotation on a torch without the flag
        _event("aten::mm", kind="cpu", us=0.0),
    ]
    s = timing.kernel_summary(events, steps=1)
    assert s["kernels_per_step"] == 3 and s["kernel_ms"] == pytest.approx(0.023)
    assert s["copies_per_step"] == 2 and s["copy_ms"] == pytest.approx(0.006)
    assert s["annotations_per_step"] == 2
    assert [k["name"] for k in s["top_kernels"]] == ["ampere_bf16_gemm", "triton_poi_fused_add_0"]


def test_use_device_selects_cuda_n_and_leaves_cpu_alone(monkeypatch):
    chosen = []
    monkeypatch.setattr(timing.torch.cuda, "set_device", chosen.append)
    timing.use_device("cpu")
    timing.use_device("cuda")  # the current device stays current
    timing.use_device("cuda:1")
    assert chosen == [1]


# --- the vocabulary ---------------------------------------------------------------------------------


def test_stat_median_quartiles_noise_and_flat_names():
    s = metrics.Stat.of([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s.median, s.q1, s.q3, s.iqr, s.n, s.max) == (3.0, 2.0, 4.0, 2.0, 5, 100.0) and s.noisy
    assert not metrics.Stat.of([1.0, 1.01, 0.99, 1.0]).noisy
    assert s.flat("wall_ms") == {"wall_ms": 3.0, "wall_q1_ms": 2.0, "wall_q3_ms": 4.0}
    assert s.scaled(1e3).median == 3000.0 and s.scaled(1e3).n == 5
    with pytest.raises(ValueError):
        metrics.Stat.of([])


@pytest.mark.parametrize(
    "name, shown",
    [
        ("wall_q1_ms", "wall q1 (ms)"),
        ("gpu_busy_pct", "GPU busy (%)"),
        ("kernels_per_step", "kernels per step"),
        ("first_call_s", "first call (s)"),
        ("allocated_mib", "allocated (MiB)"),
        ("label", "label"),
        ("host_saved_us", "host saved (µs)"),
    ],
)
def test_headers_come_from_names(name, shown):
    assert metrics.header(name) == shown


def test_what_counts_as_a_metric_and_its_spread():
    assert metrics.is_metric("wall_ms") and metrics.is_metric("kernels_per_step") and not metrics.is_metric("executor")
    assert metrics.spread_names("wall_ms") == ("wall_q1_ms", "wall_q3_ms")
    assert metrics.spread_names("wall_q1_ms") is None and metrics.spread_names("status") is None


# --- notebook 02's rows -------------------------------------------------------------------------------


def _prepared(name, status="ok"):
    return harness.Measurement(registry.REGISTRY[name], status, fn=lambda **kw: None, first_call_s=1.0)


def _row(p, steps: dict, timed, floor_ms):
    """02's row of ``p`` with these steps' records and its blocks in ``timed``."""
    p.steps = steps
    return executor_timing.row(harness.settle(p, timed.entries.get(p.name)), floor_ms)


def _rounds(walls: dict, hosts: dict | None = None, reference_ms=None):
    timed = {n: harness.Timed(n, list(w), list((hosts or walls)[n])) for n, w in walls.items()}
    n = len(next(iter(walls.values())))
    return harness.Rounds(timed, list(reference_ms or [1.0] * n), "cuda-events", 0, 1, n)


def test_row_host_bound_is_about_the_gpu_not_a_second_host_number():
    timed = _rounds(
        {"eager": [2.0] * 4, "torch.compile:reduce-overhead": [0.23] * 4},
        {"eager": [1.99] * 4, "torch.compile:reduce-overhead": [0.05] * 4},
    )
    eager = _row(_prepared("eager"), {"kernels": {"kernel_ms": 0.28, "kernels_per_step": 64}}, timed, 0.15)
    graphs = _row(
        _prepared("torch.compile:reduce-overhead"),
        {"kernels": {"kernel_ms": 0.21, "kernels_per_step": 25}},
        timed,
        0.15,
    )
    assert eager.host_bound is True and eager.gpu_busy_pct == pytest.approx(14.0)
    assert graphs.host_bound is False and graphs.gpu_busy_pct == pytest.approx(100 * 0.21 / 0.23)
    assert eager.cpu_overhead_ms == pytest.approx(1.72) and eager.overhead_per_kernel_us == pytest.approx(1720 / 64)
    assert eager.floor_ratio_x == pytest.approx(2.0 / 0.15) and eager.host <= eager.wall
    cpu = _row(_prepared("eager"), {"kernels": {"reason": "no device kernels on CPU"}}, timed, None)
    assert cpu.host_bound is None and cpu.kernels_per_step is None and "no device kernels" in cpu.notes


def test_host_bound_is_host_time_against_kernel_time_even_with_the_gpu_busy():
    """Thunder + CUDA graphs on the H200: host 0.265 ms per step against 0.222 ms of kernels, the GPU 82%
    busy. The host is the bottleneck: host-bound, and the text says it survives the graph replay."""
    timed = _rounds(
        {"thunder:cudagraphs": [0.27] * 4, "torch.compile:reduce-overhead": [0.23] * 4},
        {"thunder:cudagraphs": [0.265] * 4, "torch.compile:reduce-overhead": [0.05] * 4},
    )
    measured = {"kernels": {"kernel_ms": 0.222, "kernels_per_step": 39}}
    row = _row(_prepared("thunder:cudagraphs"), measured, timed, None)
    other = _row(
        _prepared("torch.compile:reduce-overhead"),
        {"kernels": {"kernel_ms": 0.21, "kernels_per_step": 25}},
        timed,
        None,
    )
    assert row.gpu_busy_pct == pytest.approx(100 * 0.222 / 0.27) and row.host_bound is True
    assert other.host_bound is False
    text = executor_timing.host_bound_text([row, other])
    assert "thunder:cudagraphs (0.265 vs 0.222)" in text and "Bound by the GPU: torch.compile:reduce-overhead" in text
    assert "thunder:cudagraphs replays CUDA graphs and still takes more host time" in text
    assert executor_timing.host_bound_text([other]).endswith("torch.compile:reduce-overhead (0.0500 vs 0.210).")


def test_row_flags_disagreeing_passes():
    walls = [1.0, 1.2, 1.2, 1.0] * 2  # ABBA: pass 1 = 1.0, pass 2 = 1.2
    row = _row(_prepared("eager"), {}, _rounds({"eager": walls}), None)
    assert row.pass_ratio_x == pytest.approx(1.2) and row.noisy
    steady = _row(_prepared("eager"), {}, _rounds({"eager": [1.0] * 8}), None)
    assert steady.pass_ratio_x == pytest.approx(1.0) and not steady.noisy


def test_ranking_separates_only_what_the_within_round_ratio_separates():
    # thunder:torch / eager per round: 1.05, 0.95, 1.02, 0.97 (a tie); torch.compile is half of eager in every round
    walls = {
        "eager": [1.0, 2.0, 1.0, 2.0],
        "thunder:torch": [1.05, 1.9, 1.02, 1.94],
        "torch.compile": [0.5, 1.0, 0.5, 1.0],
    }
    timed = _rounds(walls)
    table = [_row(_prepared(n), {}, timed, None) for n in walls]
    text = executor_timing.ranking_text(table, timed)
    assert text.startswith("Fastest to slowest by median wall time: torch.compile (0.750 ms) < ")
    assert "eager (1.50 ms) ~ thunder:torch" in text or "thunder:torch (1.48 ms) ~ eager" in text
    assert text.endswith("'~': the within-round ratio of the two does not separate them (its quartiles include 1).")
    separated = executor_timing.ranking_text([r for r in table if r.executor != "thunder:torch"], timed)
    assert separated == "Fastest to slowest by median wall time: torch.compile (0.750 ms) < eager (1.50 ms)."
    assert executor_timing.tied(timed, "eager", "thunder:torch") and not executor_timing.tied(
        timed, "torch.compile", "eager"
    )


def test_seed_order_is_said_only_on_gpu_seed_runs():
    timed = _rounds({"eager": [1.0] * 4, "torch.compile": [0.5] * 4})
    table = [_row(_prepared(n), {}, timed, None) for n in ("eager", "torch.compile")]
    gpu = SimpleNamespace(is_cuda=True, preset="seed")
    assert "keep the seed's DGX H100 order" in executor_timing.seed_order_text(table, timed, gpu)
    assert executor_timing.seed_order_text(table, timed, SimpleNamespace(is_cuda=False, preset="seed")) is None
    assert executor_timing.seed_order_text(table, timed, SimpleNamespace(is_cuda=True, preset="tiny")) is None
    assert "says nothing about the seed" in executor_timing.cpu_text(SimpleNamespace(is_cuda=False))


def test_state_text_reports_the_slow_share_and_fast_blocks():
    timed = _rounds({"eager": [1.0] * 4}, reference_ms=[1.6, 1.7, 1.0, 1.05])
    assert timed.drift_pct() == pytest.approx(100 * 0.7 / 1.325)
    assert state_text(timed) == "No host reference was timed."
    t = timed.entries["eager"]
    t.reference_before_ms, t.reference_after_ms = [1.0, 1.7, 1.0, 1.0], [1.0, 1.7, 1.0, 1.6]
    t.mark(timed.cutoff_ms)
    text = state_text(timed)
    assert "in 37.5% of 8 references; 2 of 4 blocks ran fast" in text
    # the how and why once, on the index: not repeated in every notebook's findings
    assert "slow most of the time" not in text and "the run's index, under The host's state" in text


def test_seed_tables_pair_each_metric_with_the_seed():
    timed = _rounds({"thunder": [1.69] * 4})
    table = [_row(_prepared("thunder"), {"kernels": {"kernel_ms": 0.218, "kernels_per_step": 36}}, timed, None)]
    tables = {t["title"].split(":")[0]: t for t in seed_numbers.seed_tables([r.as_dict() for r in table])}
    wall = tables["Wall time per step"]
    assert wall["columns"] == ["executor", "seed DGX H100 (ms)", "here (ms)", "here / seed"]
    assert wall["rows"][0] == ["Thunder-nvFuser", 1.281, 1.69, pytest.approx(1.69 / 1.281)]
    assert "%timeit per step" not in tables  # nothing measured here for it


def test_seed_rows_carry_seed_numbers_and_sources():
    rows = seed_numbers.seed_rows()
    nsight = [r for r in rows if "Nsight" in r["source"]]
    assert {r["label"]: r["wall_ms"] for r in nsight} == {
        "Thunder-nvFuser": 1.281,
        "Thunder-torch": 1.232,
        "torch.compile": 0.455,
        "torch-eager": 1.014,
    }
    assert len(rows) == len(seed_numbers.SEED_NSIGHT_DGX_H100["rows"]) + len(
        seed_numbers.SEED_CUDA_TIMER_DGX_H100["rows"]
    ) + len(seed_numbers.SEED_TIMEIT_L40S["rows"])
