"""Parameter validation: clear errors naming the parameter and the allowed values."""

import pytest

from latency_lab.core import catalog, fits, model_config, results
from latency_lab.core import parameters as P


def test_defaults_resolve_for_cpu():
    p = P.validate(device="cpu")
    assert (p.preset, p.layers, p.seq_len, p.dtype, p.cache_mode) == ("seed", 1, 6, "bfloat16", "seed")
    assert (p.warmup, p.iters, p.repeats) == tuple(P.TIMING_DEFAULTS["cpu"][k] for k in ("warmup", "iters", "repeats"))
    assert p.executors[0] == "eager" and "thunder" in p.executors


def test_auto_device_is_cuda_when_present_else_cpu():
    import torch

    assert P.validate().device == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.parametrize(
    "name, value, fragment",
    [
        ("layers", 0, "an integer >= 1"),
        ("layers", 1.5, "an integer >= 1"),
        ("layers", True, "an integer >= 1"),
        ("dtype", "int8", "bfloat16"),
        ("preset", "huge", "seed, tiny"),
        ("cache_mode", "dynamic", "seed, static, none"),
        ("executors", ["eager", "tvm"], "unknown: tvm"),
        ("executors", [], "non-empty list"),
        ("executors", "eager,thunder,eager", ", each once (twice: eager)"),
        ("ops", ["add", "add"], ", each once (twice: add)"),
        ("ops", "add,conv", "unknown: conv"),
        ("sizes", ["seed", "3y"], "'<k>x'"),
        ("device", "cuda:99", "cuda:0 .. cuda:" if __import__("torch").cuda.is_available() else "no CUDA device"),
        ("device", "tpu", "auto, cpu, cuda"),
        ("warmup", -1, "an integer >= 0"),
        ("repeats", 3, "an even integer >= 2"),
        ("repeats", 0, "an even integer >= 2"),
        ("seed", -1, "an integer 0..4294967295"),
        ("seed", 2**32, "an integer 0..4294967295"),
        ("bogus", 1, "parameter names"),
    ],
)
def test_bad_values_name_parameter_and_allowed(name, value, fragment):
    with pytest.raises(P.ParameterError) as err:
        P.validate({name: value})
    assert err.value.name == name
    assert f"invalid parameter {name}=" in str(err.value)
    assert fragment in str(err.value)


def test_dtype_aliases_and_comma_lists():
    p = P.validate(dtype="bf16", executors="eager, thunder:torch", ops="add,mul", sizes="seed,4x")
    assert p.dtype == "bfloat16"
    assert p.executors == ("eager", "thunder:torch")
    assert p.ops == ("add", "mul") and p.sizes == ("seed", "4x")


def test_parse_value_is_literal_or_string_never_eval():
    assert P.parse_value("3") == 3
    assert P.parse_value("['eager', 'thunder']") == ["eager", "thunder"]
    assert P.parse_value("None") is None
    assert P.parse_value("eager,thunder") == "eager,thunder"
    assert P.parse_value("__import__('os').getcwd()") == "__import__('os').getcwd()"


def test_from_namespace_picks_only_parameters():
    p = P.from_namespace({"preset": "tiny", "layers": 2, "unrelated": object()})
    assert (p.preset, p.layers) == ("tiny", 2)


@pytest.mark.parametrize(
    "name, value",
    [
        ("depths", []),
        ("depths", [0, 1]),
        ("depths", 4),
        ("depths", [1, 2.5]),
        ("depths", [True]),
        ("prompt_lengths", "long"),
        ("prompt_lengths", [-6]),
        ("prompt_lengths", [None]),
    ],
)
def test_bad_sweep_lists_name_parameter_and_allowed(name, value):
    with pytest.raises(P.ParameterError) as err:
        P.validate({name: value, "device": "cpu"})
    assert err.value.name == name
    assert "a non-empty list of integers >= 1" in str(err.value)


@pytest.mark.parametrize("value", [0, -1, 2.0, "8", True])
def test_bad_decode_tokens_names_parameter(value):
    with pytest.raises(P.ParameterError) as err:
        P.validate(decode_tokens=value, device="cpu")
    assert err.value.name == "decode_tokens" and "an integer >= 1" in str(err.value)


def test_sweeps_resolve_per_preset_and_keep_given_points_sorted():
    cpu = P.validate(device="cpu")
    assert (cpu.depths, cpu.prompt_lengths, cpu.decode_tokens) == tuple(
        P.SWEEP_DEFAULTS["cpu"][k] for k in ("depths", "prompt_lengths", "decode_tokens")
    )
    tiny = P.validate(preset="tiny", device="cpu")
    assert (tiny.depths, tiny.prompt_lengths, tiny.decode_tokens) == tuple(
        P.TINY_SWEEPS[k] for k in ("depths", "prompt_lengths", "decode_tokens")
    )
    p = P.validate(device="cpu", depths=[16, 1, 4, 4], prompt_lengths=(512, 1), decode_tokens=3)
    assert (p.depths, p.prompt_lengths, p.decode_tokens) == ((1, 4, 16), (1, 512), 3)


