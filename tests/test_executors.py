"""Executor registry: labels, availability reasons instead of exceptions, filtered executor lists."""

import torch

from latency_lab import executors as E, model as llama, params as P

SEED_LABELS = {"thunder": "Thunder-nvFuser", "thunder:torch": "Thunder-torch", "torch.compile": "torch.compile",
               "eager": "torch-eager", "thunder:torchcompile": "Thunder-torch.compile"}


def test_registry_names_and_seed_labels():
    assert list(E.REGISTRY) == ["eager", "torch.compile", "torch.compile:reduce-overhead", "thunder", "thunder:torch",
                                "thunder:torchcompile", "thunder:torchcompile_cat", "thunder:cudagraphs"]
    for name, label in SEED_LABELS.items():
        assert E.REGISTRY[name].label == label


def test_unavailable_on_cpu_gives_reasons():
    assert E.REGISTRY["thunder"].unavailable_reason("cpu").startswith("nvFuser needs a CUDA device")
    assert "CUDA device" in E.REGISTRY["thunder:cudagraphs"].unavailable_reason("cpu")
    assert "CUDA device" in E.REGISTRY["torch.compile:reduce-overhead"].unavailable_reason("cpu")
    assert E.REGISTRY["thunder:torch"].unavailable_reason("cpu") is None


def test_missing_thunder_executors_filtered_with_note():
    notes = []
    exs = E.thunder_executors(("cudnn", "sdpa", "no_such_executor"), notes)
    assert [ex.name for ex in exs] == ["sdpa"]
    assert "no_such_executor" in notes[0] and "cudnn" in notes[0]


def test_prepare_rows_for_ok_unavailable_and_failed():
    setup = llama.build(P.validate(preset="tiny"))
    ok = E.prepare(E.REGISTRY["thunder:torch"], setup.model, setup.kwargs, "cpu")
    assert ok.ok and ok.first_call_s > 0
    assert llama.compare_to_eager(llama.logits_of(ok.output), llama.logits_of(setup.model(**setup.kwargs)), "bfloat16")["passed"]
    off = E.prepare(E.REGISTRY["thunder"], setup.model, setup.kwargs, "cpu")
    assert off.status == "unavailable" and off.row()["reason"] == off.reason and off.fn is None

    def broken(**kwargs):
        raise RuntimeError("boom")
    bad = E.prepare(E.REGISTRY["eager"], broken, {}, "cpu")
    assert bad.status == "failed" and "RuntimeError: boom" in bad.reason


def test_fail_marks_row():
    p = E.Prepared(E.REGISTRY["eager"], "ok", fn=torch.nn.Identity())
    p.fail(ValueError("x" * 1000), "profiler")
    assert p.status == "failed" and p.reason.startswith("profiler: ValueError") and len(p.reason) < 450


def test_thunder_cudagraphs_row_carries_its_cublas_workspace_hazard():
    _, notes = E.REGISTRY["thunder:cudagraphs"].build(torch.nn.Linear(2, 2))
    assert E.THUNDER_CUDAGRAPHS_HAZARD in notes and "illegal memory access" in E.THUNDER_CUDAGRAPHS_HAZARD
    _, plain = E.REGISTRY["thunder"].build(torch.nn.Linear(2, 2))
    assert E.THUNDER_CUDAGRAPHS_HAZARD not in plain
