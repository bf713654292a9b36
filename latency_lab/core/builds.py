"""Builds of the stack that notebook 08 times against each other: a build is this environment, another
Python interpreter (a virtual environment of its own), folders put first on the module path (a
source tree such as a git worktree of lightning-thunder, or a folder of installed wheels),
environment variables for its process, or any of these together.

A build is given as a dict ``{"python": PATH, "path": [FOLDER, ...], "env": {NAME: VALUE}}`` (every
key optional; ``{}`` is this environment). ``parse`` checks it without starting anything; ``probe``
starts the build's interpreter once and reads the versions it would run with, so that an
interpreter without torch is refused before any work.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .input_errors import ParameterError, short

KEYS = ("python", "path", "env")
ALLOWED = (
    "a dict with any of python (an interpreter path), path (a list of existing folders, put first on the module "
    "path), env ({NAME: VALUE}); {} is this environment"
)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# the packages whose versions a build reports and the page compares (import name, distribution name)
PACKAGES = (
    ("torch", "torch"),
    ("thunder", "lightning-thunder"),
    ("nvfuser_direct", "nvfuser"),
    ("transformers", "transformers"),
)
PROBE_TIMEOUT_S = 60  # an interpreter that imports torch answers in seconds
REPO_ROOT = Path(__file__).resolve().parents[2]  # put after a build's own folders, so its workers import this suite


@dataclass(frozen=True)
class Build:
    """One build: its interpreter (empty: this one), folders first on its module path, variables."""

    python: str = ""
    path: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=())

    @property
    def interpreter(self) -> str:
        return self.python or sys.executable

    @property
    def here(self) -> bool:
        """Whether this build is this environment, unchanged."""
        return not (self.python or self.path or self.env)

    def to_dict(self) -> dict:
        return {"python": self.python, "path": list(self.path), "env": dict(self.env)}

    def text(self) -> str:
        """One line: what this build is."""
        parts = [f"python {self.python}" if self.python else "this Python"]
        parts += [f"{p} first on the module path" for p in self.path]
        parts += [f"{k}={v}" for k, v in self.env]
        return ", ".join(parts)


def parse(name: str, value) -> Build:
    """A build from its parameter value (module docstring); ``ParameterError`` naming ``name`` for a
    value that is not one, an interpreter that is not an executable file, or a folder that is not one."""
    if value is None or value == {}:
        return Build()
    if not isinstance(value, dict) or set(value) - set(KEYS):
        raise ParameterError(name, value, ALLOWED)
    python = value.get("python") or ""
    if not isinstance(python, str):
        raise ParameterError(name, value, ALLOWED)
    who = called(name)
    if python:
        exe = Path(python).expanduser()
        if not exe.is_file() or not os.access(exe, os.X_OK):
            why = "does not exist" if not exe.exists() else "is not an executable file"
            raise ParameterError(name, value, "python: the path of an executable interpreter", f"{who}: {python} {why}")
        python = str(exe.absolute())
    path = value.get("path") or []
    if isinstance(path, str):
        path = [path]
    if not isinstance(path, (list, tuple)) or not all(isinstance(p, str) and p for p in path):
        raise ParameterError(name, value, ALLOWED)
    folders = []
    for p in path:
        folder = Path(p).expanduser()
        if not folder.is_dir():
            why = "does not exist" if not folder.exists() else "is not a folder"
            raise ParameterError(name, value, "path: existing folders", f"{who}: {p} {why}")
        folders.append(str(folder.resolve()))
    env = value.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ParameterError(name, value, ALLOWED)
    bad = [k for k in env if not ENV_NAME.match(k)]
    if bad:
        raise ParameterError(name, value, f"{ALLOWED}; {short(bad[0])} is not a variable name")
    return Build(python, tuple(folders), tuple(sorted(env.items())))


def versions() -> dict:
    """This process's python and the versions of ``PACKAGES`` it imports (version and the file each
    came from, or the import's error)."""
    import importlib
    import importlib.metadata

    out = {"python": sys.version.split()[0], "executable": sys.executable, "packages": {}}
    for module, dist in PACKAGES:
        try:
            m = importlib.import_module(module)
            version = getattr(m, "__version__", None) or importlib.metadata.version(dist)
            out["packages"][dist] = {"version": str(version), "file": getattr(m, "__file__", None)}
        except Exception as e:  # a missing or broken package is a finding about the build
            out["packages"][dist] = {"version": None, "error": f"{type(e).__name__}: {e}"[:300]}
    out["seed_call"] = takes_seed_call()
    return out


