"""The folders runs live in: ``--output-dir`` checked, a fresh run folder made, the ``latest`` link
moved to the last usable run, and what a run folder or a published copy of one is."""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from datetime import datetime
from pathlib import Path

from ..core.parameters import short
from ..core.results import AB_BUILDS, INTERACTIVE, SUFFIX

LATEST = "latest"
RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
MAX_RUN_ID = 100  # with the cache folder's and compare reports' names around it, file names stay < 255


class SetupError(ValueError):
    """Bad input or an unusable output folder: one line on stderr, exit 2, nothing written."""


def check_run_id(run_id: str | None) -> None:
    if run_id is not None and (
        len(run_id) > MAX_RUN_ID or not RUN_ID.fullmatch(run_id) or run_id.lower() in (LATEST, INTERACTIVE)
    ):
        raise SetupError(
            f"invalid --run-id {short(run_id)}: allowed a plain name of at most {MAX_RUN_ID} letters, "
            f"digits, '.', '_', '-' (no '/', no leading '.', not '{LATEST}' or '{INTERACTIVE}' in any case)"
        )


def is_run(folder: Path) -> bool:
    """Whether ``folder`` is a run folder or a published copy of one: it holds results files, or the
    summary and index an interrupted run leaves."""
    return folder.is_dir() and (usable(folder) or all((folder / f).is_file() for f in ("summary.json", "index.html")))


def usable(folder: Path) -> bool:
    """Whether a run can be read (compared, shown): it holds at least one results file, written by a
    notebook that finished."""
    return any(folder.glob(f"*{SUFFIX}"))


def last_usable(root: Path) -> Path | None:
    """The last usable run of the investigation under ``root``, the one ``latest`` names: of its run
    folders (published copies and the notebooks' scratch folder ``interactive`` apart) that hold a
    results file of a notebook other than 08, the one that wrote one last; None where none does. A
    run of 08 alone (``runner.py ab``) answers another question and is never it; a run interrupted
    before its first notebook finished is never it; one that finished some is."""
    newest = {}
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if folder.name in (LATEST, INTERACTIVE) or not folder.is_dir() or is_published(folder):
            continue
        try:
            written = [f.stat().st_mtime for f in folder.glob(f"*{SUFFIX}") if f.name != f"{AB_BUILDS}{SUFFIX}"]
        except OSError:  # removed meanwhile
            continue
        if written:
            newest[folder] = max(written)
    return max(newest, key=newest.get, default=None)


def is_published(folder: Path) -> bool:
    """Whether ``folder`` is a published copy (``runner.py publish``): a summary and no executed
    notebooks. Nothing writes into one."""
    return (folder / "summary.json").is_file() and not any(folder.glob("*.ipynb"))


def enclosing_run(path: Path) -> Path | None:
    """The run folder (or published copy) that ``path`` is or lies inside, if any."""
    return next((f for f in (path, *path.parents) if is_run(f)), None)


def output_root(path: str) -> Path:
    """The folder that holds the runs, created if missing. A setup error: a file, a path under a
    file, a folder that cannot be written, one inside a run folder (``outputs/latest``: runs would
    nest), and one whose ``latest`` is not the link this runner keeps."""
    root = Path(path)
    try:
        inside = enclosing_run(root.resolve())
    except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop
        raise SetupError(f"invalid --output-dir {short(path)}: {getattr(e, 'strerror', None) or e}") from None
    if inside:
        where = "" if inside == root.resolve() else "inside "
        raise SetupError(
            f"invalid --output-dir {short(path)}: it is {where}the run folder {short(str(inside))}; "
            f"give the folder that holds the runs, e.g. {inside.parent}"
        )
    try:
        root.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise SetupError(f"invalid --output-dir {short(path)}: it, or a folder above it, is a file") from None
    except OSError as e:
        raise SetupError(f"invalid --output-dir {short(path)}: cannot create it ({e.strerror or e})") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise SetupError(f"invalid --output-dir {short(path)}: not writable")
    latest = root / LATEST
    if latest.exists() and not latest.is_symlink():
        kind = "folder" if latest.is_dir() else "file"
        raise SetupError(
            f"invalid --output-dir {short(path)}: its {LATEST} is a {kind}, not the link to the newest "
            "run that runner.py keeps there; move it away or use another folder"
        )
    return root


def new_run_dir(root: Path, run_id: str | None, preset: str, device: str) -> Path:
    """A fresh run folder inside ``root``; an existing one is never reused."""
    base = run_id or f"{datetime.now():%Y%m%d-%H%M%S}-{preset}-{device.replace(':', '')}"
    for n in range(1, 2 if run_id else 1000):
        path = root / (base if n == 1 else f"{base}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            if run_id:
                raise SetupError(f"invalid --run-id {run_id!r}: {path} exists and runs are never overwritten") from None
        except OSError as e:
            raise SetupError(f"cannot make the run folder {short(str(path))}: {e.strerror or e}") from None
    raise SetupError(f"no free run folder for {base} in {root}")


def latest_target(root: Path) -> str | None:
    """The name of the folder ``root/latest`` points at, or None where it is not a link."""
    try:
        return os.readlink(root / LATEST)
    except OSError:
        return None


def point_latest(root: Path, run_dir: Path) -> str | None:
    """``root/latest`` -> ``run_dir``, replaced atomically through a temporary link of this process's
    own. Returns what went wrong, or None: a ``latest`` that is not a link (made since the start) is
    left as it is, and so is the old link when a new one cannot be made (a full disk)."""
    latest = root / LATEST
    if latest.exists() and not latest.is_symlink():
        return f"{latest} is not a link; left as it is, not pointed at {run_dir.name}"
    tmp = root / f".{LATEST}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    try:
        tmp.symlink_to(run_dir.name)
        os.replace(tmp, latest)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        return f"could not point {latest} at {run_dir.name}: {e.strerror or e}"
    return None


def latest_moved(root: Path, before: str | None, last: Path | None) -> str:
    """What became of ``root/latest`` when the run that just ended wrote no results: it stays, or it
    now names ``last`` (the last usable run), or there is none."""
    link = root / LATEST
    if last is None:
        return f"no run in {root} did, so there is no {link}"
    after = latest_target(root)
    if after != last.name:
        return f"{link} could not be pointed at {last.name}, the last usable run (see the error above)"
    if before == after:
        return f"{link} stays at {last.name}, the last usable run"
    was = f"it pointed at {before}" if before else "there was none"
    return f"{link} now points at {last.name}, the last usable run ({was})"


def remove_temporaries(run_dir: Path) -> None:
    """Temporary files (``.NAME.tmp``, ``.NAME.<pid>.<id>.tmp``) that writes cut short by a full disk
    or a killed kernel left in the run folder; called once nothing writes there any more."""
    for tmp in run_dir.glob(".*.tmp"):
        tmp.unlink(missing_ok=True)


def check_writable(root: Path, given: str) -> None:
    """A folder the run folder can be made in, tried with a folder made and removed again (as root,
    ``os.access`` says yes to ``/proc``, where nothing can be made)."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".writable-", dir=root))
    except OSError:
        raise SetupError(f"invalid --output-dir {short(given)}: not writable") from None
