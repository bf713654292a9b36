"""Model setup: the seed's config verbatim, the three call modes, bytes per step, the build's memory."""

import json
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, cpu_environment

from latency_lab.core import fits, model_config, results
from latency_lab.core import model as llama
from latency_lab.core import parameters as P
from latency_lab.studies import model_setup


def test_seed_config_verbatim_with_layers():
    cfg = model_config.config_dict("seed", 1)
    assert cfg["num_hidden_layers"] == 1
    assert {k: v for k, v in cfg.items() if k != "num_hidden_layers"} == {
        k: v for k, v in model_config.LLAMA_3_2_1B_CFG.items() if k != "num_hidden_layers"
    }
    assert model_config.LLAMA_3_2_1B_CFG["num_hidden_layers"] == 16  # the seed's own value, untouched


def test_build_makes_the_weights_a_float32_model_converted_holds():
    """The model is made in its dtype, and its weights, buffers and the generator's state after are those of
    the float32 model converted to it (each random fill drawn in float32)."""
    from transformers.models.llama import LlamaConfig, LlamaForCausalLM

    for dtype in ("bfloat16", "float16"):
        setup = llama.build(P.resolved(preset="tiny", layers=2, dtype=dtype))
        after = torch.rand(4)
        torch.manual_seed(0)
        config = LlamaConfig(**model_config.config_dict("tiny", 2))
        converted = LlamaForCausalLM(config).to(getattr(torch, dtype))
        assert torch.equal(torch.rand(4), after)
        built, expected = setup.model.state_dict(), converted.state_dict()
        assert built.keys() == expected.keys()
        assert all(built[k].dtype == expected[k].dtype and torch.equal(built[k], expected[k]) for k in built)
        assert all(torch.equal(a, b) for a, b in zip(setup.model.buffers(), converted.buffers()))
        assert torch.get_default_dtype() == torch.float32


# ``model.build`` in a fresh interpreter: the growth of its peak RSS (ru_maxrss, from the RSS before the
# build) in bytes. (A step of the tiny model's 6 tokens adds ~14 MiB to 3,000 layers, and ~20 ms a layer.)
PEAK_OF_A_BUILD = """
import json, resource, sys
from latency_lab.core import model as llama
from latency_lab.core import parameters as P

params = P.resolved(**json.loads(sys.argv[1]))
before = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS:"))
llama.build(params)
print(json.dumps((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024))
"""


def test_a_build_at_the_largest_size_the_check_admits_stays_within_the_memory():
    """For 768 MiB available, the deepest tiny model the check admits (bf16 and float32: with and
    without weights drawn in float32), built as a run builds it in a fresh interpreter, grows its peak
    RSS by less than 768 MiB; one layer more is refused, naming the largest that fits."""
    budget = (768 * 2**20, "RAM available")
    runs = {}
    for dtype in ("bfloat16", "float32"):
        with pytest.raises(P.ParameterError) as err:
            fits.check_fits(P.resolved(preset="tiny", dtype=dtype, layers=10**9), {"layers": 10**9}, budget)
        top = int(str(err.value).split(" up to ")[1].split(" ")[0].replace(",", ""))
        fits.check_fits(P.resolved(preset="tiny", dtype=dtype, layers=top), {"layers": top}, budget)
        with pytest.raises(P.ParameterError) as err:
            fits.check_fits(P.resolved(preset="tiny", dtype=dtype, layers=top + 1), {"layers": top + 1}, budget)
        message = str(err.value)
        assert err.value.name == "layers" and f"up to {top:,} on this machine" in message, message
        assert "more than its 0.75 GiB of RAM available" in message, message
        given = {"preset": "tiny", "dtype": dtype, "layers": top}
        runs[dtype, top] = subprocess.Popen(
            [sys.executable, "-c", PEAK_OF_A_BUILD, json.dumps(given)],
            cwd=ROOT,
            env=cpu_environment(),
            stdout=subprocess.PIPE,
            text=True,
        )
    for (dtype, top), proc in runs.items():
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0 and top > 1000, (dtype, top, proc.returncode)
        assert json.loads(out.splitlines()[-1]) <= budget[0], (dtype, top, int(out.splitlines()[-1]) / 2**20)


def test_seed_call_kwargs_match_the_seed():
    setup = llama.build(P.validate(device="cpu", preset="tiny"))
    kw = setup.kwargs
    assert set(kw) == {"cache_positions", "input_ids", "attention_mask", "inputs_embeds", "use_cache", "return_dict"}
    assert kw["cache_positions"].tolist() == list(range(6))
    assert kw["input_ids"].tolist() == [[t % 1024 for t in llama.SEED_TOKEN_IDS]]
    assert kw["use_cache"] is True and kw["inputs_embeds"] is None


