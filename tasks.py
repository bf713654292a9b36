#!/usr/bin/env python3
"""Set up ``.venv`` (once, and again when pyproject.toml changes), then run a task in it.

    python3 tasks.py run [runner.py args]     # the whole investigation: python runner.py
    python3 tasks.py test [pytest args]       # ruff (lint, format check), then the test suite, in parallel
    python3 tasks.py test --ab-runs           # the tests that time real A/B runs and bisections, one at a time
    python3 tasks.py lab                      # JupyterLab on the project, opened at a start page
    python3 tasks.py install                  # only the setup
    python3 tasks.py install --cluster        # and Ray, for runner.py --ray (or LATENCY_LAB_CLUSTER=1 before any task)

Needs nothing but Python 3.11+. nvFuser is added where ``nvidia-smi`` sees a GPU on Linux x86-64; Ray
(pyproject's ``cluster`` extra) only when asked, and then in every later setup of the same ``.venv``. In a
git checkout every task also installs the clean filter that keeps notebook outputs out of commits.
A task runs as the terminal's foreground job (Ctrl-C goes to it alone); SIGINT, SIGTERM and SIGHUP
sent to tasks.py are passed on to it, and tasks.py waits for it and exits with its status.

``test`` runs pytest across CPUs (pytest-xdist: ``-n <CPUs> --dist loadgroup``, the tests that share
an expensive fixture on one worker) unless its arguments say otherwise (``-n 0``, ``-p no:xdist``,
``--dist ...``) or need one process (``--pdb``, ``--trace``, ``--collect-only``). It leaves out the
tests marked ``ab_runs`` (real A/B rounds and bisections: many worker processes whose verdicts want a
quiet machine) unless its arguments select by marker (``-m``) or name a test (``file::test``);
``test --ab-runs`` runs only those, one at a time. CI runs both.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
STAMP = VENV / ".installed"
LOCK = ROOT / ".venv.lock"  # held while ``.venv`` is created or updated: set-ups started side by side take turns
KERNEL = "latency-lab"
FILTER = "notebook-outputs"  # .gitattributes applies it to notebooks/*.ipynb
START_PAGE = "notebooks/START.md"  # written by ``tasks.py lab`` (latency_lab.run.start_page); not tracked
LAB_CONFIG = ROOT / ".jupyter"  # labconfig: Markdown opens rendered (the start page, the README), no news prompt
SUITE_MODULES = ("torch", "papermill", "nbconvert", "plotly")  # what runner.py cannot start without
EDITABLE = "ignore:Editable installation"  # a warnings filter: setuptools' note on editable installs
CLUSTER = "LATENCY_LAB_CLUSTER"  # =1: install the cluster extra (Ray) too, as ``install --cluster`` does


def has_gpu() -> bool:
    if platform.system() != "Linux" or platform.machine() != "x86_64" or not shutil.which("nvidia-smi"):
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def pins(gpu: bool) -> list[str]:
    """pyproject.toml's torch and Thunder pins, and with ``gpu`` its gpu extra (nvFuser's build)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    chosen = [d for d in project["dependencies"] if d.split("=")[0] in ("torch", "lightning-thunder")]
    return chosen + (project["optional-dependencies"]["gpu"] if gpu else [])


def install_plan(gpu: bool) -> str:
    """What ``install`` is about to install (``pins``) and why nvFuser is in or out."""
    why = (
        "nvidia-smi lists a GPU: nvFuser's build for this torch"
        if gpu
        else "no GPU (no nvidia-smi, none listed, or not Linux x86-64): no nvFuser; Thunder runs its torch executors"
    )
    return f"{', '.join(pins(gpu))} ({why}); torch's wheel is large: the first setup takes minutes"


def _stamp(gpu: bool, cluster: bool = False) -> str:
    text = (ROOT / "pyproject.toml").read_bytes() + str(gpu).encode() + (b"cluster" if cluster else b"")
    return hashlib.sha256(text).hexdigest()


def wants_cluster(asked: bool = False) -> bool:
    """Whether the setup includes the cluster extra: asked (``--cluster``, ``LATENCY_LAB_CLUSTER=1``),
    or the ``.venv`` was set up with it (it stays)."""
    return asked or os.environ.get(CLUSTER) == "1" or (STAMP.exists() and STAMP.read_text() == _stamp(has_gpu(), True))


def is_set_up() -> bool:
    """Whether ``.venv`` is set up for the current pyproject.toml (``install`` would do nothing)."""
    return STAMP.exists() and STAMP.read_text() == _stamp(has_gpu(), wants_cluster())


