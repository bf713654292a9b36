"""Notebook 01, model setup: the config, what one step costs at least, the environment, the call and
the executors that can run here."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import model, model_config, registry, results
from ..core.parameters import Params
from ..core.row_types import AvailabilityRow
from ..pages import tables
from .base import Study, begin, saved


@dataclass
class Result(Study):
    """What notebook 01 shows and saves."""

    NOTEBOOK = results.MODEL_SETUP
    TITLE = "Executors here"
    COLUMNS = ["executor", "label", "status", "reason"]

    config: dict = saved()  # the config the model is built from
    changed_rows: list[dict]  # its keys that differ from the seed's: key, seed, here
    config_rows: list[dict]  # every key: key, value
    cost: dict = saved()  # parameters, weight bytes, bytes per step, bandwidths and the floor
    cost_rows: list[dict]  # the cost as quantity, value, unit
    env_rows: list[dict]  # the environment as item, value
    call: dict  # the call's keyword arguments: shape and dtype, type or value
    executors: list[AvailabilityRow] = saved()
    findings: list[str] = saved()

    def key_table_rows(self) -> list[AvailabilityRow]:
        return self.executors


def cost_rows(cost: dict) -> list[dict]:
    """What one step costs at least, one quantity a row (value None: not measured on this device)."""
    return [
        {"quantity": "parameters (unique)", "value": cost["parameters"], "unit": ""},
        {"quantity": "weight bytes", "value": cost["weight_bytes"] / 1e6, "unit": "MB"},
        {
            "quantity": "bytes per step (weights + logits + K/V)",
            "value": cost["step_bytes"] / 1e6,
            "unit": "MB",
        },
        {"quantity": "memory bandwidth, datasheet", "value": cost["bandwidth_datasheet_GBps"], "unit": "GB/s"},
        {"quantity": "memory bandwidth, measured copy", "value": cost["bandwidth_measured_GBps"], "unit": "GB/s"},
        {
            "quantity": "bandwidth floor per step (measured bandwidth)",
            "value": cost["floor_ms_measured"] * 1e3 if cost["floor_ms_measured"] else None,
            "unit": "µs",
        },
    ]


def env_rows(env: dict) -> list[dict]:
    """Versions and hardware as item, value: the GPU's fields and the packages flattened in."""
    flat = {
        **{k: v for k, v in env.items() if k not in ("packages", "gpu")},
        **(env["gpu"] or {"gpu": "none"}),
        **env["packages"],
    }
    return [{"item": k, "value": v} for k, v in flat.items()]


def describe_call(kwargs: dict) -> dict:
    """Each keyword argument of the call: a tensor's shape and dtype, else its type's name (None and
    booleans as they are)."""
    return {
        k: (tuple(v.shape), str(v.dtype))
        if hasattr(v, "shape")
        else type(v).__name__
        if v is not None and not isinstance(v, bool)
        else v
        for k, v in kwargs.items()
    }


def findings(cost: dict, executors: list[AvailabilityRow]) -> list[str]:
    """The bytes one step moves and its floor, and how many executors can run here (and why not)."""
    return [
        f"One step must move {tables.number(cost['step_bytes'] / 1e6)} MB (weights, logits and K/V); "
        + (
            f"at the measured {tables.number(cost['bandwidth_measured_GBps'])} GB/s that takes at least "
            f"{tables.number(cost['floor_ms_measured'] * 1e3)} µs."
            if cost["floor_ms_measured"]
            else "no device bandwidth on a CPU, so no floor."
        ),
        f"{sum(r.status == 'ok' for r in executors)} of {len(executors)} executors can run here"
        + "".join(f"; {r.executor}: {r.reason}" for r in executors if r.status != "ok")
        + ".",
    ]


def run(params: Params) -> Result:
    """Build the seed's model, measure the bandwidth floor, collect the environment and check every
    selected executor."""
    env = begin(params)
    cfg = model_config.config_dict(params.preset, params.layers)
    seed_cfg = model_config.LLAMA_3_2_1B_CFG
    changed = {k: (seed_cfg.get(k), v) for k, v in cfg.items() if seed_cfg.get(k) != v}
    setup = model.build(params)
    cost = {
        "parameters": model.parameter_count(setup.model),
        "weight_bytes": model.weight_bytes(setup.model),
        **model.bandwidth_floor(setup),  # step_bytes: model.step_bytes' total
    }
    executors = []
    for ex in registry.selected(params.executors):
        status, reason = ex.check(params.device) or ("ok", None)
        executors.append(AvailabilityRow(ex.name, ex.label, ex.summary, status, reason))
    return Result(
        params=params,
        config=cfg,
        changed_rows=[{"key": k, "seed": str(a), "here": str(b)} for k, (a, b) in changed.items()],
        config_rows=[{"key": k, "value": str(v)} for k, v in cfg.items()],
        cost=cost,
        cost_rows=cost_rows(cost),
        env=env,
        env_rows=env_rows(env),
        call=describe_call(setup.kwargs),
        executors=executors,
        findings=findings(cost, executors),
    )
