"""``runner.py bisect``: bad input refused before any timing; the reading of a step (``bisect.call``) and
the choice of the next build; real bisections of a synthetic checkout (tests/bisect_repo.py) whose one
commit makes the step 20% longer, and of one where no commit moves it; resuming from the kept steps; the
release form's folders from the real package index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import bisect_repo
import pytest
from conftest import chromium_dom, run_runner

from latency_lab.run import bisect, bisect_builds, bisect_page

# every real bisection here: tiny, CPU, eager, 3 core slots, a step of at most 110 s read against ±12%
STEP = ("--preset", "tiny", "--device", "cpu", "-p", "executors=eager", "-p", "workers=3")
STEP += ("--resolve", "12%", "--budget", "110s")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, list[str]]:
    """8 commits: 5 makes the step 20% longer, 3 breaks the import (4 fixes it)."""
    root = tmp_path_factory.mktemp("bisect") / "repo"
    return root, bisect_repo.make(root, 8, slow_at=5, broken_at=3)


def bisect_cli(*args: str, cache: Path, timeout: int = 1500, env: dict | None = None):
    return run_runner("bisect", *args, timeout=timeout, env={"LATENCY_LAB_CACHE": str(cache), **(env or {})})


def side(change: float, lo: float, hi: float, called: bool) -> dict:
    words = f"{'changed' if called else 'same'}: {change:+g}% ({lo:+g} to {hi:+g}%)"
    return {"change_pct": change, "lo_pct": lo, "hi_pct": hi, "half_width_pct": (hi - lo) / 2, "called": called} | {
        "verdict": words
    }


def step(where: dict | None, bg: dict | None = None, controls: str = "passed", failed: dict | None = None) -> dict:
    """A timed step as ``bisect.time_step`` keeps it: bad +20% against good unless ``bg`` says otherwise."""
    bg = bg or side(20, 15, 25, True)
    mg, mb = (SAME, FASTER) if where and where["vs_middle_pct"] < 0 else (SLOWER, SAME)
    return {"failed": failed or {}, "controls": controls, "bad_vs_good": bg, "mid_vs_good": mg, "mid_vs_bad": mb} | {
        "side": where
    }


def middle(pct: float, lo: float, hi: float, share: float) -> dict:
    return {"vs_middle_pct": pct, "lo_pct": lo, "hi_pct": hi, "share": share, "called": lo > 0 or hi < 0}


SAME, SLOWER, FASTER = side(0.5, -4, 5, False), side(20, 14, 26, True), side(-17, -22, -12, True)
NEAR_GOOD, NEAR_BAD, BETWEEN = middle(-8.5, -11, -6, 0.05), middle(9, 6, 12, 0.95), middle(1, -3, 5, 0.55)


@pytest.mark.parametrize(
    ("where", "extra", "expected", "words"),
    [
        (NEAR_GOOD, {}, "good", "5% of the change at M, -8.5% against the middle of good and bad (-11 to -6%)"),
        (NEAR_BAD, {}, "bad", "95% of the change at M"),
        (BETWEEN, {}, "stop", "M is not told from the middle"),
        (
            NEAR_GOOD,
            {"bg": SAME},
            "stop",
            "bad reads the same as good: the change between them is smaller than this run resolves (±4.5%)",
        ),
        (NEAR_GOOD, {"controls": "A/A called +3%"}, "stop", "the controls failed (A/A called +3%)"),
        (NEAR_GOOD, {"failed": {"M": "1 of 4 workers: ImportError"}}, "skip", "ImportError"),
        (NEAR_GOOD, {"failed": {"B": "4 of 4 workers: ImportError"}}, "stop", "build B could not run"),
    ],
)
def test_a_step_calls_its_midpoint_by_the_side_of_the_middle_its_interval_lies_on(where, extra, expected, words):
    verdict, why = bisect.call(step(where, **extra))
    assert verdict == expected and words in why, why


def test_a_small_second_change_does_not_stop_the_bisection_but_is_named():
    """M 2% off good while the change is 20%: M is on good's side, and the 2% is said."""
    s = step(middle(-8, -9, -7, 0.1))
    s["mid_vs_good"] = side(-2, -3.4, -0.7, True)
    verdict, why = bisect.call(s)
    assert verdict == "good" and "M also differs from good (changed: -2% (-3.4 to -0.7%))" in why, why