@contextmanager
def setup_lock():
    """Hold ``LOCK`` (an exclusive ``flock``) for the block. Another process's set-up holding it is
    waited for, with one line saying so; it is let go however that one ends, even killed. Where the
    OS has no ``flock`` (Windows) there is no lock."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(LOCK, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            print(f"tasks.py: another set-up of {VENV} is running (pid {holder}); waiting for it ...", flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        try:
            yield
        finally:
            f.seek(0)
            f.truncate()  # the lock goes with the file's closing


def install(cluster: bool = False) -> None:
    """Set up ``.venv`` for pyproject.toml (and the cluster extra when asked), unless it is already:
    one set-up at a time (``setup_lock``); one that waited finds the other's ``.venv`` and stops there."""
    gpu, cluster = has_gpu(), wants_cluster(cluster)
    want = _stamp(gpu, cluster)
    if STAMP.exists() and STAMP.read_text() == want:
        return
    with setup_lock():
        if not (STAMP.exists() and STAMP.read_text() == want):
            _set_up(gpu, cluster, want)


def _set_up(gpu: bool, cluster: bool, want: str) -> None:
    """Create or update ``.venv``: pip, the project with its extras, the Jupyter kernel, then the stamp."""
    STAMP.unlink(missing_ok=True)  # a set-up cut short leaves none: the next one starts over
    extra = "; Ray (the cluster extra, for runner.py --ray)" if cluster else ""
    print(f"tasks.py: setting up {VENV}: {install_plan(gpu)}{extra} ...", flush=True)
    if not PY.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(PY), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    # setuptools' "Editable installation" warning (a block of asterisks about folders named like the
    # package) is about a layout this project has on purpose: not printed
    quiet = {**os.environ, "PYTHONWARNINGS": ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), EDITABLE]))}
    extras = f"test{',gpu' if gpu else ''}{',cluster' if cluster else ''}"
    subprocess.run([*pip, "-e", f"{ROOT}[{extras}]"], check=True, env=quiet)
    subprocess.run(
        [
            str(PY),
            "-m",
            "ipykernel",
            "install",
            "--sys-prefix",
            "--name",
            KERNEL,
            "--display-name",
            "latency-lab (.venv)",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    STAMP.write_text(want)


def lab_args(folder: Path = ROOT, start: str | None = START_PAGE) -> list[str]:
    """``python`` arguments of JupyterLab on ``folder``, its front page ``start`` (a path under it);
    root, as in CI and containers, must say so."""
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    return [
        "-m",
        "jupyterlab",
        f"--ServerApp.root_dir={folder}",
        *([f"--LabApp.default_url=/lab/tree/{start}"] if start else []),
        *(["--allow-root"] if root else []),
    ]


def lab_environment(env: dict | None = None) -> dict:
    """``env`` (default: this process's) with the project's Jupyter config dir first on the path."""
    env = dict(os.environ if env is None else env)
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(filter(None, [str(LAB_CONFIG), env.get("JUPYTER_CONFIG_PATH")]))
    return env


def install_git_filter(root: Path = ROOT) -> bool:
    """Set git's clean filter for notebooks in ``root``'s repository: what git stores has no outputs
    (``tools/strip_notebook_outputs.py``). False where ``root`` is not a git checkout or its config
    cannot be written (the tests then still fail on a notebook committed with outputs). A filter
    already set so is left alone: tasks started side by side (tests in parallel) only read the config,
    and none fails on the lock of another's write."""
    if not shutil.which("git") or subprocess.run(["git", "-C", str(root), "rev-parse"], capture_output=True).returncode:
        return False
    python = getattr(sys, "_base_executable", None) or sys.executable  # outlives a rebuilt .venv
    command = f"{shlex.quote(python)} tools/strip_notebook_outputs.py"  # git runs it in the work tree's root
    config, key = ["git", "-C", str(root), "config"], f"filter.{FILTER}.clean"
    if subprocess.run([*config, "--get", key], capture_output=True, text=True).stdout.rstrip("\n") == command:
        return True
    return subprocess.run([*config, key, command], capture_output=True).returncode == 0


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
        sys.exit(
            f"{name}: error: this Python lacks {', '.join(missing)} and is older than 3.11; "
            f"run: python3.11 tasks.py run (or any Python 3.11+)"
        )
    try:
        install()
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"{name}: error: could not set up {VENV} ({e}); run: python3 tasks.py install")
    os.execv(PY, [str(PY), script, *argv])


FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _owned_terminal() -> int | None:
    """The descriptor of our terminal when this process's group is its foreground job, else None."""
    try:
        fd = sys.stdin.fileno()
        return fd if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp() else None
    except (AttributeError, OSError, ValueError):  # no stdin, or not a terminal of ours
        return None


def _give_terminal(fd: int | None, pgid: int) -> None:
    """Make ``pgid`` the foreground group of terminal ``fd`` (None: no terminal of ours, nothing to
    do); a background caller would get SIGTTOU, and a terminal that hung up refuses: both harmless."""
    if fd is None:
        return
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(fd, pgid)
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTTOU, previous)


