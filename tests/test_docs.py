"""The README and docs: every command they show parses as the suite's own parsers read it, every file
they link or name exists, every anchor they link is a heading, and the README stays short."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

import runner
from latency_lab.core import parameters
from latency_lab.run import cli, notebook_run
from latency_lab.run.compare import command as compare

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
GENERATED = {"notebooks/START.md"}  # written by ``tasks.py lab``, git-ignored
COMMAND = re.compile(r"^(?:[A-Z_]+=\S+ )*(?:python3?|\.venv/bin/python) (runner\.py|tasks\.py)\b(.*)$")
SYNOPSIS = re.compile(r"\[(?:[A-Z]|--)|\.\.\.")  # a usage line (``[OPTIONS]``, ``RUN ...``), not a command
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
NAMED_FILE = re.compile(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|json|md|toml|yml|sh|ipynb|png))`")


def shown_commands(text: str) -> list[str]:
    """Every ``runner.py``/``tasks.py`` command a page shows: lines of its code blocks and inline code."""
    lines = []
    for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, flags=re.S):
        lines += [line.split(" # ")[0].strip() for line in block.splitlines()]
    lines += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return [line for line in lines if COMMAND.match(line) and not SYNOPSIS.search(line)]


def check_command(line: str) -> None:
    """Raise (SystemExit from argparse, ValueError from the suite's checks) where ``line`` would be
    refused before any work: a task, subcommand, option or ``-p`` name or value the suite does not take."""
    script, rest = COMMAND.match(line).groups()
    argv = shlex.split(rest)
    if script == "tasks.py":
        if not argv or argv[0] not in ("run", "test", "lab", "install"):
            raise ValueError(f"unknown task in {line!r}")
        if argv[0] == "install" and argv[1:] not in ([], ["--cluster"]):
            raise ValueError(f"tasks.py install takes only --cluster: {line!r}")
        if argv[0] == "run":
            check_command("python runner.py " + shlex.join(argv[1:]))
        return
    if argv[:1] == ["compare"]:
        compare.parser().parse_args(argv[1:])
    elif argv[:1] == ["publish"]:
        cli.publish_parser().parse_args(argv[1:])
    elif argv[:1] == ["ab"]:
        _, rest_argv = cli.ab_parser().parse_known_args(argv[1:])
        check_run_options(rest_argv)
    elif argv[:1] == ["bisect"]:
        _, rest_argv = cli.bisect_parser().parse_known_args(argv[1:])
        check_run_options(rest_argv)
    else:
        check_run_options(argv)


def check_run_options(argv: list[str]) -> None:
    args = runner.parse_args(argv)
    runner.check_args(args)
    values = runner.run_values(args)
    if unknown := sorted(set(values) - set(runner.SETTABLE)):
        raise ValueError(f"-p {unknown[0]}: not a parameter; allowed {', '.join(runner.SETTABLE)}")
    parameters.resolved(values, device=parameters.resolve_device(values["device"]))
    notebook_run.select(notebook_run.discover(notebook_run.NOTEBOOK_DIR), args.notebooks)


def all_commands() -> list[tuple[str, str]]:
    return [(doc.relative_to(ROOT).as_posix(), c) for doc in DOCS for c in shown_commands(doc.read_text())]


@pytest.mark.parametrize(("doc", "line"), all_commands())
def test_every_command_shown_parses(doc, line):
    check_command(line)


def test_the_check_refuses_what_the_runner_refuses():
    for bad in (
        "python runner.py --notebok 01",
        "python runner.py -p layer=2",
        "python runner.py -p dtype=float8",
        "python runner.py compare",
        "python3 tasks.py runn",
        "python runner.py ab --b-pth x",
    ):
        with pytest.raises((SystemExit, ValueError)):
            check_command(bad)


def test_the_docs_show_the_commands_they_should():
    readme = [c for c in all_commands() if c[0] == "README.md"]
    assert {c[1].split()[1] for c in readme} >= {"tasks.py", "runner.py"}
    assert any(" ab " in c[1] for c in readme) and any(" compare " in c[1] for c in readme)
    assert len(all_commands()) >= 20


def headings(path: Path) -> set[str]:
    """GitHub's anchors of a markdown file's headings."""
    out = set()
    for title in re.findall(r"^#+ (.+)$", path.read_text(), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower().replace("`", ""))
        out.add(slug.replace(" ", "-"))
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.relative_to(ROOT).as_posix())
def test_every_link_and_named_file_exists(doc):
    text = doc.read_text()
    missing = []
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            missing.append(target)
        elif anchor and file.suffix == ".md" and anchor not in headings(file):
            missing.append(f"{target} (no such heading)")
    for named in NAMED_FILE.findall(text):
        places = (ROOT / named, ROOT / "latency_lab" / named, doc.parent / named)
        if named not in GENERATED and not any(p.exists() for p in places):
            missing.append(named)
    assert not missing, f"{doc.name} links or names what the tree lacks: {missing}"


def test_the_link_check_catches_a_missing_file(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[gone](gone.md) and `latency_lab/core/gone.py`\n")
    assert LINK.findall(page.read_text()) == ["gone.md"]
    assert NAMED_FILE.findall(page.read_text()) == ["latency_lab/core/gone.py"]
    assert "one-verdict-vocabulary" in headings(ROOT / "docs" / "method.md")


def test_the_readme_is_short_and_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 120
    first_block = re.search(r"```bash\n(.*?)```", text, flags=re.S).group(1)
    assert [line.split("#")[0].split() for line in first_block.strip().splitlines()] == [
        ["python3", "tasks.py", "run"],
        ["python3", "tasks.py", "test"],
    ]
    assert (ROOT / "docs" / "img" / "index-h100.png").stat().st_size < 150_000
