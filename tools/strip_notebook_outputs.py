#!/usr/bin/env python3
"""Git clean filter for the notebooks: what git stores has no outputs, execution counts, execution
metadata or widget state, so a notebook run in JupyterLab (autosave included) commits as its cells
only. Reads a notebook on stdin, writes it on stdout; keeps key order and nbformat's one-space indent,
so a clean notebook passes through unchanged. Standard library only (git runs it with any Python).

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
    if "name" in metadata.get("language_info", {}):
        metadata["language_info"] = {"name": metadata["language_info"]["name"]}
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    sys.stdout.buffer.write(strip(sys.stdin.buffer.read().decode("utf-8")).encode("utf-8"))
