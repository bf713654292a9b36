"""A bisection's steps kept in the cache as each ends, so that the same command run again resumes."""

from __future__ import annotations

import hashlib
import json

from ..core import builds, results
from ..core.parameters import Params
from .bisect_builds import Candidate, cache_dir


class State:
    """The steps and counts of one bisection (its range, parameters, interpreter and good build's versions), kept in the
    cache as each ends."""

    def __init__(self, identity: dict, p: Params):
        given = {k: v for k, v in p.to_dict().items() if k not in ("output_dir", "build_a", "build_b")}
        here = builds.probe(builds.parse("build_a", p.build_a))  # the interpreter and the versions it runs with
        stack = {"python": here["executable"], "packages": {k: v.get("version") for k, v in here["packages"].items()}}
        text = json.dumps({"range": identity, "params": given, "stack": stack}, sort_keys=True, default=str)
        self.path = cache_dir() / "bisect" / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
        self.steps: dict = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def get(self, key: str) -> dict | None:
        """The step kept under ``key``, or None."""
        return self.steps.get(key)

    def put(self, key: str, step: dict) -> None:
        """``step`` kept under ``key``, the file rewritten whole."""
        self.steps[key] = step
        self.path.parent.mkdir(parents=True, exist_ok=True)
        results.write_atomic(self.path, json.dumps(self.steps, indent=1))

    @staticmethod
    def key(good: Candidate, bad: Candidate, mid: Candidate | None, attempt: int) -> str:
        """A step's key: its bracket, its midpoint (``-``: none: the ends, or the culprit and its parent) and its
        attempt."""
        return f"{good.ref}..{bad.ref}@{mid.ref if mid else '-'}#{attempt}"
