"""Which notebooks of a run differ from the committed ones (git): a batch run records them in its
summary, since an edited cell (JupyterLab's autosave writes into the tracked files) changes what the
run computed. Outputs, execution counts and metadata other than cell tags are not differences. A
parameters cell whose values differ from the package's defaults is named too: a run injects the
package's values over it, so its edits are ignored (``ignored_edits``)."""

from __future__ import annotations

import ast
import json
import shlex
import subprocess
from pathlib import Path

from ..core import parameters


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=60)


def cells(text: str) -> list[tuple]:
    """A notebook's cells as (type, source, tags): what a run executes and how papermill sees it."""

    def source(cell):
        s = cell.get("source", "")
        return "".join(s) if isinstance(s, list) else s

    return [
        (c.get("cell_type"), source(c), tuple(c.get("metadata", {}).get("tags", [])))
        for c in json.loads(text).get("cells", [])
    ]


def change(path: Path) -> str | None:
    """What differs between ``path``'s cells and the committed version's (HEAD), in words; None when
    nothing does, or when there is no commit to compare with (not a git checkout, no git)."""
    path = Path(path).resolve()
    try:
        top = _git(path.parent, "rev-parse", "--show-toplevel")
    except (OSError, subprocess.SubprocessError):
        return None
    if top.returncode:
        return None
    rel = path.relative_to(Path(top.stdout.strip()).resolve()).as_posix()
    committed = _git(path.parent, "show", f"HEAD:{rel}")
    if committed.returncode:
        return "not committed"
    head = _git(path.parent, "rev-parse", "--short", "HEAD").stdout.strip()
    try:
        old, new = cells(committed.stdout), cells(path.read_text(encoding="utf-8"))
    except ValueError as e:
        return f"unreadable: {e}"
    if old == new:
        return None
    if len(old) != len(new):
        return f"{len(new)} cells, {len(old)} in the committed notebook ({head})"
    differ = [str(i) for i, (a, b) in enumerate(zip(old, new), 1) if a != b]
    return (
        f"cell{'s' if len(differ) > 1 else ''} {', '.join(differ)} of {len(new)} "
        f"differ{'' if len(differ) > 1 else 's'} from the committed notebook ({head})"
    )


def ignored_edits(name: str, path: Path) -> dict[str, str]:
    """The parameters whose value in notebook ``name``'s parameters cell differs from the package's
    default (``parameters.notebook_defaults``), each as a ``-p`` argument's value: a run injects the
    package's values (or ``-p``'s) over the cell. ``output_dir``, which the runner sets, is left out;
    so is a notebook that cannot be read."""
    defaults = parameters.notebook_defaults(name)
    try:
        source = "\n".join(s for _, s, tags in cells(Path(path).read_text(encoding="utf-8")) if "parameters" in tags)
        body = ast.parse(source).body
    except (OSError, ValueError, SyntaxError):
        return {}
    edits = {}
    for node in body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        key = node.targets[0].id
        if key not in defaults or key == "output_dir":
            continue
        default = list(defaults[key]) if isinstance(defaults[key], tuple) else defaults[key]
        try:
            value = ast.literal_eval(node.value)
        except ValueError:  # an expression: not the package's value either
            edits[key] = ast.unparse(node.value)
            continue
        if value != default:
            edits[key] = value if isinstance(value, str) and parameters.parse_value(value) == value else repr(value)
    return edits


def ignored_line(name: str, path: Path) -> str | None:
    """A sentence naming the parameters whose edits in the notebook's parameters cell a run ignores,
    and how to pass them; None where there are none."""
    edits = ignored_edits(name, path)
    if not edits:
        return None
    given = " ".join(f"-p {shlex.quote(f'{k}={v}')}" for k, v in edits.items())
    return (
        f"its parameters cell's edits of {', '.join(edits)} are ignored (a run injects the package's values); "
        f"to run with them: {given}"
    )


def changes(notebooks: dict[str, Path]) -> dict[str, str]:
    """``{name: what differs}`` for the notebooks whose cells differ from the committed ones, or
    whose parameters cell's edits a run ignores (``ignored_line``)."""
    found = {name: [change(path), ignored_line(name, path)] for name, path in notebooks.items()}
    return {name: "; ".join(filter(None, said)) for name, said in found.items() if any(said)}
