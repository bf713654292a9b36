#!/usr/bin/env python3
"""Set up ``.venv`` (once, and again when pyproject.toml changes), then run a task in it.

    python3 tasks.py run [runner.py args]     # the whole investigation: python runner.py
    python3 tasks.py test [pytest args]       # the test suite
    python3 tasks.py lab                      # JupyterLab on notebooks/
    python3 tasks.py install                  # only the setup

Needs nothing but Python 3.11+. nvFuser is added where ``nvidia-smi`` sees a GPU on Linux x86-64.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
STAMP = VENV / ".installed"
KERNEL = "latency-lab"


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


def main(argv: list[str]) -> int:
    tasks = {"run": [str(PY), "runner.py"], "test": [str(PY), "-m", "pytest"],
             "lab": [str(PY), "-m", "jupyter", "lab", "notebooks"], "install": None}
    if not argv or argv[0] not in tasks:
        print(__doc__, file=sys.stderr)
        return 2
    install()
    if tasks[argv[0]] is None:
        return 0
    os.chdir(ROOT)
    return subprocess.run([*tasks[argv[0]], *argv[1:]]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
