"""``runner.py --ray`` (latency_lab/run/fleet.py) on a real local Ray cluster: two "machine types" (logical
GPUs T1 and T2 on this machine), the tiny preset on the CPU (the tasks' kernels see no GPU), a task
whose worker is killed mid-run, Ctrl-C on the caller, the fleet page in headless Chromium, and bad
input. One cluster for the module (``ray_cluster``), one xdist group (tests/conftest.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, chromium_dom, cpu_environment, run_runner
from test_runner import _notebook

import runner

# The tasks' kernels see no GPU: Ray leaves CUDA_VISIBLE_DEVICES as the runtime env sets it.
CPU_TASKS = {"env_vars": {"CUDA_VISIBLE_DEVICES": "", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}}
AUTH = {"RAY_AUTH_MODE": "token"}  # Ray 2.59+ starts a local cluster with token authentication (~/.ray/auth_token)


def needs_ray() -> None:
    """Skips the test where Ray is not installed; fails it in CI, which installs it (.ci/run)."""
    if importlib.util.find_spec("ray") is None:
        reason = "ray is not installed: pip install 'latency-lab[cluster]' (or python3 tasks.py install --cluster)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI installs it (LATENCY_LAB_CLUSTER=1 in .ci/run)")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory) -> dict:
    """A local Ray cluster for the module: 2 CPUs, 2 logical GPUs, one of type T1 and one of type T2;
    its address and a runtime-env file that keeps the tasks' kernels off any GPU."""
    needs_ray()
    import ray

    visible = os.environ.pop("CUDA_VISIBLE_DEVICES", None)  # Ray checks logical GPUs against it
    try:
        ray.init(
            num_cpus=2,
            num_gpus=2,
            resources={"accelerator_type:T1": 1, "accelerator_type:T2": 1},
            include_dashboard=False,
            log_to_driver=False,
        )
    finally:
        if visible is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = visible
    env_file = tmp_path_factory.mktemp("ray") / "cpu-tasks.json"
    env_file.write_text(json.dumps(CPU_TASKS))
    yield {"address": ray.get_runtime_context().gcs_address, "runtime_env": str(env_file)}
    ray.shutdown()


def fleet_args(cluster: dict, out: Path, run_id: str, *more: str) -> list[str]:
    return [
        "--ray",
        cluster["address"],
        "--runtime-env",
        cluster["runtime_env"],
        "--preset",
        "tiny",
        "--device",
        "cpu",
        "--output-dir",
        str(out),
        "--run-id",
        run_id,
        *more,
    ]


def start_runner(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "runner.py"), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cpu_environment(**AUTH),
    )


def sleepy_notebooks(folder: Path) -> Path:
    """01_sleepy: writes ``pids/<its worker's pid>`` (its kernel's parent) holding its kernel's pid,
    waits for ``pids/release``, then saves results; 02_after: saves results."""
    nbdir, pids = folder / "nbs", folder / "pids"
    nbdir.mkdir()
    pids.mkdir()
    save = "from latency_lab.core import parameters as P, results\nresults.save(output_dir, {!r}, P.validate(preset=preset), {{}}, results.key_table('t', [{{'x': 1}}]))"  # noqa: E501
    _notebook(
        nbdir / "01_sleepy.ipynb",
        f"import os, pathlib, time\npids = pathlib.Path({str(pids)!r})\n"
        "(pids / str(os.getppid())).write_text(str(os.getpid()))\n"
        "while not (pids / 'release').exists():\n    time.sleep(0.1)\n" + save.format("01_sleepy"),
    )
    _notebook(nbdir / "02_after.ipynb", save.format("02_after"))
    return nbdir


def wait_for_workers(pids: Path, proc: subprocess.Popen, count: int = 2, seconds: float = 120) -> dict[int, int]:
    """The task workers' pids -> their kernels' pids, once ``count`` notebooks are running."""
    deadline = time.monotonic() + seconds
    while len(found := [p for p in pids.iterdir() if p.name.isdigit()]) < count:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate(timeout=60)
        time.sleep(0.2)
    time.sleep(0.3)  # the kernel's pid is written
    return {int(p.name): int(p.read_text()) for p in found}