@pytest.mark.parametrize(
    "text",
    [
        "1+" * 5000 + "1",
        "[" * 100_000,
        "(" * 300 + ")" * 300,
        "1\x00",
        "9" * 5000,
        "'" + "a" * 10,
        "{1: " * 2000,
        "-" * 10_000 + "1",
    ],
)
def test_parse_value_never_raises(text):
    """Text the parser cannot take (too deep, too long, null bytes) is a plain string, not a crash."""
    value = P.parse_value(text)
    assert value == text or isinstance(value, int)


def test_long_bad_values_are_echoed_shortened():
    with pytest.raises(P.ParameterError) as err:
        P.validate(seed="1+" * 5000)  # 10,000 characters of its own, not counting the quotes
    message = str(err.value)
    assert message.startswith("invalid parameter seed='1+1+1+") and "(10,000 characters)" in message
    assert len(message) < 200 and message.endswith("allowed an integer 0..4294967295")
    nested = []
    for _ in range(2000):
        nested = [nested]
    with pytest.raises(P.ParameterError) as err:
        P.validate(depths=nested, device="cpu")
    assert len(str(err.value)) < 200 and "[[[[" in str(err.value)


@pytest.mark.parametrize("name", fits.SIZE_PARAMS)
def test_sizes_are_bounded_by_what_the_machine_holds(name, monkeypatch):
    """A size too large for the memory available is refused, naming the largest that fits, which
    validates, and one more does not (the available memory held still, as read once)."""
    memory = fits.machine_memory("cpu")
    monkeypatch.setattr(fits, "machine_memory", lambda device: memory)
    huge = {"sizes": ["99999999999999x"], "depths": [10**9], "prompt_lengths": [10**9]}.get(name, 10**9)
    with pytest.raises(P.ParameterError) as err:
        P.validate({name: huge, "device": "cpu"})
    message = str(err.value)
    assert err.value.name == name and "on this machine" in message and "GiB of RAM available" in message, message
    top = int(message.split(" up to ")[1].split(" ")[0].replace(",", ""))
    at = (lambda n: [f"{n}x"]) if name == "sizes" else (lambda n: [n]) if name in ("depths", "prompt_lengths") else int
    P.validate({name: at(top), "device": "cpu"})
    with pytest.raises(P.ParameterError):
        P.validate({name: at(top + 1), "device": "cpu"})
    assert model_config.memory_needed(P.validate({name: at(top), "device": "cpu"})) <= memory[0]


