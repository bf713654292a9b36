"""latency_lab.studies.thunder_traces.study and its parts (trace_analysis, first_call_phases, trace_tables) on small
thunder-jitted modules (CPU), on synthetic nested regions (the GPU-only nvFusion / CUDAGraph shapes) and on the
tiny run's results file."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from conftest import run_runner

from latency_lab.core import parameters as P
from latency_lab.core import results
from latency_lab.core.measurement import Measurement, step_records
from latency_lab.core.registry import REGISTRY, THUNDER_NAMES
from latency_lab.instruments import first_call_phases, trace_analysis, trace_row
from latency_lab.studies import executor_timing
from latency_lab.studies.thunder_traces import study as thunder_traces
from latency_lab.studies.thunder_traces import tables as trace_tables

pytest.importorskip("thunder")


class Tiny(torch.nn.Module):
    """embedding, linear and matmul (seed ops that stayed outside nvFuser), a silu and a triu."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(32, 16)
        self.lin = torch.nn.Linear(16, 16, bias=False)

    def forward(self, ids):
        h = torch.nn.functional.silu(self.lin(self.emb(ids)))
        scores = torch.triu(torch.matmul(h, h.transpose(-1, -2)), 1)
        return h * 2 + scores.sum(-1, keepdim=True)


class Broken(torch.nn.Module):
    def forward(self, ids):
        raise RuntimeError("boom in forward")


KWARGS = {"ids": torch.tensor([[1, 2, 3, 4]])}


@pytest.fixture(scope="module")
def torch_row():
    return trace_row.build_row(REGISTRY["thunder:torch"], Tiny().eval(), KWARGS, "cpu")


@pytest.fixture(scope="module")
def torchcompile_row():
    return trace_row.build_row(REGISTRY["thunder:torchcompile"], Tiny().eval(), KWARGS, "cpu")


def check_consistent(row: dict) -> None:
    """The counter, the composition, the regions and the unfused ops describe the same trace."""
    counter = row["counter"]
    assert sum(counter.values()) == row["bound_symbols"] == sum(row["composition"].values())
    assert list(counter.values()) == sorted(counter.values(), reverse=True)
    top = [g for g in row["regions"] if g["inside"] is None]
    assert sum(counter[g["region"]] for g in top) == sum(
        v for k, v in row["composition"].items() if k.endswith(" regions")
    )
    for op, entry in row["unfused"].items():
        assert counter[op] == entry["count"]
    assert sum(e["count"] for e in row["unfused"].values()) == row["composition"].get("unfused ops", 0)
    for g in top:
        assert f"{g['region']}(" in row["trace"]


def test_torch_config_has_no_regions_and_leaves_seed_ops_unfused(torch_row):
    assert torch_row["status"] == "ok", torch_row["reason"]
    assert torch_row["regions"] == []
    assert not any(k.endswith(" regions") for k in torch_row["composition"])
    for op in ("linear", "embedding", "matmul", "silu"):
        assert torch_row["unfused"][op] == {"count": 1, "executors": ["torch"]}
    assert torch_row["counter"]["python_return"] == 1
    assert torch_row["counter"]["unpack_trivial"] >= 1
    assert "python_del" not in torch_row["unfused"] and "unpack_trivial" not in torch_row["unfused"]
    assert torch_row["prologue_bound_symbols"] > 0 and torch_row["prologue_lines"] > 0
    check_consistent(torch_row)
    table = {line["op"]: line["thunder:torch"] for line in trace_tables.placement([torch_row])}
    assert table["linear"] == "0 in fusions; 1 outside"
    assert table["triu"] == "not found by name (decomposed into prims)"  # thunder decomposes this triu into prims
    assert "triu" not in torch_row["counter"] and "where" in torch_row["unfused"]


def test_torchcompile_config_fuses_seed_ops_into_one_region(torchcompile_row):
    row = torchcompile_row
    assert row["status"] == "ok", row["reason"]
    assert [(g["region"], g["kind"], g["executor"]) for g in row["regions"]] == [
        ("TorchCompile0", "TorchCompile", "torchcompile")
    ]
    ops = row["regions"][0]["ops"]
    for op in ("linear", "embedding", "matmul", "silu"):
        assert ops.get(op) == 1, ops
    assert "linear" not in row["unfused"] and row["composition"]["TorchCompile regions"] == 1
    assert row["counter"]["TorchCompile0"] == 1
    check_consistent(row)
    assert trace_tables.placement([row])[0] == {
        "op": "linear",
        "thunder:torchcompile": "1 in TorchCompile; 0 outside",
    }
    assert trace_tables.region_table([row])[0]["ops"].startswith(next(iter(ops)))


