"""Results files: each notebook writes ``<output_dir>/<notebook>.results.json`` itself; the runner
builds the run's summary from these files, never from cell outputs."""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from . import catalog, metrics, phases
from .catalog import AB_BUILDS as AB_BUILDS  # the suite's notebooks: their names, as the catalog declares them
from .catalog import EXECUTOR_TIMING as EXECUTOR_TIMING
from .catalog import EXPLORER as EXPLORER
from .catalog import HOST_OVERHEAD as HOST_OVERHEAD
from .catalog import LEVERS as LEVERS
from .catalog import MODEL_SETUP as MODEL_SETUP
from .catalog import OP_MICROBENCHMARKS as OP_MICROBENCHMARKS
from .catalog import SCALING as SCALING
from .catalog import TRACE_COUNTERS as TRACE_COUNTERS
from .input_errors import clip
from .metrics import SCHEMA_VERSION

SUFFIX = ".results.json"
PHASES_SUFFIX = ".phases.json"  # beside a results file: its process's seconds per phase (core.phases)
REQUIRED = ("notebook", "created", "params", "environment", "key_table")
NOTEBOOKS = catalog.NAMES  # the suite's notebooks, in order

INTERACTIVE = "interactive"  # the folder under outputs/ a notebook run by hand writes into: scratch, never a run
RUN_DIR = "LATENCY_LAB_RUN_DIR"  # set by runner.py for its notebooks' kernels: the run's folder


def in_run(output_dir: str | Path) -> bool:
    """Whether ``output_dir`` is the folder of the runner run this process belongs to."""
    marked = os.environ.get(RUN_DIR)
    return bool(marked) and Path(marked).resolve() == Path(output_dir).resolve()


def path_for(output_dir: str | Path, notebook: str) -> Path:
    return Path(output_dir) / f"{notebook}{SUFFIX}"


def _clean(value):
    """JSON-safe copy: NaN/inf become None, tuples lists, a typed row its dict, unknown objects their str()."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def key_table(title: str, rows: list[dict], columns: list[str] | None = None) -> dict:
    """The table the run index shows for a notebook: a title, column names and row values, and per
    column that has them the rows' intervals (``[lo, hi]`` each, for ``compare``; not shown)."""
    columns = columns or list(dict.fromkeys(k for row in rows for k in row))
    table = {"title": title, "columns": columns, "rows": [[row.get(c) for c in columns] for row in rows]}
    intervals = {
        c: [[row.get(lo), row.get(hi)] for row in rows]
        for c in columns
        if (names := metrics.interval_names(c)) and any(row.get(names[0]) is not None for row in rows)
        for lo, hi in [names]
    }
    return {**table, "intervals": intervals} if intervals else table


def failed_rows(table: dict) -> list[str]:
    """Executors whose row in a key table is neither ok nor unavailable (failed, partial, ...): the
    executor, what it was compared as where the table says (08's ``B vs A``), the status and the
    reason's start."""
    cols = table.get("columns") or []
    if "status" not in cols:
        return []

    def said(row) -> str:
        r = dict(zip(cols, row))
        what = " ".join(str(r[c]) for c in ("executor", "comparison") if r.get(c)) or str(row[0])
        why = f": {clip(str(r['reason']), 100)}" if r.get("reason") else ""
        return f"{what} ({r['status']}{why})"

    return list(
        dict.fromkeys(said(row) for row in table["rows"] if dict(zip(cols, row))["status"] not in ("ok", "unavailable"))
    )


def save(output_dir: str | Path, notebook: str, params, environment: dict, table: dict, **sections) -> Path:
    """Write the notebook's results atomically and return the file's path."""
    path = path_for(output_dir, notebook)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "schema": SCHEMA_VERSION,
        "notebook": notebook,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "params": params.to_dict(),
        "environment": environment,
        "key_table": table,
        **sections,
    }
    with phases.phase("write"):
        written = write_atomic(path, json.dumps(_clean(payload), indent=1))
    write_atomic(path.with_name(f"{notebook}{PHASES_SUFFIX}"), json.dumps(phases.totals()))
    return written


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all: into a temporary file of this process's own
    beside it, renamed over ``path`` once complete; on any failure (a full disk) the temporary file
    is removed, ``path`` keeps what it held before, and the error is raised."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _is_table(table) -> bool:
    """Whether ``table`` is shaped as ``key_table`` makes them."""
    columns = table.get("columns") if isinstance(table, dict) else None
    if not isinstance(columns, list) or not isinstance(table.get("rows"), list):
        return False
    return all(isinstance(c, str) for c in columns) and all(
        isinstance(r, list) and len(r) == len(columns) for r in table["rows"]
    )


def load(path: str | Path) -> dict:
    """Read a results file and check its shape: an object with the fields every notebook writes,
    ``params`` and ``environment`` objects and a key table of columns and rows; ValueError (naming
    the file and what is wrong) otherwise, for a truncated or hand-edited file too."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError, nesting too deep
        raise ValueError(f"{path.name}: not a readable JSON file (truncated?): {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path.name}: a results file is a JSON object, this holds a {type(data).__name__}")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise ValueError(f"{path.name}: results file lacks {', '.join(missing)}")
    wrong = [k for k in ("params", "environment") if not isinstance(data[k], dict)]
    if not _is_table(data["key_table"]):
        wrong.append("key_table (an object of column names and rows, each a list of as many values)")
    if wrong:
        raise ValueError(f"{path.name}: results file has the wrong shape: {', '.join(wrong)}")
    return data


def of_this_run(output_dir: str | Path, notebook: str) -> dict | None:
    """The results of ``notebook`` written earlier in the runner run this kernel belongs to, or None:
    outside a runner run (JupyterLab, papermill alone), before that notebook ran, or unreadable. A
    results file left in a folder by other code is never read."""
    if not in_run(output_dir):
        return None
    try:
        return load(path_for(output_dir, notebook))
    except (OSError, ValueError):
        return None