def test_the_next_build_is_the_untried_one_nearest_the_middle():
    assert bisect.pick(0, 7, {}) == 3
    assert bisect.pick(0, 7, {3: "broken"}) == 4
    assert bisect.pick(4, 5, {}) is None
    assert bisect.pick(0, 3, {1: "x", 2: "y"}) is None


def test_the_outcome_names_the_first_bad_build_with_its_change_and_how_sure():
    builds = [{"index": i, "name": f"c{i}", "title": f"commit {i}", "ref": f"c{i}"} for i in range(4)]
    s1 = {"step": 1, "good": 0, "bad": 3, "mid": 1, "call": "good", "why": "", "seconds": 10.0, **step(NEAR_GOOD)}
    s2 = {"step": 2, "good": 1, "bad": 3, "mid": 2, "call": "bad", "why": "", "seconds": 10.0, **step(NEAR_BAD)}
    data = {"builds": builds, "steps": [s1, s2], "good": 1, "bad": 2, "stop": None, "status": "complete"}
    data |= {"confidence": 0.95, "skipped": {}, "kind": "commit", "seconds": 25.0}
    out = bisect_page.outcome(data)
    assert out["found"] == "c2" and out["change"]["change_pct"] == 20 and out["sure_pct"] == pytest.approx(90)
    assert "First bad build: c2 (commit 2): +20 (+14 to +26)% against c1" in out["text"]
    rows = {r["build"]: r for r in bisect_page.build_rows(data)}
    assert [r["status"] for r in rows.values()] == ["good", "good", "first bad", "bad"]
    stopped = {**data, "steps": [{**s1, "call": "stop"}], "good": 0, "bad": 3, "stop": "M reads the same as both"}
    assert bisect_page.outcome(stopped)["found"] is None
    assert (
        "No first bad build: between c0 (good) and c3 (bad), M reads the same as both"
        in (bisect_page.outcome(stopped)["text"])
    )


def test_bad_input_is_one_line_and_exit_2_before_any_timing(repo, tmp_path):
    root, commits = repo
    good, bad = commits[0], commits[-1]
    cases = [
        (["--repo", str(tmp_path), "--good", good, "--bad", bad], "invalid --repo"),
        (["--repo", str(root), "--good", "no-such-rev", "--bad", bad], "invalid --good 'no-such-rev': not a commit"),
        (["--repo", str(root), "--good", bad, "--bad", bad], "the same commit as --good"),
        (["--repo", str(root), "--good", bad, "--bad", good], "not an ancestor of --bad"),
        (["--repo", str(root), "--good", commits[3], "--bad", bad], "the build cannot run the step: "),
        (["--repo", str(root), "--good", good, "--bad", bad, "-p", "executors=eager,thunder:torch"], "one executor"),
        (["--repo", str(root), "--good", good, "--bad", bad, "--resolve", "x"], "--resolve"),
        (["--repo", str(root), "--good", good, "--bad", bad, "-p", "planted_pct=[5]"], "plants nothing"),
        (["--package", "not a name", "--good", "1", "--bad", "2"], "invalid --package"),
    ]
    for args, words in cases:
        refused_in_one_line(args, words, tmp_path)


def test_a_release_the_index_lacks_is_one_line_and_exit_2(package_index, tmp_path):
    args = ["--package", "transformers", "--good", "0.0.1", "--bad", "4.46.3"]
    refused_in_one_line(args, "transformers has no such release", tmp_path)


