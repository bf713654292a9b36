#!/usr/bin/env python3
"""Git clean filter for the notebooks: what git stores has no outputs, execution counts, execution
metadata or widget state, so a notebook run in JupyterLab (autosave included) commits as its cells
only. Reads a notebook on stdin, writes it on stdout; keeps key order and nbformat's one-space indent,
so a clean notebook passes through unchanged. Standard library only (git runs it with any Python).
``pre_save`` is the project's Jupyter pre-save hook (``.jupyter/jupyter_server_config.py``).

    git config filter.notebook-outputs.clean "python3 tools/strip_notebook_outputs.py"   # tasks.py does this
"""

from __future__ import annotations

import json
import sys

CELL_METADATA = ("execution", "ExecuteTime", "papermill", "collapsed", "scrolled")
NOTEBOOK_METADATA = ("widgets", "papermill", "signature")


def strip(text: str) -> str:
    """``text`` (a notebook's JSON) without outputs, counts and run metadata; text that is not a
    notebook comes back as it was."""
    try:
        nb = json.loads(text)
        cells = nb["cells"]
    except (ValueError, KeyError, TypeError):
        return text
    for cell in cells:
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        for key in CELL_METADATA:
            cell.get("metadata", {}).pop(key, None)
    metadata = nb.get("metadata", {})
    for key in NOTEBOOK_METADATA:
        metadata.pop(key, None)
    plain_language_info(metadata)
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def plain_language_info(metadata: dict) -> None:
    """The kernel's ``language_info`` reduced to the language's name (its Python version varies by machine)."""
    if "name" in metadata.get("language_info", {}):
        metadata["language_info"] = {"name": metadata["language_info"]["name"]}


def pre_save(model: dict, **_) -> None:
    """Jupyter's pre-save hook: a notebook is saved with the ``language_info`` git stores. JupyterLab
    sets the kernel's on opening a notebook, then autosaves it; so an unchanged notebook is saved
    byte for byte as committed, and git sees no change."""
    if model.get("type") == "notebook":
        plain_language_info(model["content"].get("metadata", {}))


if __name__ == "__main__":
    sys.stdout.buffer.write(strip(sys.stdin.buffer.read().decode("utf-8")).encode("utf-8"))
