"""What ``tasks.py`` installs: the pins resolve together, and it says what it installs before it does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tasks

ROOT = Path(__file__).resolve().parent.parent
(NVFUSER,) = {p.split("==")[0] for p in tasks.pins(True)} - {p.split("==")[0] for p in tasks.pins(False)}


@pytest.mark.parametrize("extras", ["test", "test,gpu", "test,cluster"])
def test_the_pins_resolve_together(tmp_path, extras):
    """pip's resolver accepts pyproject's pins together (a dry run: nothing is installed): torch,
    Thunder and transformers as pyproject.toml pins them; with nvFuser's build where the index has it
    (its wheels are for Linux x86-64 with CUDA; the GPU path can be checked no further on a CPU)."""
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        + ["--report", str(report), f"{ROOT}[{extras}]"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if "NewConnectionError" in proc.stderr:  # the GPU machines here have no network
        pytest.skip("no package index is reachable from this machine")
    if "gpu" in extras and f"No matching distribution found for {NVFUSER}" in proc.stderr:
        pytest.skip(f"the package index here has no {NVFUSER}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    cluster = ["ray==2.60.0"] if "cluster" in extras else []  # pyproject's cluster extra
    for pin in [*tasks.pins("gpu" in extras), *cluster]:
        name, version = pin.split("==")
        assert got.get(name) == version, (pin, got.get(name))


def test_setup_says_which_torch_and_nvfuser_and_why():
    cpu, gpu = tasks.install_plan(False), tasks.install_plan(True)
    assert cpu.startswith("torch==") and "lightning-thunder==" in cpu and "no nvFuser" in cpu and NVFUSER not in cpu
    assert f"{NVFUSER}==" in gpu and "nvidia-smi lists a GPU" in gpu


def test_an_unknown_task_is_named_in_one_line(capsys):
    assert tasks.main(["runn"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "tasks.py: unknown task 'runn'; allowed: run, test, lab, install (tasks.py --help)\n"


def test_help_is_printed_on_request(capsys):
    assert tasks.main(["--help"]) == 0
    assert capsys.readouterr().out.startswith(tasks.__doc__)


def test_two_set_ups_at_once_take_turns_and_both_end_with_a_working_venv(tmp_path):
    """Two ``tasks.py install`` started together on a fresh project: the second, started once the first
    is setting up, says in one line that it waits, then finds the first's ``.venv`` and installs
    nothing; both exit 0 and ``.venv`` works. (A small project of ``tasks.py`` and a pyproject.toml
    that needs only ipykernel, so that the two set-ups overlap in seconds, not minutes.)"""
    project = tmp_path / "project"
    (project / "probe").mkdir(parents=True)
    (project / "probe" / "__init__.py").write_text("")
    shutil.copy(ROOT / "tasks.py", project / "tasks.py")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "probe"\nversion = "0"\ndependencies = ["ipykernel"]\n'
        "[project.optional-dependencies]\ntest = []\ngpu = []\ncluster = []\n"
        '[tool.setuptools]\npackages = ["probe"]\n'
    )
    command = [sys.executable, str(project / "tasks.py"), "install"]
    env = {**os.environ, "PATH": os.environ.get("PATH", "")}  # no nvidia-smi matters: has_gpu decides
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    said = first.stdout.readline()
    assert said.startswith("tasks.py: setting up"), said
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    rest, _ = first.communicate(timeout=900)
    if "NewConnectionError" in rest + second.stdout + second.stderr:
        pytest.skip("no package index is reachable from this machine")
    assert first.returncode == 0, said + rest
    assert "Editable installation" not in rest and "*****" not in rest, rest  # setuptools' note is not printed
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.startswith("tasks.py: another set-up of ") and "waiting for it" in second.stdout
    assert "setting up" not in second.stdout, second.stdout
    venv_python = project / ".venv" / "bin" / "python"
    assert subprocess.run([str(venv_python), "-c", "import ipykernel, probe"]).returncode == 0


def test_test_leaves_the_ab_runs_out_unless_asked_and_runs_them_alone_with_the_flag():
    """``tasks.py test``: across CPUs without the ``ab_runs`` tests; a marker or a named test is the
    user's choice; ``--ab-runs``: only those, in one process."""
    assert tasks.pytest_args([]) == ["-n", str(tasks.cpus()), "--dist", "loadgroup", "-m", "not ab_runs"]
    assert tasks.pytest_args(["-n", "0", "-k", "harness"]) == ["-m", "not ab_runs", "-n", "0", "-k", "harness"]
    assert tasks.pytest_args(["-m", "gpu"])[-2:] == ["-m", "gpu"] and "not ab_runs" not in tasks.pytest_args(
        ["-m", "gpu"]
    )
    named = "tests/test_bisect.py::test_a_range_where_no_commit_moves_the_step_says_so"
    assert "not ab_runs" not in tasks.pytest_args([named])
    assert tasks.pytest_args(["--ab-runs", "-x"]) == ["-m", "ab_runs", "-p", "no:xdist", "-x"]


def test_every_ab_runs_test_is_collected_by_the_flag_and_none_by_default():
    """The two selections split the suite: nothing marked ``ab_runs`` is in the default one."""

    def collected(args: list[str]) -> set[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", *args, "tests/test_ab_builds.py"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout[-2000:]
        return {line for line in proc.stdout.splitlines() if "::" in line}

    default = collected([a for a in tasks.pytest_args([]) if a not in ("-n", str(tasks.cpus()), "--dist", "loadgroup")])
    ab = collected(tasks.pytest_args(["--ab-runs"]))
    assert ab and default and not ab & default
    assert any("loaded_machine" in t for t in ab) and not any("loaded_machine" in t for t in default)