def refused_in_one_line(args: list[str], words: str, tmp_path: Path) -> None:
    proc = bisect_cli(*args, "--output-dir", str(tmp_path / "out"), cache=tmp_path / "cache", timeout=300)
    assert proc.returncode == 2, (args, proc.stdout[-2000:], proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("runner.py bisect: error: ") and words in lines[0], lines
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_no_package_index_is_one_line_and_exit_2(tmp_path):
    proc = bisect_cli(
        *("--package", "transformers", "--good", "4.45.2", "--bad", "4.46.3"),
        cache=tmp_path / "cache",
        timeout=300,
        env={  # pip's configuration files (local mirrors, find-links) left out, its index unreachable
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_FIND_LINKS": str(tmp_path),
            "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
            "PIP_RETRIES": "0",
            "PIP_TIMEOUT": "2",
        },
    )
    assert proc.returncode == 2 and "the package index gave no releases" in proc.stderr, proc.stderr


def test_the_releases_between_two_versions_are_listed_and_one_becomes_a_folder_of_its_own(
    package_index, tmp_path, monkeypatch
):
    """The real index: six's releases 1.14.0 to 1.16.0 listed, 1.15.0's folder importing its own six."""
    monkeypatch.setenv("LATENCY_LAB_CACHE", str(tmp_path / "cache"))
    releases = bisect_builds.Releases("six", "1.14.0", "1.16.0")
    assert [c.name for c in releases.items] == ["1.14.0", "1.15.0", "1.16.0"]
    folder = releases.build(releases.items[1])["path"][0]
    got = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {folder!r}); import six; print(six.__version__)"],
        capture_output=True,
        text=True,
    )
    assert got.stdout.strip() == "1.15.0", got.stderr
    assert (tmp_path / "cache" / "wheels").is_dir() and bisect_builds.unmet(Path(folder)) == []


