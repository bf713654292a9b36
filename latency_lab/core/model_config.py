"""The seed's model as data, no torch: its config (verbatim), the tiny preset, and the memory a run needs
at its peak (``memory_needed``, the bound ``parameters`` checks sizes against)."""

# Verbatim from the seed (test_networks::testhf_llama in lightning-thunder).
LLAMA_3_2_1B_CFG = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 8192,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 16,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 32.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0",
    "use_cache": True,
    "vocab_size": 128256,
    "_commit_hash": "4e20de362430cd3b72f300e6b0f18e50e7166e08",
}

# Same architecture (GQA 4:1, llama3 RoPE scaling, tied embeddings), small enough for CPU tests.
TINY_OVERRIDES = {
    "head_dim": 16,
    "hidden_size": 64,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "vocab_size": 1024,
}

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
FLOAT32_BYTES = 4
# A decoder layer's Python objects in host RAM (its modules, parameters and their dicts): 42 KiB measured
# with CPython 3.11 and transformers 4.46.
LAYER_OBJECT_BYTES = 64 * 2**10
# What the estimate leaves out: allocator rounding and slack (a fraction of the tensors), and what loads
# after the check (transformers' model code, torch._dynamo for a static cache: 40-140 MiB of RAM
# measured; cuBLAS's workspaces on a GPU).
MARGIN, FIXED_BYTES = 0.1, 256 * 2**20


def config_dict(preset: str, layers: int) -> dict:
    """The config as a plain dict: the seed's, or the tiny preset's overrides applied to it."""
    cfg = dict(LLAMA_3_2_1B_CFG)
    if preset == "tiny":
        cfg.update(TINY_OVERRIDES)
    cfg["num_hidden_layers"] = layers
    return cfg


def weight_count(preset: str, layers: int) -> int:
    """Weights of the model of ``preset`` at ``layers`` (the tied lm_head once)."""
    c = config_dict(preset, layers)
    hidden, inter, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    q, kv = c["num_attention_heads"] * c["head_dim"], c["num_key_value_heads"] * c["head_dim"]
    return vocab * hidden + layers * (2 * hidden * q + 2 * hidden * kv + 3 * hidden * inter + 2 * hidden) + hidden


def memory_needed(p, held: tuple[int, ...] = ()) -> int:
    """An upper bound of the memory a run needs at its peak, in bytes: the larger of the model's build
    and its largest step, plus ``MARGIN`` of that and ``FIXED_BYTES``, and on a CPU the layers' Python
    objects (``LAYER_OBJECT_BYTES`` each). The model is at its deepest (``layers``, ``depths``). Its build
    (``model.build``) holds the weights in their dtype with the tied lm_head still a matrix of its own,
    and one weight drawn in float32 (the largest) unless the dtype is float32. A step holds the weights,
    a KV cache of the longest context and the largest activations (logits, the MLP's, a causal mask of
    context x context) of that many tokens per sequence, where the context is the longest of
    ``seq_len`` times the largest ``sizes`` factor (04's ops) and the longest prompt plus
    ``decode_tokens`` (06). ``held``: the layers of each other model the run holds meanwhile (06's
    sweep points), counted at their weights. ``p`` is a ``parameters.Params``."""
    layers = max(p.layers, *p.depths)
    c = config_dict(p.preset, layers)
    hidden, inter, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    q, kv = c["num_attention_heads"] * c["head_dim"], c["num_key_value_heads"] * c["head_dim"]
    embedding = vocab * hidden
    weights = weight_count(p.preset, layers)
    drawn = 0 if p.dtype == "float32" else FLOAT32_BYTES * max(embedding, hidden * inter, hidden * q)
    build = (weights + embedding) * DTYPE_BYTES[p.dtype] + drawn
    factor = max((int(s[:-1]) for s in p.sizes if s != "seed"), default=1)
    context = max(p.seq_len * factor, max(p.prompt_lengths) + p.decode_tokens)
    activations = p.batch_size * context * (vocab + 3 * inter + 4 * hidden + context)
    cache = layers * 2 * p.batch_size * context * kv
    step = (weights + activations + cache) * DTYPE_BYTES[p.dtype]
    objects = 0 if p.device.startswith("cuda") else (layers + sum(held)) * LAYER_OBJECT_BYTES
    others = sum(weight_count(p.preset, n) for n in held) * DTYPE_BYTES[p.dtype]
    return int((1 + MARGIN) * (max(build, step) + others)) + FIXED_BYTES + objects