def test_compile_stats_count_the_miss_and_the_hit(torch_row):
    first, second = torch_row["compile_stats"]["first_call"], torch_row["compile_stats"]["second_call"]
    assert (first["calls"], first["cache_misses"], first["cache_hits"]) == (1, 1, 0)
    assert (second["calls"], second["cache_misses"], second["cache_hits"]) == (2, 1, 1)
    assert first["trace_construction_ms"] > 0
    for stats in (first, second):  # every statistic is a value or a note, never an exception
        for method in trace_analysis.STAT_METHODS:
            key = method.removeprefix("last_").removesuffix("_time") + "_ms"
            assert (key in stats) != any(n.startswith(method) for n in stats["notes"]), (method, stats)


def test_first_call_phases_split_the_measured_first_call(torch_row):
    phases = torch_row["first_call_phases"]
    assert set(phases) == {"interpret_s", "transform_s", "first_run_s"} and all(v > 0 for v in phases.values())
    assert sum(phases.values()) <= torch_row["first_call_s"]
    [line] = first_call_phases.first_call_table([torch_row])
    assert line["other_s"] == pytest.approx(torch_row["first_call_s"] - sum(phases.values()))
    assert line["interpret_pct"] == pytest.approx(100 * phases["interpret_s"] / torch_row["first_call_s"])
    finding = first_call_phases.first_call_finding([torch_row])
    assert finding.startswith("First call by thunder's own timestamps: thunder:torch ") and " s, other " in finding
    assert finding.endswith("% of a thunder.jit configuration's first call.")


def test_first_call_finding_adds_up_and_leaves_out_what_it_cannot_split():
    def row(name, total, i, t, r, status="ok"):
        return {
            "executor": name,
            "status": status,
            "first_call_s": total,
            "reason": None if status == "ok" else "no GPU",
            "first_call_phases": {"interpret_s": i, "transform_s": t, "first_run_s": r},
        }

    rows = [
        row("thunder:torch", 2.0, 1.0, 0.2, 0.5),
        row("thunderfx", 6.0, 3.0, 0.5, 0.1),
        row("thunder:torchcompile", 3.0, 1.0, None, None),
        row("thunder", None, None, None, None, "unavailable"),
    ]
    table = {t["executor"]: t for t in first_call_phases.first_call_table(rows)}
    assert table["thunder"]["status"] == "unavailable" and table["thunder"]["reason"] == "no GPU"  # a row, not left out
    assert table["thunder:torchcompile"]["other_s"] is None and table["thunder:torchcompile"]["interpret_pct"] is None
    assert first_call_phases.first_call_finding(rows) == (
        "First call by thunder's own timestamps: thunder:torch 2.00 s (interpreting 1.00 s, transforms 0.200 s, "
        "first run 0.500 s, other 0.300 s); thunderfx 6.00 s (interpreting 3.00 s, transforms 0.500 s, "
        "first run 0.100 s, other 2.40 s). Interpreting the model's Python is 50.0% of a thunder.jit "
        "configuration's first call."
    )
    assert first_call_phases.first_call_finding(rows[2:]) is None


def test_trace_row_of_a_failing_analysis_is_a_failed_row_and_leaves_the_executor_alone():
    p = Measurement(REGISTRY["thunder:torch"], "ok", fn=lambda **kw: None, first_call_s=1.0)  # not a thunder function
    row = trace_row.trace_row(p, KWARGS)
    assert row["status"] == "failed" and row["reason"].startswith("trace analysis: ")
    assert p.status == "ok" and p.reason is None  # notebook 02 goes on timing it


def _timing_results(folder, params, rows):
    results.save(folder, results.EXECUTOR_TIMING, params, {}, results.key_table("t", [{"x": 1}]), thunder_rows=rows)


