"""Executor registry: labels, availability reasons instead of exceptions, filtered executor lists,
levers as entries; and the harness's prepare on real executors."""

import subprocess
import sys

import pytest
import torch

from latency_lab.core import harness
from latency_lab.core import model as llama
from latency_lab.core import parameters as P
from latency_lab.core import registry as E
from latency_lab.core.rows import plain_row

SEED_LABELS = {
    "thunder": "Thunder-nvFuser",
    "thunder:torch": "Thunder-torch",
    "torch.compile": "torch.compile",
    "eager": "torch-eager",
    "thunder:torchcompile": "Thunder-torch.compile",
}


def test_registry_names_and_seed_labels():
    assert list(E.REGISTRY) == [
        "eager",
        "torch.compile",
        "torch.compile:reduce-overhead",
        "thunder",
        "thunder:torch",
        "thunder:torchcompile",
        "thunder:torchcompile_cat",
        "thunder.compile",
        "thunderfx",
        "thunder:cudagraphs",
        "thunder.compile:reduce-overhead",
        *E.LEVER_NAMES,
    ]
    for name, label in SEED_LABELS.items():
        assert E.REGISTRY[name].label == label


def test_unavailable_on_cpu_gives_reasons():
    assert E.REGISTRY["thunder"].check("cpu") == ("unavailable", "nvFuser needs a CUDA device (running on cpu)")
    for name in (
        "thunder:cudagraphs",
        "torch.compile:reduce-overhead",
        "thunder.compile",
        "thunder.compile:reduce-overhead",
    ):
        status, reason = E.REGISTRY[name].check("cpu")
        assert status == "unavailable" and "CUDA device" in reason, name
    for name in ("eager", "torch.compile", "thunder:torch", "thunder:torchcompile", "thunderfx"):
        assert E.REGISTRY[name].check("cpu") is None, name


def test_broken_install_is_a_failure_not_unavailable(monkeypatch):
    monkeypatch.setattr(E, "thunder_missing", lambda: "thunder fails to import: ImportError: libfoo.so")
    assert E.REGISTRY["thunder:torch"].check("cpu") == ("failed", "thunder fails to import: ImportError: libfoo.so")
    monkeypatch.undo()
    monkeypatch.setattr(E, "nvfuser_missing", lambda: "nvFuser fails to import: ImportError: bad build")
    assert E.REGISTRY["thunder"].check("cuda") == ("failed", "nvFuser fails to import: ImportError: bad build")
    assert E.REGISTRY["thunder"].check("cpu")[0] == "unavailable"  # no GPU: the machine, not the install


def test_entry_point_missing_from_thunder_is_unavailable_with_reason():
    assert E.thunder_lacks("compile") is None and E.thunder_lacks("dynamo.thunderfx") is None
    assert "has no thunder.no_such_entry" in E.thunder_lacks("no_such_entry")


def test_missing_thunder_executors_filtered_with_note():
    notes = []
    exs = E.thunder_executors(("cudnn", "sdpa", "no_such_executor"), notes)
    assert [ex.name for ex in exs] == ["sdpa"]
    assert notes[0].startswith("skipped cudnn, no_such_executor: in the seed's executor list, not in thunder's here")
    assert "cudnn needs the cuDNN frontend, pip nvidia-cudnn-frontend" in notes[0]  # what it means (issue 24)


def test_prepare_rows_for_ok_unavailable_and_failed():
    setup = llama.build(P.validate(device="cpu", preset="tiny"))
    ok = harness.prepare(E.REGISTRY["thunder:torch"], setup.model, setup.kwargs, "cpu")
    assert ok.ok and ok.first_call_s > 0
    assert llama.compare_to_eager(llama.logits_of(ok.output), llama.logits_of(setup.model(**setup.kwargs)), "bfloat16")[
        "passed"
    ]
    off = harness.prepare(E.REGISTRY["thunder"], setup.model, setup.kwargs, "cpu")
    assert off.status == "unavailable" and plain_row(off)["reason"] == off.reason and off.fn is None

    def broken(**kwargs):
        raise RuntimeError("boom")

    bad = harness.prepare(E.REGISTRY["eager"], broken, {}, "cpu")
    assert bad.status == "failed" and "RuntimeError: boom" in bad.reason


def test_fail_marks_row():
    p = harness.Measurement(E.REGISTRY["eager"], "ok", fn=torch.nn.Identity())
    p.fail(ValueError("x" * 1000), "profiler")
    assert p.status == "failed" and p.reason.startswith("profiler: ValueError") and len(p.reason) < 450


def test_thunder_cudagraphs_row_carries_its_cublas_workspace_hazard():
    _, notes = E.REGISTRY["thunder:cudagraphs"].build(torch.nn.Linear(2, 2))
    assert E.THUNDER_CUDAGRAPHS_HAZARD in notes and "illegal memory access" in E.THUNDER_CUDAGRAPHS_HAZARD
    _, plain = E.REGISTRY["thunder"].build(torch.nn.Linear(2, 2))
    assert E.THUNDER_CUDAGRAPHS_HAZARD not in plain


def test_importing_the_registry_and_validating_parameters_imports_no_torch():
    code = (
        "import sys; from latency_lab.core import model_config, parameters, registry; "
        "parameters.validate(device='cpu'); model_config.config_dict('seed', 1); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_levers_are_thunder_entries_with_their_options():
    lever = E.REGISTRY["thunder:nv-linear"]
    assert (
        lever.options == {"nv_enable_linear": True, "nv_enable_matmul": True} and lever.lever == "ops outside fusions"
    )
    assert "nv_enable_linear=True" in lever.summary and lever.needs_nvfuser
    assert not E.REGISTRY["thunder:cache-same-input"].needs_nvfuser  # a Thunder-only lever: a CPU may run it
    assert E.REGISTRY["thunder:nv-skip-cache"].check("cpu")[0] == "unavailable"
    both = E.combination(["thunder:nv-linear", "thunder:nv-skip-cache"])
    assert both.name == "thunder:nv-linear+nv-skip-cache" and both.options == {
        "nv_enable_linear": True,
        "nv_enable_matmul": True,
        "nv_skip_cache": True,
    }


def test_cache_levers_this_thunder_rejects_are_unavailable_at_availability_with_the_reason():
    """Decided once, before any build (so 01 and 07 agree): a cache option this thunder refuses, or
    that breaks a trace which indexes a list by an int, as a Llama step does; the default cache runs."""
    pytest.importorskip("thunder")
    assert E.thunder_refuses_cache("constant values") is None  # the control: thunder's default
    setup = llama.build(P.validate(device="cpu", preset="tiny"))
    for name in ("thunder:cache-same-input", "thunder:cache-symbolic"):
        cache = E.REGISTRY[name].options["cache"]
        refused = E.thunder_refuses_cache(cache)
        assert E.REGISTRY[name].check("cpu") == (("unavailable", refused) if refused else None), name
        p = harness.prepare(E.REGISTRY[name], setup.model, setup.kwargs, "cpu")
        if refused:
            assert (p.status, p.reason) == ("unavailable", refused) and f"cannot run cache={cache!r}" in refused
        else:  # a thunder that accepts the option: its first call on the model decides
            assert p.status == "ok" or p.reason.startswith("first call: "), (name, p.reason)
