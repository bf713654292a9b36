"""The builds a bisection walks (``runner.py bisect``): the commits of a git checkout from good to bad, each a
``git worktree`` put first on the module path, or a package's releases from good to bad, each its wheel
installed into a folder of its own (with what it needs that this environment lacks) put first on the module
path. Wheels and release folders are kept in the cache (``cache_dir``); worktrees are made when a step needs
them, reused by later steps and removed at the end (``Candidates.close``).
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..core import builds
from ..core.input_errors import short
from .run_folder import SetupError

PIP_TIMEOUT_S = 600
MAX_DEPTH = 5  # levels of requirements installed beside a release


def cache_dir() -> Path:
    """``$LATENCY_LAB_CACHE``, else ``$XDG_CACHE_HOME/latency-lab``, else ``~/.cache/latency-lab``."""
    given = os.environ.get("LATENCY_LAB_CACHE")
    if given:
        return Path(given).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "latency-lab"


@dataclass(frozen=True)
class Candidate:
    """One build of the range: ``name`` (a short commit or a version) and ``title`` (its subject line)."""

    name: str
    title: str
    ref: str  # the full commit, or the version


def git(repo: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {(done.stderr or done.stdout).strip()[:300]}")
    return done.stdout.strip() if done.returncode == 0 else ""


class Commits:
    """The commits from ``good`` to ``bad`` of the checkout ``repo`` along bad's first parents (good first)."""

    kind = "commit"

    def __init__(self, repo: str, good: str, bad: str):
        top = Path(repo).expanduser()
        if not top.is_dir() or not git(top, "rev-parse", "--show-toplevel", check=False):
            raise SetupError(f"invalid --repo {short(repo)}: not a git checkout")
        self.repo = Path(git(top, "rev-parse", "--show-toplevel")).resolve()
        ends = {}
        for flag, rev in (("good", good), ("bad", bad)):
            sha = git(self.repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
            if not sha:
                raise SetupError(f"invalid --{flag} {short(rev)}: not a commit of {self.repo}")
            ends[flag] = sha
        if ends["good"] == ends["bad"]:
            raise SetupError(f"invalid --bad {short(bad)}: the same commit as --good ({ends['good'][:12]})")
        ancestor = subprocess.run(
            ["git", "-C", str(self.repo), "merge-base", "--is-ancestor", ends["good"], ends["bad"]], capture_output=True
        )
        if ancestor.returncode != 0:
            raise SetupError(f"invalid --good {short(good)}: not an ancestor of --bad {short(bad)}")
        log = git(self.repo, "log", "--reverse", "--first-parent", "--format=%H %s", f"{ends['good']}..{ends['bad']}")
        if git(self.repo, "rev-parse", f"{log.split()[0]}^1") != ends["good"]:
            raise SetupError(f"invalid --good {short(good)}: not on --bad {short(bad)}'s first-parent line")
        first = git(self.repo, "log", "-1", "--format=%H %s", ends["good"])
        self.items = [
            Candidate(sha[:12], subject, sha)
            for sha, _, subject in (x.partition(" ") for x in [first, *log.splitlines()])
        ]
        key = hashlib.sha256(str(self.repo).encode()).hexdigest()[:12]
        self.trees = cache_dir() / "worktrees" / key
        self.made: list[Path] = []

    def identity(self) -> dict:
        return {"repo": str(self.repo), "commits": [c.ref for c in self.items]}

    def build(self, c: Candidate) -> dict:
        """``c``'s worktree (made, or reused from an earlier step) first on the module path."""
        tree = self.trees / c.ref
        if not (tree.is_dir() and git(tree, "rev-parse", "HEAD", check=False) == c.ref):
            shutil.rmtree(tree, ignore_errors=True)
            git(self.repo, "worktree", "prune")
            tree.parent.mkdir(parents=True, exist_ok=True)
            git(self.repo, "worktree", "add", "--detach", "--force", str(tree), c.ref)
        if tree not in self.made:
            self.made.append(tree)
        return {"path": [str(tree)]}

    def close(self) -> None:
        """Every worktree this bisection made removed, and git's record of them pruned."""
        for tree in self.made:
            git(self.repo, "worktree", "remove", "--force", str(tree), check=False)
            shutil.rmtree(tree, ignore_errors=True)
        git(self.repo, "worktree", "prune", check=False)
        self.made = []


def pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=PIP_TIMEOUT_S,
    )


def last_line(done: subprocess.CompletedProcess) -> str:
    lines = [x for x in (done.stderr or done.stdout).strip().splitlines() if x.strip()]
    return lines[-1][:300] if lines else f"exit {done.returncode}"


def release_key(version: str):
    from packaging.version import Version

    return Version(version)


def nearest(available: list[str], version: str, n: int = 2) -> list[str]:
    """Up to ``n`` releases of ``available`` (sorted, oldest first) on each side of ``version``, which it lacks."""
    below = [v for v in available if release_key(v) < release_key(version)]
    return below[-n:] + available[len(below) : len(below) + n]