@pytest.mark.ab_runs
def test_the_bisection_names_the_commit_that_makes_the_step_20pct_longer_and_resumes(repo, tmp_path):
    root, commits = repo
    args = ("--repo", str(root), "--good", commits[0], "--bad", "main", *STEP, "--output-dir", str(tmp_path))
    proc = bisect_cli(*args, "--run-id", "first", cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    print(proc.stdout[-3000:])
    data = json.loads((tmp_path / "first" / "bisect.json").read_text())
    assert data["outcome"]["found"] == commits[5][:12], data["outcome"]
    assert data["skipped"] == {"3": data["skipped"]["3"]} and "SyntaxError" in data["skipped"]["3"]
    assert "skip " + commits[3][:12] in proc.stdout and "step 1: " in proc.stdout
    change = data["outcome"]["change"]
    assert change["lo_pct"] > 0, change  # the commit's step is longer than its parent's, the interval says so
    assert not list((tmp_path / "cache" / "worktrees").rglob("latency_lab"))  # the worktrees are removed
    dom = chromium_dom((tmp_path / "first" / "bisect.html").as_uri(), tmp_path / "profile")
    assert "First bad build: " + commits[5][:12] in dom and "Builds in order" in dom
    again = bisect_cli(*args, "--run-id", "again", cache=tmp_path / "cache", timeout=600)
    assert again.returncode == 0 and "taken from an earlier run" in again.stdout, again.stdout[-3000:]
    resumed = json.loads((tmp_path / "again" / "bisect.json").read_text())
    assert resumed["outcome"]["found"] == data["outcome"]["found"] and resumed["seconds"] < 120


@pytest.mark.ab_runs
def test_a_range_where_no_commit_moves_the_step_says_so(tmp_path):
    root = tmp_path / "repo"
    commits = bisect_repo.make(root, 4, slow_at=None)
    proc = bisect_cli(
        *("--repo", str(root), "--good", commits[0], "--bad", commits[-1], *STEP, "--output-dir", str(tmp_path)),
        *("--run-id", "flat"),
        cache=tmp_path / "cache",
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = json.loads((tmp_path / "flat" / "bisect.json").read_text())["outcome"]
    print(out["text"])
    assert out["found"] is None and "smaller than this run resolves" in out["text"], out


def test_the_side_of_the_middle_is_read_from_the_slots():
    """Arms on 4 slots whose cores differ by 8%, 30 rounds: M at good's level, B 20% slower; M's interval lies
    on good's side and carries little of the change; M halfway is not told from the middle."""
    import random

    from latency_lab.core import paired

    rng = random.Random(1)
    cores = [1 + rng.gauss(0, 0.08) for _ in range(4)]

    def arm(level: float) -> list[paired.Series]:  # each worker 2% off its arm (SD), each block 3%
        workers = [level * core * (1 + rng.gauss(0, 0.02)) for core in cores]
        return [paired.Series(str(i), [w * (1 + rng.gauss(0, 0.03)) for _ in range(30)]) for i, w in enumerate(workers)]

    a, b, near, half = arm(1.0), arm(1.2), arm(1.0), arm(1.2**0.5)
    where = paired.side_of("host_ms", a, b, near)
    assert where["called"] and where["hi_pct"] < 0 and abs(where["share"]) < 0.3, where
    where = paired.side_of("host_ms", a, b, half)
    assert not where["called"] and 0.3 < where["share"] < 0.7, where


class Adjacent:
    """Two builds and nothing between them: a bisection's one step times bad against good directly."""

    kind = "commit"
    items = [bisect_builds.Candidate("c0", "commit 0", "c0"), bisect_builds.Candidate("c1", "commit 1", "c1")]

    def identity(self) -> dict:
        return {"commits": ["c0", "c1"]}

    def build(self, c) -> dict:
        return {}


def test_adjacent_builds_are_one_direct_step_named_first_bad_or_not(monkeypatch, tmp_path):
    """bisect.run with the timing replaced by a step's record: bad against good changed names bad, same
    stops; the page reads both."""
    from latency_lab.core import parameters

    p = parameters.resolved(preset="tiny", device="cpu", executors="eager", build_b={})
    for bg, found in ((SLOWER, "c1"), (SAME, None)):
        monkeypatch.setenv("LATENCY_LAB_CACHE", str(tmp_path / str(found)))  # no step read back from the other
        record = step(None, bg) | {"aa": "same", "stopping": "", "resolved": True, "seconds": 1.0}
        monkeypatch.setattr(bisect, "time_step", lambda *_, record=record: record)
        monkeypatch.setattr(bisect, "imported", lambda build: ("torch",))
        data = bisect.run(Adjacent(), p)
        assert [s["mid"] for s in data["steps"]] == [None] and data["bad"] == 1, data
        assert bisect_page.outcome(data)["found"] == found, bisect_page.outcome(data)
        assert "Builds in order" in bisect_page.to_html(data)


def test_a_step_whose_a_a_is_called_is_timed_once_more_and_only_the_second_timing_is_read(monkeypatch, tmp_path):
    """The A/A control called at 95% in about 1 step of 20: the step is timed again with fresh workers; a
    second timing whose controls pass is read (bad found), one whose controls fail again stops."""
    from latency_lab.core import parameters

    p = parameters.resolved(preset="tiny", device="cpu", executors="eager", build_b={})
    called = step(None, SLOWER, controls="A/A called -3.5%") | {"aa": "changed", "stopping": "", "resolved": True}
    passed = step(None, SLOWER) | {"aa": "same", "stopping": "", "resolved": True}
    for second, found in ((passed, "c1"), (called, None)):
        monkeypatch.setenv("LATENCY_LAB_CACHE", str(tmp_path / str(found)))
        timings = iter([called | {"seconds": 1.0}, second | {"seconds": 1.0}])
        monkeypatch.setattr(bisect, "time_step", lambda *_: next(timings))
        monkeypatch.setattr(bisect, "imported", lambda build: ("torch",))
        data = bisect.run(Adjacent(), p)
        assert [s["call"] for s in data["steps"]][0] == "again", data["steps"]
        assert "its controls failed: again with fresh workers" in data["steps"][0]["why"]
        assert bisect_page.outcome(data)["found"] == found, bisect_page.outcome(data)
