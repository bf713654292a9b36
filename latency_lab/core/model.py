"""The seed's model and call: HF Llama 3.2 1B (``model_config``), cut to ``layers`` layers, and its inputs.

``cache_mode`` picks the call:
  seed    the seed's exact kwargs (``cache_positions=...``, ``use_cache=True``, no cache passed)
  static  a ``StaticCache`` passed in as ``past_key_values`` with ``cache_position``
  none    ``use_cache=False``
"""

from __future__ import annotations

import contextlib
import inspect
import math
from dataclasses import dataclass, replace

import torch
from torch.overrides import TorchFunctionMode

from . import timing
from .model_config import config_dict
from .parameters import Params
from .phases import phase

SEED_TOKEN_IDS = [128000, 791, 1401, 311, 2324, 374]


def token_ids(params: Params, vocab_size: int) -> torch.Tensor:
    """The seed's 6 token ids, repeated to ``seq_len`` and ``batch_size``, folded into the vocab."""
    ids = [SEED_TOKEN_IDS[i % len(SEED_TOKEN_IDS)] % vocab_size for i in range(params.seq_len)]
    return torch.tensor([ids] * params.batch_size, dtype=torch.int64)


@dataclass
class Setup:
    """A model ready to run and the kwargs of one forward step."""

    params: Params
    config: object
    model: torch.nn.Module
    kwargs: dict

    @property
    def dtype(self) -> torch.dtype:
        return getattr(torch, self.params.dtype)


def static_cache(config, batch_size: int, max_cache_len: int, device: str, dtype: torch.dtype):
    """A ``StaticCache`` of ``max_cache_len`` positions (allocated once, zero-filled)."""
    from transformers import StaticCache

    # transformers 4.46 names the batch argument `batch_size`, later releases `max_batch_size`.
    batch_arg = "batch_size" if "batch_size" in inspect.signature(StaticCache).parameters else "max_batch_size"
    return StaticCache(
        config=config, max_cache_len=max_cache_len, device=device, dtype=dtype, **{batch_arg: batch_size}
    )


def make_kwargs(params: Params, config, device: str) -> dict:
    """Forward kwargs for ``cache_mode``; a static cache is allocated once and reused every step."""
    ids = token_ids(params, config.vocab_size).to(device)
    positions = torch.arange(params.seq_len, device=device)
    mask = torch.ones(params.batch_size, params.seq_len, dtype=torch.int64, device=device)
    if params.cache_mode == "seed":
        # The seed's call verbatim. Note: `cache_positions` (plural) is not a forward parameter of
        # LlamaForCausalLM; transformers swallows it through **kwargs, as it did in the seed.
        return dict(
            cache_positions=positions,
            input_ids=ids,
            attention_mask=mask,
            inputs_embeds=None,
            use_cache=True,
            return_dict=True,
        )
    if params.cache_mode == "none":
        return dict(input_ids=ids, attention_mask=mask, use_cache=False, return_dict=True)
    cache = static_cache(config, params.batch_size, params.seq_len, device, getattr(torch, params.dtype))
    return dict(
        input_ids=ids,
        attention_mask=mask,
        past_key_values=cache,
        cache_position=positions,
        use_cache=True,
        return_dict=True,
    )


class DrawInFloat32(TorchFunctionMode):
    """Random fills (``normal_``, ``uniform_``) of tensors of another dtype drawn in float32 and rounded
    into them: the values, and the generator's state after, of a float32 model converted to that dtype."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.normal_, torch.Tensor.uniform_) and args[0].dtype != torch.float32:
            return args[0].copy_(func(torch.empty_like(args[0], dtype=torch.float32), *args[1:], **kwargs))
        return func(*args, **kwargs)


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype):
    """torch's default dtype set to ``dtype`` inside the block."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


@phase("build")
def build(params: Params) -> Setup:
    """Instantiate the model as the seed does (random weights, eval, no grad) and its inputs. The model is
    made in its dtype, with no float32 copy, and holds the weights the float32 model converted to that
    dtype holds (``DrawInFloat32``); ``model_config.memory_needed`` counts its peak."""
    from transformers.models.llama import LlamaConfig, LlamaForCausalLM

    timing.use_device(params.device)
    torch.manual_seed(params.seed)
    config = LlamaConfig(**config_dict(params.preset, params.layers))
    dtype = getattr(torch, params.dtype)
    with torch.device(params.device), default_dtype(dtype), DrawInFloat32():
        model = LlamaForCausalLM(config)
    model = model.to(dtype).requires_grad_(False).eval()  # the RoPE buffers, made in float32
    return Setup(params, config, model, make_kwargs(params, config, params.device))


def logits_of(output) -> torch.Tensor:
    """The logits of a forward's output (a ModelOutput, a dict or a tuple)."""
    if hasattr(output, "logits"):
        return output.logits
    if isinstance(output, dict):
        return output["logits"]
    return output[0]