def run_task(cmd: list[str], env: dict | None = None) -> int:
    """Run ``cmd`` in its own process group and wait for it, whatever arrives meanwhile; return its
    exit status (128 + N when signal N ended it). On a terminal we own, its group becomes the
    foreground job, so Ctrl-C reaches it (and its children) once, as if typed to it, and not
    tasks.py; SIGINT, SIGTERM and SIGHUP sent to tasks.py (``kill``, a closed terminal) are passed
    on to its group. Either way it gets each signal once, finishes (a run marks its folder), and
    tasks.py neither dies first nor kills it. Ctrl-Z stops both; ``fg`` and ``bg`` resume both."""
    child, pending = None, []

    def forward(signum, frame):
        if child is None:
            pending.append(signum)
        else:
            try:
                os.killpg(child.pid, signum)
            except ProcessLookupError:  # it has ended
                pass

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    terminal = _owned_terminal()
    try:
        child = subprocess.Popen(cmd, process_group=0, env=env)
        if terminal is not None:
            _give_terminal(terminal, child.pid)
            os.killpg(child.pid, signal.SIGCONT)  # had it read the terminal before it was its own, it stopped
        for signum in pending:
            forward(signum, None)
        while True:
            _, status = os.waitpid(child.pid, os.WUNTRACED)
            if not os.WIFSTOPPED(status):
                child.returncode = os.waitstatus_to_exitcode(status)
                break
            _give_terminal(terminal, os.getpgrp())  # Ctrl-Z: stop as the shell's job, as it expects
            os.kill(os.getpid(), signal.SIGSTOP)
            terminal = _owned_terminal()  # continued: by fg (the terminal is ours again) or by bg
            _give_terminal(terminal, child.pid)
            os.killpg(child.pid, signal.SIGCONT)
    finally:
        _give_terminal(terminal, os.getpgrp())
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 128 - child.returncode if child.returncode < 0 else child.returncode


ONE_PROCESS = ("--pdb", "--trace", "--collect-only", "--co")  # what a run across workers refuses or garbles


def cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS tells it, else the machine's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


AB_RUNS = "--ab-runs"  # tasks.py test's flag: only the tests marked ab_runs, one at a time


def pytest_args(argv: list[str]) -> list[str]:
    """``tasks.py test``'s pytest arguments. With ``AB_RUNS``: the ``ab_runs`` tests (real A/B rounds and
    bisections), in one process, one at a time. Otherwise ``argv`` without them (``-m "not ab_runs"``)
    unless ``argv`` selects by marker (``-m``) or names a test (``file::test``), after ``-n <cpus()>
    --dist loadgroup`` unless ``argv`` says how to distribute the tests (``-n``, ``--numprocesses``,
    ``--dist``, ``-p no:xdist``) or asks for one process (``ONE_PROCESS``)."""
    if AB_RUNS in argv:
        return ["-m", "ab_runs", "-p", "no:xdist", *(a for a in argv if a != AB_RUNS)]
    chosen = any(
        a in ONE_PROCESS or a.startswith(("-n", "--numprocesses", "--dist")) or a.endswith("no:xdist") for a in argv
    )
    picked = any(a.startswith("-m") or "::" in a for a in argv)
    return [
        *([] if chosen else ["-n", str(cpus()), "--dist", "loadgroup"]),
        *([] if picked else ["-m", "not ab_runs"]),
        *argv,
    ]


def main(argv: list[str]) -> int:
    tasks = {
        "run": [str(PY), "runner.py"],
        "test": [str(PY), "-m", "pytest"],
        "lab": [str(PY), *lab_args()],
        "install": None,
    }
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] not in tasks:
        print(f"tasks.py: unknown task {argv[0]!r}; allowed: {', '.join(tasks)} (tasks.py --help)", file=sys.stderr)
        return 2
    if argv[0] == "install" and argv[1:] not in ([], ["--cluster"]):
        print(f"tasks.py install: unknown arguments {' '.join(argv[1:])}; allowed: --cluster", file=sys.stderr)
        return 2
    install(cluster=argv[1:] == ["--cluster"])
    install_git_filter()
    if tasks[argv[0]] is None:
        return 0
    os.chdir(ROOT)
    if argv[0] == "lab":
        subprocess.run([str(PY), "-m", "latency_lab.run.start_page", str(ROOT / START_PAGE)], check=True)
        return run_task([*tasks["lab"], *argv[1:]], env=lab_environment())
    if argv[0] == "test" and (
        lint := run_task([str(PY), "-m", "ruff", "check", "."])
        or run_task([str(PY), "-m", "ruff", "format", "--check", "."])
    ):
        return lint  # ruff's findings first: a tree that does not lint is not tested
    return run_task([*tasks[argv[0]], *(pytest_args(argv[1:]) if argv[0] == "test" else argv[1:])])


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:  # during the setup (pip); a task's own Ctrl-C goes to the task
        print("tasks.py: interrupted", file=sys.stderr)
        sys.exit(130)
