"""The shape every study shares: ``run(params) -> Result``, its start (``begin``) and its ``Result``, a
``Study`` that holds the params and the environment and writes the notebook's one results file
(``<output_dir>/<notebook>.results.json``, ``results.save``) in ``save``.

A study's ``Result`` subclasses ``Study`` and declares which notebook it belongs to (``NOTEBOOK``), its
key table (``TITLE`` and ``COLUMNS`` over ``key_table_rows()``, or ``key_table()`` itself where the
title or the columns depend on the params), and which of its fields the results file holds: each field
declared ``saved(...)``, in the order declared (``sections``: typed rows as their dicts, a ``Rounds`` as
its ``rounds`` and ``host_reference`` sections). The other fields are what the notebook shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ClassVar

from ..core import environment, harness, model, registry, results
from ..core.metrics import Stat
from ..core.parameters import Params
from ..core.rounds import Rounds
from ..core.rows import Record

if TYPE_CHECKING:
    import torch


def saved(key: str | None = None, write: Callable | None = None, **kwargs):
    """A ``Result`` field its results file holds: under ``key`` (default: the field's name), as
    ``write(value)`` (default: ``written``); ``kwargs`` as ``dataclasses.field`` takes them."""
    return field(metadata={"saved": key, "write": write}, **kwargs)


def written(value):
    """A field's value as a results file holds it: typed rows and statistics as their dicts (``Record.as_dict``,
    ``Stat.to_dict``), in lists and dicts too; anything else as it is."""
    if isinstance(value, Record):
        return value.as_dict()
    if isinstance(value, Stat):
        return value.to_dict()
    if isinstance(value, list):
        return [written(v) for v in value]
    if isinstance(value, dict):
        return {k: written(v) for k, v in value.items()}
    return value


@dataclass
class Study:
    """A study's result: the params it ran with and the environment it ran in, and its results file."""

    NOTEBOOK: ClassVar[str]  # one of ``results.NOTEBOOKS``
    TITLE: ClassVar[str] = ""  # the key table's title
    COLUMNS: ClassVar[list[str] | None] = None  # the key table's columns (None: every column of its rows)

    params: Params
    env: dict  # ``environment.collect``

    def key_table_rows(self) -> list[dict]:
        """The key table's rows, as the results file holds them."""
        raise NotImplementedError

    def key_table(self) -> dict:
        """The table the run index shows for the notebook (``results.key_table``)."""
        return results.key_table(self.TITLE, self.key_table_rows(), self.COLUMNS)

    def sections(self) -> dict:
        """The results file's other sections: the fields declared ``saved``, in their order, a ``Rounds``
        as its own sections (``Rounds.sections``; none where it is None)."""
        out = {}
        for f in fields(self):
            if "saved" not in f.metadata:
                continue
            value = getattr(self, f.name)
            if isinstance(value, Rounds) or value is None and "Rounds" in str(f.type):  # none: nothing was timed
                out.update(value.sections() if value else {})
            else:
                out[f.metadata["saved"] or f.name] = (f.metadata["write"] or written)(value)
        return out

    def save(self) -> Path:
        """Write the notebook's results file; its path."""
        return results.save(
            self.params.output_dir, self.NOTEBOOK, self.params, self.env, self.key_table(), **self.sections()
        )


def begin(params: Params) -> dict:
    """A study's start, before anything is built or timed: this process as ``params`` asks
    (``harness.set_up``). Returns the environment it runs in (``environment.collect``)."""
    harness.set_up(params)
    return environment.collect(params.device)


def begin_with_model(params: Params) -> tuple[dict, model.Setup, torch.Tensor]:
    """``begin``, then the model and its call (``model.build``) and eager's logits of that call, the
    reference each executor's first output is checked against. Returns (environment, setup, logits)."""
    env = begin(params)
    setup = model.build(params)
    return env, setup, model.logits_of(setup.model(**setup.kwargs)).detach().clone()


def build_selected(params: Params, setup: model.Setup, plan: harness.Plan) -> dict[str, harness.Measurement]:
    """Every executor ``params`` selects, built on the model and measured by ``plan`` right after its own
    first call (``harness.build_and_measure``), by executor name."""
    return harness.build_and_measure(
        registry.selected(params.executors), setup.model, setup.kwargs, plan, params.device
    )


def rounds_text(params: Params) -> str:
    """The blocks and rounds ``params`` asks for, as a study's opening line says them."""
    return f"warm-up {params.warmup} · {params.iters} calls per block · {2 * params.repeats} rounds"
