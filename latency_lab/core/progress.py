"""Progress lines: what a notebook says while a long step runs (a build, the timing rounds). Each is
printed into the notebook and, under ``runner.py``, appended to the file ``FILE`` names, which the
runner forwards to its own output as the lines come (``notebook_run.forwarded_progress``)."""

from __future__ import annotations

import os

FILE = "LATENCY_LAB_PROGRESS"  # set by runner.py for a notebook's kernel: the file its progress lines go to


def say(text: str) -> None:
    """Print ``text`` (flushed) and, under the runner, append it as one line to its progress file."""
    print(text, flush=True)
    path = os.environ.get(FILE)
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(" ".join(str(text).splitlines()) + "\n")
    except OSError:  # the runner's file gone (it was interrupted): the notebook's output has the line
        pass