def parameter_count(model: torch.nn.Module) -> int:
    """Unique parameters (the tied embedding / lm_head counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def weight_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in {id(p): p for p in model.parameters()}.values())


def step_bytes(setup: Setup) -> dict:
    """Bytes one forward step must move at least: every weight read once (the tied lm_head reads
    the whole embedding matrix), logits written, and the K/V cache written when one is used."""
    p, cfg = setup.params, setup.config
    elem = torch.tensor([], dtype=setup.dtype).element_size()
    tokens = p.batch_size * p.seq_len
    weights = weight_bytes(setup.model)
    logits = tokens * cfg.vocab_size * elem
    kv = 0 if p.cache_mode == "none" else 2 * p.layers * tokens * cfg.num_key_value_heads * cfg.head_dim * elem
    return {"weights": weights, "logits": logits, "kv_cache": kv, "total": weights + logits + kv}


def bandwidth_floor(setup: Setup, measured_bandwidth: float | None = None) -> dict:
    """The memory-bandwidth floor of one step: ``step_bytes`` over the device's bandwidth, from its
    datasheet and as measured (``environment.measured_bandwidth``, measured here unless given);
    None on a CPU, where no bandwidth is known."""
    from . import environment

    device = setup.params.device
    sheet = environment.datasheet_bandwidth(device)
    measured = measured_bandwidth or environment.measured_bandwidth(device)
    total = step_bytes(setup)["total"]
    return {
        "step_bytes": total,
        "bandwidth_datasheet_GBps": sheet / 1e9 if sheet else None,
        "bandwidth_measured_GBps": measured / 1e9 if measured else None,
        "floor_ms_datasheet": total / sheet * 1e3 if sheet else None,
        "floor_ms_measured": total / measured * 1e3 if measured else None,
    }


@dataclass
class DecodeSetup:
    """A ``StaticCache`` pre-filled with a prompt and the kwargs of the one-token decode step after it."""

    cache: object
    prompt_len: int
    max_cache_len: int
    kwargs: dict  # input_ids (batch, 1), cache_position [prompt_len], past_key_values, use_cache=True


def build_decode(setup: Setup, prompt_len: int, new_tokens: int) -> DecodeSetup:
    """The decode step generation repeats, on ``setup.model``: a ``StaticCache`` of
    ``prompt_len + new_tokens`` positions, filled by one eager prefill call of the prompt (the seed's
    token ids repeated to ``prompt_len``, positions 0 .. prompt_len - 1), and the kwargs of the next
    step: the prompt's greedy next token as ``input_ids`` and ``cache_position=[prompt_len]``.
    Calling the model with these kwargs again and again re-writes the same cache slot each time;
    ``greedy_decode`` advances the position instead."""
    if prompt_len < 1 or new_tokens < 1:
        raise ValueError(f"build_decode needs prompt_len >= 1 and new_tokens >= 1, got {prompt_len}, {new_tokens}")
    p, device = setup.params, setup.params.device
    cache = static_cache(setup.config, p.batch_size, prompt_len + new_tokens, device, setup.dtype)
    ids = token_ids(replace(p, seq_len=prompt_len), setup.config.vocab_size).to(device)
    with torch.no_grad():
        out = setup.model(
            input_ids=ids,
            cache_position=torch.arange(prompt_len, device=device),
            past_key_values=cache,
            use_cache=True,
            return_dict=True,
        )
    next_ids = logits_of(out)[:, -1:].argmax(-1)
    kwargs = dict(
        input_ids=next_ids,
        cache_position=torch.tensor([prompt_len], device=device),
        past_key_values=cache,
        use_cache=True,
        return_dict=True,
    )
    return DecodeSetup(cache, prompt_len, prompt_len + new_tokens, kwargs)


def greedy_decode(fn, decode: DecodeSetup, tokens: int, logits: list | None = None) -> list[torch.Tensor]:
    """``tokens`` greedy steps of ``fn`` from the decode step's kwargs: per token one call at
    ``cache_position=[prompt_len + i]``, the argmax of its last logits, and that token as the next
    input. Nothing here synchronizes the device (the caller's timer does, once, after the loop).
    Returns the generated token ids, one (batch, 1) tensor per step; each step's last logits
    (batch, vocab) are appended to ``logits`` when one is given."""
    if tokens > decode.max_cache_len - decode.prompt_len:
        raise ValueError(
            f"greedy_decode: {tokens} tokens exceed the cache's "
            f"{decode.max_cache_len - decode.prompt_len} free positions"
        )
    kw = dict(decode.kwargs)
    ids, position, generated = kw.pop("input_ids"), kw.pop("cache_position"), []
    for _ in range(tokens):
        last = logits_of(fn(input_ids=ids, cache_position=position, **kw))[:, -1]
        if logits is not None:
            logits.append(last.detach().clone())
        ids = last.argmax(-1, keepdim=True)
        generated.append(ids)
        position = position + 1
    return generated


# Relative error ||out - ref|| / ||ref|| allowed against eager, per dtype. bf16 keeps 8 mantissa
# bits (eps 2**-8 ~ 3.9e-3); fusions reorder accumulations, so a few eps of relative error is normal.
TOLERANCE = {"bfloat16": 2e-2, "float16": 5e-3, "float32": 1e-4}  # per layer (one layer: the seed's model)


def tolerance(dtype: str, layers: int = 1) -> float:
    """Allowed relative error of the logits: ``TOLERANCE[dtype]`` times sqrt(layers), since each
    layer adds its own independent rounding differences (a fused kernel rounds once, eager per op)."""
    return TOLERANCE[dtype] * math.sqrt(max(1, layers))


def compare_to_eager(out: torch.Tensor, ref: torch.Tensor, dtype: str, layers: int = 1) -> dict:
    """Max abs diff and relative error ``||out - ref|| / ||ref||`` of an executor's output against
    eager's, on their device in float64 (float32 squares of a causal mask's values overflow), and
    whether it is within ``tolerance(dtype, layers)``."""
    tol = tolerance(dtype, layers)
    if out.shape != ref.shape:
        return {
            "max_abs_diff": None,
            "rel_err": None,
            "tolerance": tol,
            "passed": False,
            "mismatch": f"shape {tuple(out.shape)} != {tuple(ref.shape)}",
        }
    out, ref = out.detach().double(), ref.detach().double()
    diff = out - ref
    rel = (diff.norm() / ref.norm().clamp_min(1e-30)).item()
    return {
        "max_abs_diff": diff.abs().max().item(),
        "rel_err": rel,
        "tolerance": tol,
        "passed": bool(rel <= tol and torch.isfinite(out).all()),
    }