def test_from_run_reads_the_rows_02_took_in_the_same_run_only(tmp_path, monkeypatch):
    params = P.validate(preset="tiny", device="cpu", executors="thunder:torch,thunderfx", output_dir=str(tmp_path))
    rows = {
        "thunder:torch": {"executor": "thunder:torch", "status": "ok"},
        "thunderfx": {"executor": "thunderfx", "status": "failed"},
    }
    _timing_results(tmp_path, params, rows)
    names = ["thunderfx", "thunder:torch"]
    monkeypatch.delenv(results.RUN_DIR, raising=False)
    assert thunder_traces.from_run(params, names) is None  # JupyterLab, papermill alone: build
    monkeypatch.setenv(results.RUN_DIR, str(tmp_path / "other-run"))
    assert thunder_traces.from_run(params, names) is None
    monkeypatch.setenv(results.RUN_DIR, str(tmp_path))
    read = thunder_traces.from_run(params, names)  # read back as TraceRows
    assert [(r.executor, r.status, r.bound_symbols) for r in read] == [
        ("thunderfx", "failed", None),
        ("thunder:torch", "ok", None),
    ]
    assert thunder_traces.from_run(params, [*names, "thunder:torchcompile"]) is None  # 02 did not build it
    assert thunder_traces.from_run(P.validate({**params.to_dict(), "seq_len": 7}), names) is None  # another model input
    assert thunder_traces.from_run(P.validate({**params.to_dict(), "warmup": 3}), names) is not None  # timing only
    thunder_traces.results.path_for(tmp_path, results.EXECUTOR_TIMING).write_text("{not json")
    assert thunder_traces.from_run(params, names) is None


def test_02_keeps_each_trace_once_in_its_thunder_rows_and_the_other_records_beside_them():
    measured = {
        "eager": Measurement(REGISTRY["eager"], "ok", first_call_s=1.0, steps={"trace": None, "wall": 1}),
        "thunder:torch": Measurement(
            REGISTRY["thunder:torch"],
            "ok",
            first_call_s=1.0,
            steps={"trace": {"executor": "thunder:torch", "status": "ok"}, "kernels": {}},
        ),
        "thunder": Measurement(REGISTRY["thunder"], "unavailable", reason="needs a CUDA device"),
    }
    before = copy.deepcopy({n: m.steps for n, m in measured.items()})
    rows = executor_timing.thunder_rows(measured)
    assert rows["thunder:torch"] == {"executor": "thunder:torch", "status": "ok"}
    assert dict(rows["thunder"]) == {
        "executor": "thunder",
        "label": REGISTRY["thunder"].label,
        "status": "unavailable",
        "reason": "needs a CUDA device",
        "notes": None,
    }
    rest = step_records(measured, leave_out=("trace",))
    assert "eager" not in rows and rest == {"eager": {"wall": 1}, "thunder:torch": {"kernels": {}}}
    assert {n: m.steps for n, m in measured.items()} == before  # what was measured is left as it was


def test_compile_stats_of_a_plain_function_is_notes_only():
    stats = trace_analysis.compile_stats(lambda x: x)
    assert "calls" not in stats and stats["notes"]


def test_counter_of_a_jitted_function_is_the_seed_expression():
    import thunder

    jf = thunder.jit(lambda a, b: (a + b) * a, executors=[])
    jf(torch.ones(3), torch.ones(3))
    counter = trace_analysis.counter(thunder.last_traces(jf)[-1])
    assert counter["add"] == 1 and counter["mul"] == 1 and counter["python_return"] == 1
    assert counter["unpack_trivial"] == 2


def test_unavailable_and_failing_configs_are_rows_with_reasons(torch_row):
    unavailable = trace_row.build_row(REGISTRY["thunder:cudagraphs"], Tiny(), KWARGS, "cpu")
    failed = trace_row.build_row(REGISTRY["thunder:torch"], Broken(), KWARGS, "cpu")
    assert unavailable["status"] == "unavailable" and "CUDA" in unavailable["reason"]
    assert failed["status"] == "failed" and "boom in forward" in failed["reason"]
    rows = [torch_row, unavailable, failed]
    assert [r["reason"] is None for r in trace_tables.summary(rows)] == [True, False, False]
    table = trace_tables.counter_table(rows, {"linear": 8}, "seed")
    assert {line["thunder:cudagraphs"] for line in table} == {"unavailable"}
    assert next(line for line in table if line["symbol"] == "linear")["seed"] == 8
    labels = {line["configuration"] for line in thunder_traces.composition_long(rows)}
    assert {"thunder:cudagraphs (unavailable)", "thunder:torch (failed)", "thunder:torch"} <= labels


def _bsym(name, executor=None, subsymbols=(), fusion=False):
    return SimpleNamespace(sym=SimpleNamespace(name=name, executor=executor, is_fusion=fusion), subsymbols=subsymbols)


