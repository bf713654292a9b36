"""latency_lab.compile_cache: one fresh cache folder per run, in the variables the kernels inherit."""

from __future__ import annotations

import os

from latency_lab import compile_cache


def test_for_run_points_the_compilers_at_a_fresh_folder_and_restores_everything(monkeypatch):
    monkeypatch.setenv("NVFUSER_ENABLE", "id_model,kernel_db")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    before = dict(os.environ)
    with compile_cache.for_run("r1") as root:
        assert root.is_dir() and root.name.startswith("latency-lab-r1-")
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(root / "inductor")
        assert os.environ["TMPDIR"] == str(root / "tmp") and (root / "tmp").is_dir()  # nvFuser's kernel DB lives there
        assert os.environ["NVFUSER_ENABLE"] == "id_model,kernel_db"  # other options kept, kernel_db once
        assert compile_cache.describe().startswith("per run")
        (root / "inductor" / "fx").mkdir(parents=True)
        (root / "inductor" / "fx" / "graph").write_text("x")
        (root / "tmp" / "nvfuser_kernel_db").mkdir()
        (root / "tmp" / "nvfuser_kernel_db" / "kernel_0.cubin").write_bytes(b"\0")
        assert compile_cache.usage(root) == {"inductor_files": 1, "nvfuser_kernels": 1}
    assert dict(os.environ) == before and not root.exists()
    assert compile_cache.describe().startswith("the tools' defaults")


def test_for_run_cleans_up_after_an_error():
    try:
        with compile_cache.for_run("r2") as root:
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert not root.exists() and compile_cache.MARKER not in os.environ


def test_usage_of_an_empty_folder(tmp_path):
    assert compile_cache.usage(tmp_path) == {"inductor_files": 0, "nvfuser_kernels": 0}
