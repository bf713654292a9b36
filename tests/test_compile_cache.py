"""latency_lab.core.compile_cache: one fresh cache folder per run, in the variables the kernels inherit."""

from __future__ import annotations

import errno
import os

import runner
from latency_lab.core import compile_cache
from latency_lab.run import notebook_run


def test_the_run_environment_points_the_compilers_at_the_run_folder_and_restores_everything(monkeypatch):
    monkeypatch.setenv("NVFUSER_ENABLE", "id_model,kernel_db")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    before = dict(os.environ)
    root = compile_cache.make("r1")
    assert root.name.startswith("latency-lab-r1-") and (root / "tmp").is_dir()
    with notebook_run.kernel_environment(compile_cache.environment(root)):
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(root / "inductor")
        assert os.environ["TMPDIR"] == str(root / "tmp")  # nvFuser's kernel DB lives there
        assert os.environ["NVFUSER_ENABLE"] == "id_model,kernel_db"  # other options kept, kernel_db once
        assert compile_cache.describe().startswith("per run")
        (root / "inductor" / "fx").mkdir(parents=True)
        (root / "inductor" / "fx" / "graph").write_text("x")
        (root / "tmp" / "nvfuser_kernel_db").mkdir()
        (root / "tmp" / "nvfuser_kernel_db" / "kernel_0.cubin").write_bytes(b"\0")
        assert compile_cache.close(root) == {"inductor_files": 1, "nvfuser_kernels": 1}
    assert dict(os.environ) == before and not root.exists()


def test_kernel_environment_is_restored_after_an_error():
    root = compile_cache.make("r2")
    try:
        with notebook_run.kernel_environment(compile_cache.environment(root)):
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    finally:
        compile_cache.close(root)
    assert not root.exists() and compile_cache.MARKER not in os.environ


def test_default_mode_describes_what_the_environment_really_sets(monkeypatch):
    monkeypatch.setenv(compile_cache.MARKER, "run")  # inherited from an outer run: not ours
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere")
    monkeypatch.setenv("NVFUSER_ENABLE", "kernel_db")
    with notebook_run.kernel_environment(compile_cache.environment(None)):
        assert compile_cache.MARKER not in os.environ
        assert compile_cache.describe() == (
            "not per run: Inductor's cache where TORCHINDUCTOR_CACHE_DIR says, nvFuser kernel DB on"
        )
    assert os.environ[compile_cache.MARKER] == "run"
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    monkeypatch.delenv("NVFUSER_ENABLE")
    monkeypatch.delenv(compile_cache.MARKER)
    assert compile_cache.describe() == "not per run: Inductor's machine-wide cache, no nvFuser kernel DB"


def test_close_an_empty_folder(tmp_path):
    assert compile_cache.close(tmp_path / "empty") == {"inductor_files": 0, "nvfuser_kernels": 0}


def test_a_cache_folder_that_cannot_be_made_is_a_setup_error(tmp_path, monkeypatch, capsys):
    def full(run_id):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(compile_cache, "make", full)
    code = runner.main(
        [
            "--preset",
            "tiny",
            "--device",
            "cpu",
            "--notebooks",
            "01",
            "--output-dir",
            str(tmp_path),
            "--run-id",
            "nospace",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "No space left on device" in err and "--compile-cache default" in err
    assert list(tmp_path.iterdir()) == []  # the run folder made just before is gone again


def test_a_runs_kernels_share_inductors_cpu_instruction_set_checks(tmp_path, monkeypatch):
    """The first kernel of a run checks an instruction set (Inductor compiles a probe and loads it in a
    fresh Python: 50 s of a tiny 02's torch.compile on the H100 machine's host); a later kernel reads
    the answer from the run's cache folder instead. Outside a run that shares caches nothing changes."""
    from torch._inductor import cpu_vec_isa

    checked = []

    def probe(isa, code):  # stands in for the compile-and-load probe, whose answer it records
        checked.append(code)
        return "fails" not in code

    monkeypatch.setattr(cpu_vec_isa.VecISA, "check_build", probe)
    monkeypatch.delenv(compile_cache.MARKER, raising=False)
    assert not compile_cache.share_isa_checks() and cpu_vec_isa.VecISA.check_build is probe
    monkeypatch.setenv(compile_cache.MARKER, "run")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    assert compile_cache.share_isa_checks() and compile_cache.share_isa_checks()  # wrapped once
    isa = cpu_vec_isa.VecAVX2()
    assert isa.check_build("avx2 probe") and not isa.check_build("fails probe")
    assert isa.check_build("avx2 probe") and not isa.check_build("fails probe")  # answered from the files
    assert checked == ["avx2 probe", "fails probe"]
    answers = sorted(p.read_text() for p in (tmp_path / "isa-checks").iterdir())
    assert answers == ["builds", "does not build"]
    cpu_vec_isa.VecISA.check_build = probe  # a later kernel: a new process with torch's own check
    assert compile_cache.share_isa_checks() and isa.check_build("avx2 probe") and len(checked) == 2
