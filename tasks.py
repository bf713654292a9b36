#!/usr/bin/env python3
"""Set up ``.venv`` (once, and again when pyproject.toml changes), then run a task in it.

    python3 tasks.py run [runner.py args]     # the whole investigation: python runner.py
    python3 tasks.py test [pytest args]       # the test suite
    python3 tasks.py lab                      # JupyterLab on the project, opened at a start page
    python3 tasks.py install                  # only the setup

Needs nothing but Python 3.11+. nvFuser is added where ``nvidia-smi`` sees a GPU on Linux x86-64. In a
git checkout every task also installs the clean filter that keeps notebook outputs out of commits.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
STAMP = VENV / ".installed"
KERNEL = "latency-lab"
FILTER = "notebook-outputs"  # .gitattributes applies it to notebooks/*.ipynb
START_PAGE = "notebooks/START.md"  # written by ``tasks.py lab`` (latency_lab.start_page); not tracked
LAB_CONFIG = ROOT / ".jupyter"  # labconfig: Markdown opens rendered (the start page, the README)
SUITE_MODULES = ("torch", "papermill", "nbconvert", "plotly")  # what runner.py cannot start without


def has_gpu() -> bool:
    if platform.system() != "Linux" or platform.machine() != "x86_64" or not shutil.which("nvidia-smi"):
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def install() -> None:
    gpu = has_gpu()
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + str(gpu).encode()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == want:
        return
    print(f"tasks.py: setting up {VENV} (GPU extras: {gpu}) ...", flush=True)
    if not PY.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(PY), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "-e", f"{ROOT}[test{',gpu' if gpu else ''}]"], check=True)
    subprocess.run([str(PY), "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL,
                    "--display-name", "latency-lab (.venv)"], check=True, stdout=subprocess.DEVNULL)
    STAMP.write_text(want)


def lab_args(folder: Path = ROOT, start: str | None = START_PAGE) -> list[str]:
    """``python`` arguments of JupyterLab on ``folder``, its front page ``start`` (a path under it);
    root, as in CI and containers, must say so."""
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    return ["-m", "jupyterlab", f"--ServerApp.root_dir={folder}",
            *([f"--LabApp.default_url=/lab/tree/{start}"] if start else []), *(["--allow-root"] if root else [])]


def lab_environment(env: dict | None = None) -> dict:
    """``env`` (default: this process's) with the project's Jupyter config dir first on the path."""
    env = dict(os.environ if env is None else env)
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(filter(None, [str(LAB_CONFIG), env.get("JUPYTER_CONFIG_PATH")]))
    return env


def install_git_filter(root: Path = ROOT) -> bool:
    """Set git's clean filter for notebooks in ``root``'s repository: what git stores has no outputs
    (``tools/strip_notebook_outputs.py``). False where ``root`` is not a git checkout or its config
    cannot be written (the tests then still fail on a notebook committed with outputs)."""
    if not shutil.which("git") or subprocess.run(["git", "-C", str(root), "rev-parse"], capture_output=True).returncode:
        return False
    python = getattr(sys, "_base_executable", None) or sys.executable  # outlives a rebuilt .venv
    command = f"{shlex.quote(python)} tools/strip_notebook_outputs.py"  # git runs it in the work tree's root
    config = ["git", "-C", str(root), "config", f"filter.{FILTER}.clean", command]
    return subprocess.run(config, capture_output=True).returncode == 0


def use_suite_python(script: str, argv: list[str]) -> None:
    """Called first by ``runner.py``: a Python that lacks the suite's packages re-runs ``script``
    with ``.venv``'s Python (set up first, as ``install`` does), or exits with one line saying what
    to run. A Python that has them (the ``.venv`` or any environment with the package) goes on."""
    missing = [m for m in SUITE_MODULES if importlib.util.find_spec(m) is None]
    if not missing:
        return
    name = Path(script).name
    if Path(sys.prefix).resolve() == VENV.resolve():
        sys.exit(f"{name}: error: {VENV} lacks {', '.join(missing)}; run: python3 tasks.py install")
    if sys.version_info < (3, 11):
        sys.exit(f"{name}: error: this Python lacks {', '.join(missing)} and is older than 3.11; "
                 f"run: python3.11 tasks.py run (or any Python 3.11+)")
    try:
        install()
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"{name}: error: could not set up {VENV} ({e}); run: python3 tasks.py install")
    os.execv(PY, [str(PY), script, *argv])


def main(argv: list[str]) -> int:
    tasks = {"run": [str(PY), "runner.py"], "test": [str(PY), "-m", "pytest"],
             "lab": [str(PY), *lab_args()], "install": None}
    if not argv or argv[0] not in tasks:
        print(__doc__, file=sys.stderr)
        return 2
    install()
    install_git_filter()
    if tasks[argv[0]] is None:
        return 0
    os.chdir(ROOT)
    if argv[0] == "lab":
        subprocess.run([str(PY), "-m", "latency_lab.start_page", str(ROOT / START_PAGE)], check=True)
        return subprocess.run([*tasks["lab"], *argv[1:]], env=lab_environment()).returncode
    return subprocess.run([*tasks[argv[0]], *argv[1:]]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
