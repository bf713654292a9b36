"""The start page ``tasks.py lab`` opens in JupyterLab: the notebooks in order, the question each
answers (its catalog entry's), and how long each took in this machine's last usable run
(``run_folder.last_usable``, what ``outputs/latest`` points at) and in the published reference run.

    python -m latency_lab.run.start_page notebooks/START.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..core import catalog
from ..core.parameters import REPO_ROOT
from . import run_folder
from .notebook_run import NOTEBOOK_DIR, discover

OUTPUTS = REPO_ROOT / "outputs"
REFERENCE = OUTPUTS / "reference-h100"  # the published reference run (``runner.py publish``)


def seconds_per_notebook(run: Path) -> tuple[dict[str, float], str]:
    """Seconds per notebook that finished ok in a run folder, and a short label of the run (its name
    alone without a readable summary: a run still going, or one whose runner was killed)."""
    try:
        summary = json.loads((run / "summary.json").read_text())
    except (OSError, ValueError):
        return {}, run.name
    resolved = (summary.get("parameters") or {}).get("resolved") or {}
    label = f"{summary.get('run_id')}: {resolved.get('preset', '?')} preset, {summary.get('device', '?')}"
    if summary.get("interrupted"):
        label += f", interrupted ({summary['interrupted']})"
    return {n["name"]: n["seconds"] for n in summary.get("notebooks", []) if n.get("status") == "ok"}, label


def title(path: Path) -> str:
    """The notebook's first heading, or its file name."""
    try:
        first = json.loads(path.read_text())["cells"][0]
        source = "".join(first["source"]) if isinstance(first["source"], list) else first["source"]
        return source.splitlines()[0].lstrip("# ").strip() or path.stem
    except (OSError, ValueError, KeyError, IndexError):
        return path.stem


def text(notebook_dir: Path = NOTEBOOK_DIR, outputs: Path = OUTPUTS, reference: Path = REFERENCE) -> str:
    """The start page as Markdown, its links relative to ``notebook_dir``; *here* is the last usable run
    in ``outputs``, beside the reference run's times."""
    last = run_folder.last_usable(outputs)
    here, here_label = seconds_per_notebook(last) if last else ({}, "")
    ref, ref_label = seconds_per_notebook(reference) if reference.is_dir() else ({}, "not found")

    def secs(table: dict, name: str) -> str:
        return f"{table[name]:.0f} s" if name in table else "—"

    rows = [
        f"| [{title(path)}]({path.name}) | {catalog.entry(name).question} | {secs(here, name)} | {secs(ref, name)} |"
        for name, path in discover(notebook_dir).items()
    ]
    here_note = (
        f"*here*: this machine's last usable run, `outputs/latest` ({here_label})"
        if last
        else "*here*: no run on this machine yet (`python runner.py --preset tiny` takes a few minutes on a CPU)"
    )
    return "\n".join(
        [
            "# latency-lab: start here",
            "",
            "Why is one step of a 1-layer Llama 3.2 1B slower under Thunder than in eager PyTorch, and far slower than "
            "under `torch.compile`? Each notebook answers one part; open them in order, or start with the explorer. "
            "Each opens with the suite's kernel, `latency-lab (.venv)`; `python runner.py` runs them all headlessly "
            "with the package's defaults (an edited parameters cell does not change a batch run).",
            "",
            "| notebook | answers | here | reference |",
            "|---|---|---|---|",
            *rows,
            "",
            f"{here_note}; *reference*: `outputs/{reference.name}` ({ref_label}). Most of a notebook's time is "
            "first calls (tracing and compiling).",
            "",
            "More: [README](../README.md) · runs: `outputs/` (each with an `index.html`).",
            "",
        ]
    )


def write(path: Path) -> Path:
    path = Path(path)
    path.write_text(text(path.parent), encoding="utf-8")
    return path


if __name__ == "__main__":
    print(write(Path(sys.argv[1])))