def takes_seed_call() -> bool | None:
    """Whether this process's transformers takes the seed's call: ``LlamaForCausalLM.forward`` swallows its
    ``cache_positions`` (4.46+ through ``**kwargs``; 4.45 refuses it with a TypeError at the first call).
    None where transformers does not import."""
    import inspect

    try:
        from transformers.models.llama import LlamaForCausalLM
    except Exception:  # a build without transformers: its rows say so
        return None
    params = inspect.signature(LlamaForCausalLM.forward).parameters.values()
    return any(p.kind is p.VAR_KEYWORD or p.name == "cache_positions" for p in params)


# Run by the build's interpreter: its variables and folders first, then this suite after them.
PROBE = """
import json, os, sys
paths, env = json.loads(sys.argv[1]), json.loads(sys.argv[2])
os.environ.update(env)
sys.path[:0] = paths
from latency_lab.core.builds import versions
print("LATENCY-LAB-PROBE " + json.dumps(versions()))
"""


@functools.cache
def probe(build: Build) -> dict:
    """The versions ``build`` runs with (python, and torch, thunder, nvFuser, transformers: version and
    the file each was imported from, or the import's error), read by starting its interpreter once
    with its path and variables (once per process and build). Raises ``RuntimeError`` when the
    interpreter does not answer."""
    paths = [*build.path, str(REPO_ROOT)]
    args = [build.interpreter, "-c", PROBE, json.dumps(paths), json.dumps(dict(build.env))]
    try:  # its own session: on a timeout the whole process group goes, not only the interpreter's first process
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    except OSError as e:
        raise RuntimeError(f"{build.interpreter} did not start: {e.strerror or e}") from None
    try:
        out, err = proc.communicate(timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise RuntimeError(
            f"{build.interpreter} did not answer in {PROBE_TIMEOUT_S} s (it should import torch)"
        ) from None
    done = subprocess.CompletedProcess(args, proc.returncode, out, err)
    line = next((x for x in done.stdout.splitlines() if x.startswith("LATENCY-LAB-PROBE ")), None)
    if line is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{build.interpreter} exited {done.returncode}: {tail[0][:300]}")
    return json.loads(line.removeprefix("LATENCY-LAB-PROBE "))


def called(name: str) -> str:
    """A build parameter's name as the user reads it: ``build_b`` -> ``build B``."""
    return f"build {name.removeprefix('build_').upper()}"


def check(name: str, build: Build) -> dict:
    """``probe`` as a parameter check: the versions, or ``ParameterError`` naming ``name`` when the
    interpreter does not start or cannot import torch (nothing could be timed in it). A build
    without thunder is allowed: its Thunder rows say so."""
    try:
        found = probe(build)
    except RuntimeError as e:
        raise ParameterError(name, build.to_dict(), f"{ALLOWED}; {e}") from None
    torch = found["packages"].get("torch") or {}
    if torch.get("version") is None:
        why = f"{called(name)}: {build.text()} cannot import torch: {torch.get('error')}"
        raise ParameterError(name, build.to_dict(), "a build whose interpreter imports torch", why)
    return found


def git_state(folder: str) -> dict | None:
    """A folder's git commit and whether its work tree has changes, or None where the folder is not the
    top of a git work tree (a folder of wheels inside another repository has no commit of its own)."""

    def git(*args) -> str | None:
        try:
            done = subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != Path(folder).resolve():  # a folder inside another repository's tree
        return None
    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status), "branch": git("rev-parse", "--abbrev-ref", "HEAD")}


