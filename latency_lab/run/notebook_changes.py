"""Which notebooks of a run differ from the committed ones (git): a batch run records them in its
summary, since an edited cell (JupyterLab's autosave writes into the tracked files) changes what the
run computed. Outputs, execution counts and metadata other than cell tags are not differences."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


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


def changes(notebooks: dict[str, Path]) -> dict[str, str]:
    """``{name: what differs}`` for the notebooks whose cells differ from the committed ones."""
    return {name: found for name, path in notebooks.items() if (found := change(path))}