def test_seed_token_ids_unchanged_on_seed_vocab():
    ids = llama.token_ids(P.validate(device="cpu"), 128256)
    assert ids.tolist() == [llama.SEED_TOKEN_IDS]


def test_cache_modes_run_and_agree():
    outs = {}
    for mode in ("seed", "static", "none"):
        setup = llama.build(P.validate(device="cpu", preset="tiny", cache_mode=mode, dtype="float32"))
        outs[mode] = llama.logits_of(setup.model(**setup.kwargs))
    assert outs["seed"].shape == (1, 6, 1024)
    torch.testing.assert_close(outs["static"], outs["seed"], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(outs["none"], outs["seed"], rtol=1e-4, atol=1e-4)


def test_batch_and_seq_len_shape_inputs():
    setup = llama.build(P.validate(device="cpu", preset="tiny", batch_size=2, seq_len=9))
    assert tuple(setup.kwargs["input_ids"].shape) == (2, 9)
    assert llama.logits_of(setup.model(**setup.kwargs)).shape == (2, 9, 1024)


def test_step_bytes_counts_tied_embedding_once():
    setup = llama.build(P.validate(device="cpu", preset="tiny"))
    b = llama.step_bytes(setup)
    cfg = setup.config
    embed = cfg.vocab_size * cfg.hidden_size * 2
    assert (
        b["weights"] == llama.weight_bytes(setup.model) < sum(p.numel() * 2 for p in setup.model.state_dict().values())
    )
    assert b["weights"] > embed
    assert b["logits"] == 6 * cfg.vocab_size * 2
    assert b["kv_cache"] == 2 * 1 * 6 * cfg.num_key_value_heads * cfg.head_dim * 2
    assert b["total"] == b["weights"] + b["logits"] + b["kv_cache"]


def test_compare_to_eager_tolerance():
    ref = torch.randn(1, 6, 32)
    assert llama.compare_to_eager(ref.clone(), ref, "bfloat16")["passed"]
    assert not llama.compare_to_eager(ref * 1.1, ref, "bfloat16")["passed"]
    assert not llama.compare_to_eager(ref[:, :3], ref, "float32")["passed"]
    bad = ref.clone()
    bad[0, 0, 0] = float("nan")
    assert not llama.compare_to_eager(bad, ref, "bfloat16")["passed"]
    mask = torch.full((4, 4), torch.finfo(torch.float32).min).triu(1)
    assert llama.compare_to_eager(mask, mask.clone(), "float32")["rel_err"] == 0.0  # no overflow to nan


def test_tolerance_grows_with_the_square_root_of_depth():
    ref = torch.randn(1, 6, 32)
    off = ref * 1.04  # rel err 0.04: beyond one layer's bf16 tolerance, within 16 layers' (4 x 2e-2)
    assert not llama.compare_to_eager(off, ref, "bfloat16")["passed"]
    check = llama.compare_to_eager(off, ref, "bfloat16", layers=16)
    assert check["passed"] and check["tolerance"] == pytest.approx(0.08)
    assert llama.tolerance("float32", 4) == pytest.approx(2e-4) and llama.tolerance("bfloat16", 0) == 2e-2


def test_model_setup_study_runs_without_papermill_and_saves_the_notebooks_results(tmp_path, tiny_run):
    params = P.validate(preset="tiny", device="cpu", executors="eager,thunder", output_dir=str(tmp_path))
    result = model_setup.run(params)
    assert result.config["num_hidden_layers"] == 1 and result.config_rows[0] == {
        "key": next(iter(result.config)),
        "value": str(next(iter(result.config.values()))),
    }
    assert {"key", "seed", "here"} == set(result.changed_rows[0])  # the tiny preset shrinks the seed's config
    assert result.cost["step_bytes"] > result.cost["weight_bytes"] > 0
    assert result.cost["floor_ms_measured"] is None and result.cost_rows[-1]["value"] is None  # no bandwidth on a CPU
    assert set(result.call) == set(llama.build(params).kwargs) and result.call["use_cache"] is True
    assert {"item": "gpu", "value": "none"} in result.env_rows
    eager, thunder = result.executors
    assert eager["status"] == "ok" and thunder["status"] != "ok" and thunder["reason"]
    assert result.findings[0].endswith("no device bandwidth on a CPU, so no floor.")
    assert result.findings[1].startswith("1 of 2 executors can run here; thunder: ")
    saved = results.load(result.save())
    assert saved.keys() == results.load(tiny_run / f"{results.MODEL_SETUP}{results.SUFFIX}").keys()
    assert saved["executors"] == [dict(r) for r in result.executors] and saved["findings"] == result.findings