def test_nested_regions_are_classified_by_executor():
    from thunder.transforms.cudagraph import CUDAGraphTransform

    nvfuser, torch_ex = SimpleNamespace(name="nvfuser"), SimpleNamespace(name="torch")
    nv = _bsym("nvFusion0", nvfuser, (_bsym("mul"), _bsym("mul"), _bsym("convert_element_type")), fusion=True)
    graph = _bsym("CUDAGraph1", CUDAGraphTransform(), (nv, _bsym("linear", torch_ex), _bsym("python_del")), fusion=True)
    odd = _bsym("Region7", SimpleNamespace(name="torchcompile_cat"), (_bsym("cat"),), fusion=True)
    trace = SimpleNamespace(
        bound_symbols=[_bsym("unpack_trivial"), graph, odd, _bsym("embedding", torch_ex), _bsym("python_return")]
    )
    found = {g["region"]: g for g in trace_analysis.regions(trace.bound_symbols)}
    assert found["CUDAGraph1"]["kind"] == "CUDAGraph" and found["CUDAGraph1"]["executor"] == "CUDAGraphTransform"
    assert found["CUDAGraph1"]["ops"] == {"linear": 1} and found["CUDAGraph1"]["contains"] == ["nvFusion0"]
    assert found["nvFusion0"]["inside"] == "CUDAGraph1" and found["nvFusion0"]["kind"] == "nvFusion"
    assert found["nvFusion0"]["ops"] == {"mul": 2, "convert_element_type": 1}
    assert found["Region7"]["kind"] == "TorchCompile"
    assert trace_analysis.composition(trace) == {
        "bookkeeping": 2,
        "CUDAGraph regions": 1,
        "TorchCompile regions": 1,
        "unfused ops": 1,
    }
    assert trace_analysis.unfused(trace) == {"embedding": {"count": 1, "executors": ["torch"]}}


def test_details_html_escapes_the_trace():
    block = thunder_traces.details_html("a <b>", "x = f(y) < 2 <script>")
    assert block.startswith("<details><summary>a &lt;b&gt;</summary>") and "<script>" not in block


def test_tiny_run_results_file(tiny_run):
    data = results.load(tiny_run / "03_trace_counters.results.json")
    rows = {r["executor"]: r for r in data["configurations"]}
    wanted = [n for n in data["params"]["executors"] if n in THUNDER_NAMES]
    assert wanted and sorted(rows) == sorted(wanted)
    for name in wanted:
        row = rows[name]
        if row["status"] == "ok":
            assert row["counter"], name
            check_consistent(row)
        else:
            assert row["reason"], name
    assert data["key_table"]["rows"] and data["seed_counter"]["counter"]["nvFusion0"] == 1
    assert any(f.startswith("First call by thunder's own timestamps: ") for f in data["findings"])
    assert data["traces_from"] == "notebook 02's builds in this run"  # 02 ran first in that run
    timing = results.load(tiny_run / "02_executor_timing.results.json")
    assert sorted(timing["thunder_rows"]) == sorted(wanted) and not any(
        "trace" in m for m in timing["measured"].values()
    )


def test_trace_counters_alone_build_their_own(tmp_path):
    proc = run_runner(
        "--preset",
        "tiny",
        "--device",
        "cpu",
        "--notebooks",
        "03",
        "-p",
        "executors=thunder:torch",
        "--output-dir",
        str(tmp_path),
        "--run-id",
        "alone",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = results.load(tmp_path / "alone" / "03_trace_counters.results.json")
    assert data["traces_from"] == "built here" and data["configurations"][0]["status"] == "ok"


def test_trace_counters_study_runs_without_papermill_and_saves_the_notebooks_results(tmp_path, tiny_run, monkeypatch):
    monkeypatch.delenv(results.RUN_DIR, raising=False)  # no runner run: the study builds its own
    params = P.validate(
        preset="tiny", device="cpu", executors="eager,thunder:torch,thunder:cudagraphs", output_dir=str(tmp_path)
    )
    result = thunder_traces.run(params)
    assert result.traces_from == "built here"
    assert [r["executor"] for r in result.configurations] == ["thunder:torch", "thunder:cudagraphs"]
    ok, unavailable = result.configurations
    check_consistent(ok)
    assert unavailable["status"] == "unavailable" and result.summary_rows[1]["reason"]
    assert set(result.counter_rows[0]) == {"symbol", thunder_traces.SEED_LABEL, "thunder:torch", "thunder:cudagraphs"}
    assert result.placement_rows and result.stats_rows and len(result.first_call_rows) == 2
    assert [t["summary"].split(": ")[0] for t in result.traces] == ["thunder:torch"] and result.traces[0]["trace"]
    assert result.findings[0].endswith("Not traced here: thunder:cudagraphs.")
    saved = results.load(result.save())
    assert saved.keys() == results.load(tiny_run / f"{results.TRACE_COUNTERS}{results.SUFFIX}").keys()
    assert saved["traces_from"] == "built here" and saved["configurations"][0]["counter"] == ok["counter"]
