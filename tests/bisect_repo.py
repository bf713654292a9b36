"""A synthetic git checkout for the bisection's tests and benchmark: this suite's ``latency_lab`` package as
commit 0, then commits that each change a small module the step imports, one of which makes every step
of the worker's executors take ``cost`` longer (a busy wait of that share of the step's own host time),
and optionally one that breaks the package's import (fixed by the next commit)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "# TEST-BISECT: every step takes a known share longer (tests/bisect_repo.py)"
BEFORE = '            record = {"status": prep.status, "reason": prep.reason, "notes": prep.notes}\n'
LONGER = '''

def _longer(fn, share: float):
    """``fn`` followed by a busy wait of ``share`` of its own host time."""
    import time

    def step(**kwargs):
        t0 = time.perf_counter()
        out = fn(**kwargs)
        until = time.perf_counter() + share * (time.perf_counter() - t0)
        while time.perf_counter() < until:
            pass
        return out

    return step
'''


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    import os

    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def make(root: Path, commits: int, slow_at: int | None, cost: float = 0.2, broken_at: int | None = None) -> list[str]:
    """The checkout at ``root`` with ``commits`` commits (0 the package as it is), commit ``slow_at`` adding
    ``cost`` to every step, commit ``broken_at`` breaking the import of ``latency_lab.core.builds`` until the
    next one; returns the commits' hashes, oldest first."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    shutil.copytree(ROOT / "latency_lab", root / "latency_lab", ignore=shutil.ignore_patterns("__pycache__"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "commit 0: the suite as it is")
    marker = root / "latency_lab" / "core" / "planted.py"
    for n in range(1, commits):
        with marker.open("a") as f:
            f.write(f"# commit {n}\n")
        subject = f"commit {n}: a comment"
        if n == slow_at:
            worker = root / "latency_lab" / "studies" / "ab" / "worker.py"
            text = worker.read_text()
            assert text.count(BEFORE) == 1, "studies/ab/worker.py's Worker.build changed: update tests/bisect_repo.py"
            planted = f"            if prep.ok:  {MARK}\n                prep.fn = _longer(prep.fn, {cost})\n"
            worker.write_text(text.replace(BEFORE, planted + BEFORE) + LONGER)
            subject = f"commit {n}: every step {100 * cost:g}% longer"
        builds = root / "latency_lab" / "core" / "builds.py"
        if n == broken_at:
            builds.write_text("this line is not Python\n" + builds.read_text())
            subject = f"commit {n}: breaks the import"
        elif broken_at is not None and n == broken_at + 1:
            builds.write_text(builds.read_text().removeprefix("this line is not Python\n"))
            subject = f"commit {n}: fixes the import"
        git(root, "commit", "-q", "-am", subject)
    return git(root, "log", "--reverse", "--format=%H").splitlines()