def differences(a: dict, b: dict) -> list[str]:
    """What differs between two builds' probes (``probe``): python, each package's version and the
    folder it came from, as sentences; empty when the two run the same stack."""
    out = []
    if a.get("python") != b.get("python") or a.get("executable") != b.get("executable"):
        out.append(f"python: A {a.get('python')} ({a.get('executable')}), B {b.get('python')} ({b.get('executable')})")
    for _, dist in PACKAGES:
        pa, pb = a["packages"].get(dist) or {}, b["packages"].get(dist) or {}
        va, vb = pa.get("version") or "missing", pb.get("version") or "missing"
        if va != vb:
            out.append(f"{dist}: A {va}, B {vb}")
        elif pa.get("file") != pb.get("file"):
            out.append(f"{dist}: {va} in both, B's from {_folder(pb.get('file'))} (A's {_folder(pa.get('file'))})")
    return out


def _folder(file: str | None) -> str:
    """The folder a package was imported from (its ``__init__.py``'s grandparent)."""
    return str(Path(file).parent.parent) if file else "?"


# Run by a build's interpreter: where it imports each top-level name from (a package's folder or a module's file)
WHERE = """
import importlib.util, json, sys
sys.path[:0] = json.loads(sys.argv[1])
out = {}
for name in json.loads(sys.argv[2]):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        spec = None
    if spec and spec.origin and spec.origin not in ("built-in", "frozen"):
        out[name] = spec.submodule_search_locations[0] if spec.submodule_search_locations else spec.origin
print("LATENCY-LAB-WHERE " + json.dumps(out))
"""
COPY_IGNORED = shutil.ignore_patterns(".git", "__pycache__", "*.pyc")


def top_level_names(folders) -> list[str]:
    """The top-level packages and modules in ``folders`` (what they shadow when put first on the path)."""
    names = set()
    for folder in folders:
        for entry in Path(folder).iterdir():
            if entry.is_dir() and (entry / "__init__.py").is_file():
                names.add(entry.name)
            elif entry.suffix == ".py":
                names.add(entry.stem)
    return sorted(names)


def second_instance(a: Build, others: list[Build], folder: Path) -> Build:
    """A second instance of build ``a`` in ``folder``, for the A/A control: a copy of each of ``a``'s own
    folders, and of each package ``a`` imports from elsewhere that the ``others``' folders shadow (B's worktree
    of thunder: a copy of A's thunder), first on its path. The same code from other folders, so that what two
    instances of one build differ by (paths, file layout) falls inside the A/A control. ``a`` itself where
    there is nothing to copy."""
    copies = []
    for i, source in enumerate(a.path):
        copies.append(shutil.copytree(source, folder / f"{i}" / Path(source).name, ignore=COPY_IGNORED, symlinks=True))
    names = top_level_names([f for b in others for f in b.path])
    if names:
        args = [a.interpreter, "-c", WHERE, json.dumps(list(a.path)), json.dumps(names)]
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env={**os.environ, **dict(a.env)}
        )
        line = next((x for x in done.stdout.splitlines() if x.startswith("LATENCY-LAB-WHERE ")), "LATENCY-LAB-WHERE {}")
        found = json.loads(line.removeprefix("LATENCY-LAB-WHERE "))
        shadowed = folder / "shadowed"
        for name, where in found.items():
            if any(Path(where).is_relative_to(f) for f in a.path):
                continue  # a copy of its folder is made above
            shadowed.mkdir(parents=True, exist_ok=True)
            if Path(where).is_dir():
                shutil.copytree(where, shadowed / name, ignore=COPY_IGNORED, symlinks=True)
            else:
                shutil.copy2(where, shadowed / Path(where).name)
        if shadowed.is_dir():
            copies.insert(0, shadowed)
    if not copies:
        return a
    return Build(a.python, tuple(str(c) for c in copies), a.env)
