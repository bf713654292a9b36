"""The package's shape, read from its source: each folder imports only the folders above it
(CONTRIBUTING's Layout), instruments import only ``core``, studies never import each other, and no
module or function outgrows what a reader holds at once."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "latency_lab"
LAYERS = ("core", "pages", "instruments", "studies", "run", "explorer")  # a folder imports only those before it
MODULE_LINES, FUNCTION_LINES = 450, 60


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def name_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Every ``latency_lab`` module ``path`` imports (relative imports resolved; a name imported from a
    package counts as that package's module of that name where one exists)."""
    package = name_of(path) if path.name == "__init__.py" else name_of(path).rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            out |= {target} | {f"{target}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m for m in out if m.startswith("latency_lab.") and _exists(m)}


def _exists(module: str) -> bool:
    path = PACKAGE.parent / module.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def folder(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def study(module: str) -> str | None:
    """The study a module belongs to (``levers`` for ``latency_lab.studies.levers.study``); None outside
    ``studies`` and for its skeleton ``base``."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "studies" and parts[2] != "base" else None


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_folder_imports_only_the_folders_above_it(path):
    mine = folder(name_of(path))
    if mine not in LAYERS:
        return
    above = set(LAYERS[: LAYERS.index(mine) + 1])
    wrong = sorted(m for m in imported(path) if folder(m) in LAYERS and folder(m) not in above)
    assert not wrong, f"{name_of(path)} ({mine}) imports {wrong}, from a folder below it"


@pytest.mark.parametrize("path", [p for p in modules() if study(name_of(p))], ids=lambda p: p.stem)
def test_studies_do_not_import_each_other(path):
    mine = study(name_of(path))
    others = sorted(m for m in imported(path) if study(m) not in (None, mine))
    assert not others, f"{name_of(path)} imports another study: {others}"


def test_no_module_or_function_outgrows_a_reader():
    too_long = []
    for path in modules():
        text = path.read_text()
        if (n := len(text.splitlines())) > MODULE_LINES:
            too_long.append(f"{path.relative_to(PACKAGE)}: {n} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if (n := node.end_lineno - start + 1) > FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}: {n} lines")
    assert not too_long, f"over {MODULE_LINES} lines a module or {FUNCTION_LINES} a function: {too_long}"


def test_the_checks_catch_what_they_look_for(tmp_path, monkeypatch):
    """A planted import from a lower folder, one study importing another and a long function are found."""
    root = tmp_path / "latency_lab"
    for name in ("core", "studies/a", "studies/b"):
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text("")
    (root / "core" / "low.py").write_text("from ..studies.a import study\n")
    (root / "studies" / "a" / "study.py").write_text("from ..b import study\n")
    (root / "studies" / "b" / "study.py").write_text("def f():\n" + "    x = 1\n" * FUNCTION_LINES)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", root)
    with pytest.raises(AssertionError, match="from a folder below it"):
        test_a_folder_imports_only_the_folders_above_it(root / "core" / "low.py")
    with pytest.raises(AssertionError, match="imports another study"):
        test_studies_do_not_import_each_other(root / "studies" / "a" / "study.py")
    with pytest.raises(AssertionError, match="f: 61 lines"):
        test_no_module_or_function_outgrows_a_reader()
