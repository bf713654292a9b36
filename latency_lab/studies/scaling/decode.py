"""Notebook 06's decode step: the decode point's case (one token against a ``StaticCache`` pre-filled by
an eager prefill), its greedy loop as a probe timed after its block in every round, how many greedy tokens
of an executor equal eager's and where they first differ, and the loop's numbers for a row."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from ...core import harness, model, sweep, timing
from ...core.metrics import Stat


@dataclass
class DecodeCase(sweep.Case):
    """A decode point's case: its pre-filled cache and step (``model.build_decode``) and the greedy loop's
    length."""

    decode: model.DecodeSetup | None = None
    new_tokens: int = 0


def decode_case(params, prompt_tokens: int, bandwidth: float | None) -> DecodeCase:
    """One token at ``cache_position=[prompt_tokens]`` against a ``StaticCache`` pre-filled by an eager
    prefill, at ``params.layers`` layers; the executors share the cache (each call writes its own
    position before it attends to it, so no call reads what another executor wrote). Its output check
    is the step's logits against eager's; its extra step runs the greedy loop once and counts the
    tokens that equal eager's. The floor counts one token's weights, logits and K/V written."""
    setup, new = model.build(params), params.decode_tokens
    decode = model.build_decode(setup, prompt_tokens, new)
    reference = model.logits_of(setup.model(**decode.kwargs)).detach().clone()  # re-writes the same slot
    eager_logits: list = []
    eager_tokens = generated_tokens(model.greedy_decode(setup.model, decode, new, eager_logits))
    step = replace(params, seq_len=1, cache_mode="static")
    floor = model.bandwidth_floor(model.Setup(step, setup.config, setup.model, {}), bandwidth)["floor_ms_measured"]

    def check(p) -> dict:
        return harness.check_output(p, reference, params.dtype, params.layers)

    def greedy_tokens(p) -> dict:
        got = generated_tokens(model.greedy_decode(p.fn, decode, new))
        return {"match": (n := agreement(got, eager_tokens)), **divergence(eager_logits, got, eager_tokens, n)}

    return DecodeCase(
        setup.model, decode.kwargs, check, floor, extra={"tokens": greedy_tokens}, decode=decode, new_tokens=new
    )


def probes(built: list[sweep.Built], params) -> dict[str, dict]:
    """Per decode build: its greedy loop of ``decode_tokens`` tokens, timed once after its block in
    every round (``timing.block`` of one loop: CUDA events on a GPU, one sync at its end)."""

    def loop(b: sweep.Built):
        d, new, fn = b.case.decode, b.case.new_tokens, b.measured.fn
        return lambda: timing.block(lambda: model.greedy_decode(fn, d, new), {}, params.device, 1)

    return {b.key: {"loop": loop(b)} for b in built if isinstance(b.case, DecodeCase) and b.measured.ok}


def generated_tokens(generated: list[torch.Tensor]) -> list[list[int]]:
    return torch.cat(generated, dim=1).tolist()


def agreement(generated: list[list[int]], reference: list[list[int]]) -> int:
    """How many generated tokens, from the first on, equal eager's (all sequences of the batch)."""
    agree = 0
    for got, ref in zip(zip(*generated), zip(*reference)):
        if got != ref:
            break
        agree += 1
    return agree


NEAR_TIE_ULPS = 4  # eager's margin between the two tokens, in its dtype's ulps at the logits' size


def divergence(logits: list, got: list[list[int]], reference: list[list[int]], agree: int) -> dict:
    """Where an executor's greedy tokens first differ from eager's (step ``agree``): eager's logit
    margin there between its token and the executor's (largest over the batch), in units of the
    logits' dtype resolution at their size (ulps), and whether that is a near-tie (at most
    ``NEAR_TIE_ULPS``: a reordered reduction can flip it) rather than a wrong result. Empty when
    every token agrees."""
    if agree >= len(logits):
        return {}
    step = logits[agree]
    margins, ulps = [], []
    for b, (mine, ref) in enumerate(zip(got, reference)):
        if mine[agree] != ref[agree]:
            row = step[b].float()
            margin = (row[ref[agree]] - row[mine[agree]]).item()
            size = max(abs(row[ref[agree]].item()), torch.finfo(step.dtype).tiny)
            ulp = torch.finfo(step.dtype).eps * 2 ** math.floor(math.log2(size))
            margins.append(margin)
            ulps.append(margin / ulp)
    worst = max(range(len(ulps)), key=ulps.__getitem__)
    return {
        "divergence_margin": margins[worst],
        "divergence_ulps": ulps[worst],
        "near_tie": ulps[worst] <= NEAR_TIE_ULPS,
    }


def decode_numbers(loops: list | None, tokens: int, batch_size: int) -> dict:
    """From the greedy loop's blocks (one loop each): the loop's wall and the time per output token (loop /
    tokens) as statistics, and tokens per second (batch x tokens / loop median): ``row_types.ScalingRow``'s fields."""
    if not loops:
        return {"decode_tokens": tokens, "loop_ms": None, "tpot_ms": None, "tokens_per_s": None}
    loop = Stat.of(b.wall_ms for b in loops)
    return {
        "decode_tokens": tokens,
        "loop_ms": loop,
        "tpot_ms": loop.scaled(1 / tokens),
        "tokens_per_s": batch_size * tokens / (loop.median / 1e3),
    }