def gone(pid: int, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


def test_each_notebook_runs_once_per_gpu_type_into_a_folder_each_and_one_fleet_page(ray_cluster, tmp_path):
    """``--notebooks 01`` on T1 and T2: one run folder per type (results, environment with its Ray
    node, summary, pages), ``compare`` between them, and the fleet page in headless Chromium."""
    out = tmp_path / "out"
    proc = run_runner(*fleet_args(ray_cluster, out, "fleet", "--notebooks", "01"), timeout=300, env=AUTH)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 notebooks × GPU types T1, T2" in proc.stdout and "all tasks ok" in proc.stdout
    fleet = out / "fleet"
    for t in ("T1", "T2"):
        summary = json.loads((fleet / t / "summary.json").read_text())
        assert summary["ok"] and summary["run_id"] == f"fleet/{t}"
        assert [(n["name"], n["status"], n["gpu"]) for n in summary["notebooks"]] == [("01_model_setup", "ok", "cpu")]
        env = json.loads((fleet / t / "environment.json").read_text())
        assert env["ray"]["accelerator_type"] == t and env["ray"]["host"] and env["cpu"] and env["packages"]["torch"]
        assert env["device"] == "cpu"
        data = json.loads((fleet / t / "01_model_setup.results.json").read_text())
        assert data["params"]["preset"] == "tiny" and data["environment"]["cpu"]
        for page in ("index.html", "report.html", "01_model_setup.html", "01_model_setup.ipynb", "plotly.packed.js"):
            assert (fleet / t / page).is_file(), page
    data = json.loads((fleet / "fleet.json").read_text())
    assert data["types"] == ["T1", "T2"] and data["interrupted"] is None
    assert [(d["type"], d["status"]) for d in data["tasks"]] == [("T1", "ok"), ("T2", "ok")]
    assert not (out / "latest").exists()  # a fleet is several runs: latest is left as it was
    compared = run_runner("compare", str(fleet / "T1"), str(fleet / "T2"), "--all", timeout=120)
    assert compared.returncode == 0 and "ray.accelerator_type: T1 -> T2" in compared.stdout, compared.stderr
    dom = chromium_dom((fleet / "index.html").as_uri(), tmp_path / "profile")
    assert "latency-lab fleet fleet: T1, T2" in dom and "Every task: status, time, where it ran" in dom
    assert 'href="T1/index.html"' in dom and 'href="T2/index.html"' in dom
    assert "T2 against T1: " in dom and "<td>ray.accelerator_type</td>" in dom


def test_a_task_whose_worker_is_killed_is_a_row_that_says_so_and_the_others_finish(ray_cluster, tmp_path):
    nbdir = sleepy_notebooks(tmp_path)
    proc = start_runner(fleet_args(ray_cluster, tmp_path / "out", "k", "--notebook-dir", str(nbdir)))
    workers = wait_for_workers(tmp_path / "pids", proc)
    killed = min(workers)
    os.kill(killed, signal.SIGKILL)
    assert gone(workers[killed])  # its kernel went with it
    (tmp_path / "pids" / "release").write_text("")
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 1, stdout + stderr
    tasks = json.loads((tmp_path / "out" / "k" / "fleet.json").read_text())["tasks"]
    failed = [d for d in tasks if d["status"] != "ok"]
    assert len(failed) == 1 and failed[0]["name"] == "01_sleepy", tasks
    assert failed[0]["error"]["ename"] == "WorkerCrashedError"
    assert failed[0]["error"]["evalue"].startswith("the task's worker died")
    assert {(d["type"], d["name"]) for d in tasks if d["status"] == "ok"} == {
        ("T1", "02_after"),
        ("T2", "02_after"),
        ({"T1": "T2", "T2": "T1"}[failed[0]["type"]], "01_sleepy"),
    }
    assert f"FAILED: {failed[0]['type']} 01_sleepy" in stdout and "WorkerCrashedError" in stdout
    page = (tmp_path / "out" / "k" / "index.html").read_text()
    assert "WorkerCrashedError: the task&#39;s worker died" in page


def test_ctrl_c_on_the_caller_cancels_the_tasks_and_writes_what_it_has(ray_cluster, tmp_path):
    nbdir = sleepy_notebooks(tmp_path)
    proc = start_runner(fleet_args(ray_cluster, tmp_path / "out", "c", "--notebook-dir", str(nbdir)))
    workers = wait_for_workers(tmp_path / "pids", proc)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and time.monotonic() - sent < 30, stdout + stderr
    assert "INTERRUPTED (SIGINT)" in stdout and "Traceback" not in stderr
    assert all(gone(pid) for pair in workers.items() for pid in pair)  # the workers and their kernels
    fleet = tmp_path / "out" / "c"
    assert (fleet / "fleet.json").is_file(), stdout + stderr
    data = json.loads((fleet / "fleet.json").read_text())
    assert data["interrupted"] == "SIGINT"
    assert {(d["name"], d["status"]) for d in data["tasks"]} == {
        ("01_sleepy", "interrupted"),
        ("02_after", "interrupted"),
    }
    assert all(d["error"]["evalue"] == "SIGINT: task cancelled" for d in data["tasks"])
    for t in ("T1", "T2"):
        assert json.loads((fleet / t / "summary.json").read_text())["interrupted"] == "SIGINT"
        assert "interrupted (SIGINT)" in (fleet / t / "index.html").read_text()
    assert (fleet / "index.html").is_file()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--ray", "--gpus", "all"], "--ray and --gpus 'all' disagree: give one"),
        (["--ray", "--cpu-slots", "2"], "--ray and --cpu-slots 2 disagree: a Ray task runs one notebook on one GPU"),
        (["--accelerators", "H100"], "invalid --accelerators 'H100': allowed only with --ray [ADDRESS]"),
        (["--ray", "--accelerators", "H100,,H200"], "invalid --accelerators 'H100,,H200': an empty name; allowed a"),
        (["--ray", "--accelerators", "H100,H100"], "H100 given twice"),
        (["--ray", "--device", "cuda:1"], "invalid --device 'cuda:1' with --ray: each task sees one GPU"),
        (["--ray", "-p", "device=cuda:1"], "invalid --device 'cuda:1' with --ray: each task sees one GPU"),
        (["--runtime-env", "x.json"], "invalid --runtime-env 'x.json': allowed only with --ray"),
        (["--ray", "127.0.0.1:PORT"], "nothing answers there (Connection refused); allowed HOST:PORT"),
        (["--ray", "127.0.0.1"], "invalid --ray '127.0.0.1': allowed HOST:PORT"),
    ],
)
def test_bad_input_is_one_line_naming_the_option_and_nothing_is_written(tmp_path, capsys, args, fragment):
    if "127.0.0.1:PORT" in args:
        needs_ray()
        args = [a.replace("PORT", str(free_port())) for a in args]
    code = runner.main([*args, "--preset", "tiny", "--notebooks", "01", "--output-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and fragment in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_a_gpu_type_the_cluster_lacks_names_those_it_has(ray_cluster, tmp_path):
    proc = run_runner(
        *fleet_args(ray_cluster, tmp_path / "out", "x", "--notebooks", "01", "--accelerators", "T1,H100"),
        timeout=120,
        env=AUTH,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "invalid --accelerators 'T1,H100': the cluster has no H100; allowed T1, T2" in proc.stderr
    assert list((tmp_path / "out").iterdir()) == []


def test_ray_not_installed_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray: ImportError
    code = runner.main(["--ray", "--preset", "tiny", "--notebooks", "01", "--output-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "--ray needs Ray, which is not installed: pip install 'latency-lab[cluster]'" in err
    assert list((tmp_path / "out").iterdir()) == []


def test_a_lost_node_or_a_task_that_raised_is_its_rows_error():
    """What ``Fleet.run`` makes of each of Ray's errors for a task: the node or worker lost, said so;
    a task that raised (a parameter that does not fit the node's GPU, say), the notebook's error."""
    needs_ray()
    from ray import exceptions as E

    from latency_lab.run.fleet import task_error

    assert task_error(E.NodeDiedError("node 9f died")) == {
        "cell": None,
        "cell_index": None,
        "ename": "NodeDiedError",
        "evalue": "the task's node died: node 9f died",
    }
    assert task_error(E.WorkerCrashedError())["evalue"].startswith("the task's worker died (killed, or out of memory)")
    raised = E.RayTaskError("run_notebook", "Traceback ...", ValueError("invalid layers 99: fits 40 GiB\nmore"))
    assert (task_error(raised)["ename"], task_error(raised)["evalue"]) == (
        "ValueError",
        "invalid layers 99: fits 40 GiB",
    )