def test_sizes_are_held_against_available_memory_not_total(monkeypatch, tmp_path):
    """The check reads MemAvailable on a CPU and the free memory on a GPU, not their totals: 16 layers
    of the seed model (about 4.4 GiB) fit in the 23.5 GiB of MemTotal, not in its 4 GiB available."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683784 kB\nMemFree:         1048576 kB\nMemAvailable:    4194304 kB\n")
    assert fits.available_ram(str(meminfo)) == (4 * 2**30, "RAM available")
    monkeypatch.setattr(fits, "available_ram", lambda: (4 * 2**30, "RAM available"))
    with pytest.raises(P.ParameterError) as err:
        P.validate(device="cpu", layers=16)
    message = str(err.value)
    assert err.value.name == "layers" and "more than its 4 GiB of RAM available" in message, message
    top = int(message.split(" up to ")[1].split(" ")[0])
    assert 1 <= top < 16 and model_config.memory_needed(P.validate(device="cpu", layers=top)) <= 4 * 2**30
    import torch

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda index: (3 * 2**30 + index, 80 * 2**30))
    assert fits.machine_memory("cuda:1") == (3 * 2**30 + 1, "GPU memory (cuda:1) available")


def test_memory_needed_counts_the_builds_peak():
    """One layer of the seed model: 323.5 M weights; its build holds them with the lm_head untied (the
    embedding's 262.7 M once more) and, in bf16, the embedding drawn in float32, more than a step of 6
    tokens needs. The bound adds 10%, the fixed allowance and, on a CPU, the layer's Python objects."""
    weights, embedding = 323_491_840, 128256 * 2048
    builds = {"bfloat16": (weights + embedding) * 2 + embedding * 4, "float32": (weights + embedding) * 4}
    for device, objects in (("cpu", model_config.LAYER_OBJECT_BYTES), ("cuda", 0)):
        for dtype, build in builds.items():
            p = P.resolved(device=device, dtype=dtype, depths=[1], prompt_lengths=[6], decode_tokens=1)
            assert model_config.memory_needed(p) == int(1.1 * build) + model_config.FIXED_BYTES + objects


def test_the_schema_is_declared_once_params_only_come_resolved():
    """``Params`` has no defaults of its own: ``validate`` and ``resolved`` make it from ``SCHEMA`` and
    the per-device tables, so a run described for a GPU gets the GPU's timing and sweeps."""
    with pytest.raises(TypeError):
        P.Params()
    assert P.resolved() == P.validate(device="cpu")
    gpu = P.resolved(device="cuda")
    assert (gpu.warmup, gpu.iters, gpu.repeats) == tuple(
        P.TIMING_DEFAULTS["cuda"][k] for k in ("warmup", "iters", "repeats")
    )
    assert gpu.depths == P.SWEEP_DEFAULTS["cuda"]["depths"]
    with pytest.raises(P.ParameterError, match="device"):
        P.resolved(device="auto")


def test_a_notebook_takes_its_cpu_defaults_on_a_cpu_only_and_a_given_value_wins():
    """06 on a CPU runs Thunder without nvFuser in nvFuser's place (its catalog entry's ``cpu_defaults``); on a
    GPU its own defaults stand; a value given wins on both; a notebook without CPU defaults is unchanged."""
    scaling = results.SCALING
    assert "thunder:torch" in P.for_notebook(scaling, {"device": "cpu", "preset": "tiny"}).executors
    assert "thunder" not in P.for_notebook(scaling, {"device": "cpu", "preset": "tiny"}).executors
    assert P.own_defaults(scaling, "cuda") == catalog.entry(scaling).defaults
    given = P.for_notebook(scaling, {"device": "cpu", "preset": "tiny", "executors": "eager"})
    assert given.executors == ("eager",)
    levers = results.LEVERS
    assert P.own_defaults(levers, "cpu") == P.own_defaults(levers, "cuda") == catalog.entry(levers).defaults


def test_a_notebook_that_holds_several_models_is_checked_with_all_of_them(monkeypatch):
    """06 builds every sweep point before its rounds (here 1 and 2 layers, and 2,000 for each of two
    prompt lengths and the decode step): at a budget between one model's need and those five models',
    01 is admitted and 06 refused, naming the largest ``layers`` that fits and the models held."""
    given = {"preset": "tiny", "device": "cpu", "layers": 2000}
    p = P.for_notebook(results.MODEL_SETUP, given)
    scaling = P.validate({**given, **P.own_defaults(results.SCALING, "cpu")})
    ab = P.resolved(preset="seed", device="cuda", executors="thunder", planted_pct=[1, 2, 5], budget_s=600, workers=4)
    assert fits.ab_processes(ab) == 4 * 5 + 1  # A, A', three planted arms on 4 slots, and the calibration worker
    need = fits.ab_bytes(ab)  # every worker built, and as many at a build's peak as build side by side
    assert need == 21 * fits.worker_bytes(ab) + fits.builds_side_by_side(ab) * fits.build_extra_bytes(ab)
    with pytest.raises(P.ParameterError, match=r"invalid parameter workers=4: allowed at most 3 slots on"):
        fits.check_workers_fit(ab, {}, (need - 1, "GPU memory"))
    fits.check_workers_fit(ab, {}, (need, "GPU memory"))
    assert fits.workers_that_fit(ab, (need - 1, "GPU memory")) == 3
    held = catalog.entry(results.SCALING).models_held(scaling)
    assert held == (1, 2, 2000, 2000) and catalog.entry(results.MODEL_SETUP).models_held(p) == ()
    one, five = model_config.memory_needed(p), model_config.memory_needed(scaling, held)
    assert five > 2 * one
    monkeypatch.setattr(fits, "machine_memory", lambda device: ((one + five) // 2, "RAM available"))
    P.for_notebook(results.MODEL_SETUP, given)
    with pytest.raises(P.ParameterError, match=r"layers=2000: allowed an integer up to .*5 models held at once"):
        P.for_notebook(results.SCALING, given)


def test_08_by_default_runs_as_many_workers_as_fit_and_refuses_more_when_asked(monkeypatch):
    """In a run of every notebook, 08's default slots shrink to what the memory holds (at least 2); a number
    given with -p is checked as given."""
    tiny = {"preset": "tiny", "device": "cpu"}
    need = fits.ab_bytes(P.resolved(**tiny, workers=2))
    monkeypatch.setattr(fits, "machine_memory", lambda device: (need, "RAM available"))
    assert P.for_notebook(results.AB_BUILDS, tiny).workers == 2  # 3 arms on 2 slots, and the calibration worker
    with pytest.raises(P.ParameterError, match=r"invalid parameter workers=4: allowed at most 2 slots"):
        P.for_notebook(results.AB_BUILDS, {**tiny, "workers": 4})
    monkeypatch.setattr(fits, "machine_memory", lambda device: (10 * need, "RAM available"))
    assert P.for_notebook(results.AB_BUILDS, tiny).workers == 4
