"""Progress lines: what a notebook says while a long step runs (a build, the timing rounds). Each is
printed into the notebook and, under ``runner.py``, appended to the file ``FILE`` names, which the
runner forwards to its own output as the lines come (``notebook_run.forwarded_progress``). In a
kernel, the end of a cell that said something is appended too (``CELL_END``): the runner's current
step is the last line said in the cell running now, none once that cell ended."""

from __future__ import annotations

import os
import sys

FILE = "LATENCY_LAB_PROGRESS"  # set by runner.py for a notebook's kernel: the file its progress lines go to
CELL_END = "\x1e"  # the line appended when a cell that said something ends: its step is over

_said_in_cell = False  # whether the cell running now said something (under IPython)
_watched = None  # the IPython shell whose cells' ends are watched


def say(text: str) -> None:
    """Print ``text`` (flushed) and, under the runner, append it as one line to its progress file."""
    global _said_in_cell
    print(text, flush=True)
    if _append(" ".join(str(text).splitlines())):
        _said_in_cell = True
        _watch_cells()


def _append(line: str) -> bool:
    """``line`` appended to the runner's progress file; False where there is none."""
    path = os.environ.get(FILE)
    if not path:
        return False
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    except OSError:  # the runner's file gone (it was interrupted): the notebook's output has the line
        pass
    return True


def _cell_ended(result=None) -> None:
    """IPython's ``post_run_cell`` event: ``CELL_END`` after a cell that said something."""
    global _said_in_cell
    if _said_in_cell:
        _said_in_cell = False
        _append(CELL_END)


def _watch_cells() -> None:
    """Under IPython (a notebook's kernel), once: ``CELL_END`` after each cell that said something."""
    global _watched
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython else None
    if shell is not None and shell is not _watched:
        shell.events.register("post_run_cell", _cell_ended)
        _watched = shell