class Releases:
    """The releases of ``package`` on the package index from ``good`` to ``bad`` (pip's own index and
    configuration; pre-releases left out), oldest first."""

    kind = "release"

    def __init__(self, package: str, good: str, bad: str):
        from packaging.version import InvalidVersion

        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", package):
            raise SetupError(f"invalid --package {short(package)}: allowed a distribution name, e.g. transformers")
        self.package = package
        done = pip("index", "versions", package)
        found = re.search(r"Available versions: (.*)", done.stdout or "")
        if done.returncode != 0 or not found:
            raise SetupError(f"invalid --package {package}: the package index gave no releases ({last_line(done)})")
        available = sorted({v.strip() for v in found.group(1).split(",") if v.strip()}, key=release_key)
        for flag, version in (("good", good), ("bad", bad)):
            try:
                release_key(version)
            except InvalidVersion:
                raise SetupError(f"invalid --{flag} {short(version)}: allowed a version, e.g. 4.46.3") from None
            if version not in available:
                near = ", ".join(nearest(available, version))
                raise SetupError(f"invalid --{flag} {short(version)}: {package} has no such release (nearest: {near})")
        if release_key(good) >= release_key(bad):
            raise SetupError(f"invalid --bad {bad}: allowed a release after --good {good}")
        lo, hi = release_key(good), release_key(bad)
        self.items = [Candidate(v, f"{package} {v}", v) for v in available if lo <= release_key(v) <= hi]
        self.folders = cache_dir() / "releases"
        self.wheels = cache_dir() / "wheels"

    def identity(self) -> dict:
        return {"package": self.package, "releases": [c.ref for c in self.items]}

    def build(self, c: Candidate) -> dict:
        """``c``'s folder (made once and kept in the cache) first on the module path; ``RuntimeError``
        saying why where pip cannot make it."""
        folder = (
            self.folders / f"{self.package}-{c.ref}-py{sys.version_info[0]}{sys.version_info[1]}-{platform.machine()}"
        )
        if not (folder / ".complete").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            self.install(f"{self.package}=={c.ref}", folder)
            for _ in range(MAX_DEPTH):  # the requirements' own requirements, level by level
                needs = unmet(folder)
                if not needs:
                    break
                for need in needs:
                    self.install(need, folder)
            (folder / ".complete").write_text("")
        return {"path": [str(folder)]}

    def install(self, spec: str, folder: Path) -> None:
        """The wheel of ``spec`` (downloaded once into the cache) installed into ``folder``, without its
        dependencies."""
        self.wheels.mkdir(parents=True, exist_ok=True)
        got = pip("download", "--no-deps", "--only-binary=:all:", "--dest", str(self.wheels), spec)
        if got.returncode != 0:
            raise RuntimeError(f"pip download {spec}: {last_line(got)}")
        wheel = re.findall(r"(?:Saved|File was already downloaded) (\S+\.whl)", got.stdout)
        if not wheel:
            raise RuntimeError(f"pip download {spec}: no wheel named in its output")
        done = pip("install", "--no-index", "--no-deps", "--target", str(folder), wheel[-1])
        if done.returncode != 0:
            raise RuntimeError(f"pip install {Path(wheel[-1]).name}: {last_line(done)}")

    def close(self) -> None:
        """Release folders stay in the cache for the next bisection."""


def unmet(folder: Path) -> list[str]:
    """The requirements of the distributions installed in ``folder`` that neither ``folder`` nor this
    environment meets (their extras and other platforms' left out), as pip specifiers."""
    from packaging.requirements import Requirement

    inside = {d.metadata["Name"].lower().replace("_", "-") for d in metadata.distributions(path=[str(folder)])}
    out = []
    for d in metadata.distributions(path=[str(folder)]):
        for text in d.requires or []:
            req = Requirement(text)
            name = req.name.lower().replace("_", "-")
            if name in inside or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
                continue
            try:
                have = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                have = None
            if have is None or not req.specifier.contains(have, prereleases=True):
                out.append(f"{req.name}{req.specifier}")
    return out


def why_not(build: dict, cache_mode: str, need: tuple[str, ...] = ("torch", "transformers")) -> str | None:
    """Why a build cannot run the step (its interpreter does not answer, a package of ``need`` does not
    import, its transformers refuses the seed's call), or None."""
    try:
        found = builds.probe(builds.parse("build", build))
    except RuntimeError as e:
        return str(e)
    for dist in need:
        got = found["packages"].get(dist) or {}
        if got.get("version") is None:
            return f"{dist} does not import: {got.get('error')}"
    if cache_mode == "seed" and found.get("seed_call") is False:
        version = found["packages"]["transformers"]["version"]
        return f"its transformers {version} refuses the seed's call (cache_positions); -p cache_mode=none runs it"
    return None


def imported(build: dict) -> tuple[str, ...]:
    """The packages of ``builds.PACKAGES`` that ``build`` imports (what every build of its range must import)."""
    found = builds.probe(builds.parse("build", build))["packages"]
    return tuple(dist for _, dist in builds.PACKAGES if (found.get(dist) or {}).get("version"))
