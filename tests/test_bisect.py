"""``runner.py bisect``: bad input refused before any timing; the reading of a step (``bisect.call``), of
step 0 (``bisect.ends``), of the culprit against its parent (``bisect.culprit``) and of how a bisection ended
(``bisect.conclusion``), and the choice of the next build; bisections over stand-in timings (the order of the
steps, the culprit timed afresh); real bisections of a synthetic checkout (tests/bisect_repo.py) whose one
commit makes the step 20% longer (culprit confirmed), and of one where no commit moves it (not confirmed at
step 0); resuming from the kept steps; the release form's folders from the real package index."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import bisect_repo
import pytest
from conftest import chromium_dom, run_runner

from latency_lab.instruments import counts
from latency_lab.run import bisect, bisect_builds, bisect_counts, bisect_page

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


def timed(n: int, role: str, call: str, good: int, bad: int, mid: int | None = None, **record) -> dict:
    """A step as ``bisect.attempts`` appends it: its number, role, bracket and call, then its timing."""
    where = record.pop("where", NEAR_GOOD if call == "good" else NEAR_BAD if mid is not None else None)
    kept = step(where, record.pop("bg", None)) | {"seconds": 10.0} | record
    return {"step": n, "role": role, "good": good, "bad": bad, "mid": mid, "call": call, "why": call} | kept


NAMES = ["c0", "c1", "c2", "c3"]
ENDS = timed(0, bisect.ENDS, "confirmed", 0, 3)  # +20% (+15 to +25%)
CLOSED = [ENDS, timed(1, bisect.MIDPOINT, "good", 0, 3, 1), timed(2, bisect.MIDPOINT, "bad", 1, 3, 2)]


@pytest.mark.parametrize(
    ("bg", "expected", "words"),
    [
        (SLOWER, "confirmed", "bad +20% (+14 to +26%) against good, ±6% within a third (6.7%)"),
        (side(20, 5, 35, True), "stop", "change confirmed but not resolved to a third of its size: bad +20% (+5 to"),
        (side(20, 5, 35, True), "stop", "±15% where a third of the change is 6.7%"),
        (SAME, "stop", "change not confirmed between the ends (bad +0.5% (-4 to +5%) against good): bad reads the"),
        (side(-17, -22, -12, True), "confirmed", "bad -17% (-22 to -12%) against good"),
    ],
)
def test_step_0_bisects_only_a_change_it_tells_apart_within_a_third_of_its_size(bg, expected, words):
    verdict, why = bisect.ends(step(None, bg))
    assert verdict == expected and words in why, why


def test_where_counts_tell_the_ends_apart_step_0_needs_only_a_called_change():
    """The third guards timed midpoints; counted ones need none (docs/method.md, 2026-12-08). A change not
    called stays unconfirmed, counts or not."""
    verdict, why = bisect.ends(step(None, side(20, 5, 35, True)), counted_apart=True)
    assert verdict == "confirmed" and "wider than a third, 6.7%, but the counts tell the ends apart" in why, why
    assert bisect.ends(step(None, SAME), counted_apart=True)[0] == "stop"


@pytest.mark.parametrize(
    ("verified", "expected", "words"),
    [
        (side(18, 12, 24, True), "confirmed", "the culprit +18% (+12 to +24%) against its parent; the ends +20%"),
        (side(8, 5, 11, True), "confirmed", "+8%"),  # its interval reaches half the ends' change
        (side(5, 3, 7, True), "stop", "short of half the ends' change (+20%, half 10%): more than one change"),
        (side(-15, -20, -10, True), "stop", "short of half the ends' change"),  # the other way
        (SAME, "stop", "the culprit (bad) against its parent (good) in fresh workers: bad reads the same as good"),
    ],
)
def test_the_culprit_is_confirmed_where_its_change_can_carry_half_the_ends(verified, expected, words):
    verdict, why = bisect.culprit(step(None, verified), SLOWER)
    assert verdict == expected and words in why, why


def test_step_0_confirmed_but_too_wide_is_timed_again_a_same_resolved_one_is_not():
    wide = step(None, side(20, 5, 35, True)) | {"resolved": True}
    assert bisect.again(wide, bisect.ENDS) == "its interval did not reach a third of the change"
    assert bisect.again(wide, bisect.MIDPOINT) is None  # a midpoint step is read against the target only
    assert bisect.again(step(None, SAME) | {"resolved": True}, bisect.ENDS) is None
    assert bisect.again(step(None, SAME) | {"resolved": False}, bisect.ENDS) == "its interval did not reach the target"


@pytest.mark.parametrize(
    ("steps", "call", "words"),
    [
        ([*CLOSED, timed(3, bisect.CULPRIT, "confirmed", 1, 2, bg=side(19, 14, 24, True))], bisect.CONFIRMED, ""),
        (
            [*CLOSED, timed(3, bisect.CULPRIT, "stop", 1, 2, bg=side(5, 3, 7, True)) | {"why": "more than one"}],
            bisect.NO_CULPRIT,
            "more than one",
        ),
        ([timed(0, bisect.ENDS, "stop", 0, 3, bg=SAME) | {"why": "change not confirmed"}], bisect.NOT_CONFIRMED, ""),
        (
            [ENDS, timed(1, bisect.MIDPOINT, "stop", 0, 3, 1, where=BETWEEN) | {"why": "M is not told"}],
            bisect.NO_CULPRIT,
            "step 1 (c1 between c0 and c3): M is not told",
        ),
        ([ENDS], bisect.NO_CULPRIT, "the first bad build is one of c1, c2, c3: the builds between c0 (good)"),
    ],
)
def test_the_outcome_is_a_confirmed_culprit_a_confirmed_regression_without_one_or_not_confirmed(steps, call, words):
    """Read from hand-made steps: a culprit confirmed against its parent; one whose change is a quarter of the
    ends' (no culprit, why); the ends not told apart (nothing bisected); a midpoint that stopped; every build
    between skipped."""
    out = bisect.conclusion(steps, NAMES, "complete")
    assert out["call"] == call and words in out["why"], out
    assert out["found"] == ("c2" if call == bisect.CONFIRMED else None), out
    assert out["ends"] == steps[0]["bad_vs_good"]
    assert (out["verified"] is not None) == (steps[-1]["role"] == bisect.CULPRIT), out
    assert bisect.conclusion(steps, NAMES, "interrupted")["call"] == bisect.INTERRUPTED


def test_the_page_says_the_outcome_first_with_both_intervals_and_how_sure():
    builds = [{"index": i, "name": f"c{i}", "title": f"commit {i}", "ref": f"c{i}"} for i in range(4)]
    steps = [*CLOSED, timed(3, bisect.CULPRIT, "confirmed", 1, 2, bg=side(19, 14, 24, True))]
    data = {"builds": builds, "steps": steps, "good": 1, "bad": 2, "stop": None, "status": "complete"}
    data |= {"confidence": 0.95, "skipped": {}, "kind": "commit", "seconds": 45.0, "executor": "eager", "state": "-"}
    data |= {"params": {"preset": "tiny", "device": "cpu", "executors": ["eager"], "resolve_pct": 12, "workers": 3}}
    data |= {"outcome": bisect.conclusion(steps, NAMES, "complete")}
    out = bisect_page.outcome(data)
    assert out["found"] == "c2" and out["verified"]["change_pct"] == 19 and out["sure_pct"] == pytest.approx(80)
    assert out["text"].startswith("Culprit confirmed: c2 (commit 2), +19 (+14 to +24)% against its parent c1 in fresh")
    assert "the ends +20 (+15 to +25)% (c3 against c0, step 0)" in out["text"]
    rows = {r["build"]: r for r in bisect_page.build_rows(data)}
    assert [r["status"] for r in rows.values()] == ["good", "good", "first bad", "bad"]
    assert rows["c2"]["step"] == 3 and rows["c2"]["against good (%)"].value == "+19 (+14 to +24) vs c1"
    assert rows["c3"]["against good (%)"].value == "+20 (+15 to +25) vs c0"  # step 0
    assert "<h2>Outcome: culprit confirmed</h2>" in bisect_page.to_html(data)
    flat = [timed(0, bisect.ENDS, "stop", 0, 3, bg=SAME) | {"why": "change not confirmed between the ends"}]
    data |= {"steps": flat, "good": 0, "bad": 3, "outcome": bisect.conclusion(flat, NAMES, "complete")}
    assert bisect_page.outcome(data)["found"] is None
    assert bisect_page.outcome(data)["text"] == f"Not confirmed, nothing bisected: {flat[0]['why']}."
    assert "<h2>Outcome: not confirmed</h2>" in bisect_page.to_html(data)


def test_a_steps_a_a_control_is_a_second_instance_of_good_a_copy_of_its_worktree(repo, tmp_path, monkeypatch):
    """A step's A' (``Session``'s workers, ``remote.workers_for``) runs good's code from a copy of its worktree in
    the step's own folder (``builds.second_instance``): the same files in another folder, without git's."""
    from latency_lab.core import parameters
    from latency_lab.studies.ab import remote

    monkeypatch.setenv("LATENCY_LAB_CACHE", str(tmp_path / "cache"))
    root, commits = repo
    cands = bisect_builds.Commits(str(root), commits[0], commits[2])
    try:
        good, bad = (cands.build(c) for c in (cands.items[0], cands.items[-1]))
        p = parameters.resolved(preset="tiny", device="cpu", executors="eager", workers=2, build_a=good, build_b=bad)
        workers = remote.workers_for(p, tmp_path / "session")
        assert {w.build.path for w in workers if w.arm == remote.A} == {tuple(good["path"])}
        ((copy,),) = {w.build.path for w in workers if w.arm == remote.TWIN}
        assert Path(copy).is_relative_to(tmp_path / "session") and Path(copy).name == Path(good["path"][0]).name
        marker = Path("latency_lab", "core", "planted.py")
        assert (Path(copy) / marker).read_text() == (Path(good["path"][0]) / marker).read_text()
        assert (Path(good["path"][0]) / ".git").exists() and not (Path(copy) / ".git").exists()
    finally:
        cands.close()


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
    refused_in_one_line(args, "transformers has no such release (nearest: ", tmp_path)


def test_a_missing_release_names_the_releases_either_side_of_it():
    available = ["4.44.0", "4.45.2", "4.46.2", "4.46.3", "4.47.0", "5.0.0"]
    assert bisect_builds.nearest(available, "4.46.0") == ["4.44.0", "4.45.2", "4.46.2", "4.46.3"]
    assert bisect_builds.nearest(available, "9.0") == ["4.47.0", "5.0.0"]
    assert bisect_builds.nearest(available, "0.1") == ["4.44.0", "4.45.2"]


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
def test_the_bisection_confirms_the_commit_that_makes_the_step_20pct_longer_and_resumes(repo, tmp_path):
    """Step 0 confirms the ends, whose counts differ by the one call commit 5 wraps every step in; commit 3
    (broken) is skipped, the midpoints take their sides by their counts, closing on commits 4 and 5, and 5 is
    timed against 4 in fresh workers: culprit confirmed, the last line of the output says so."""
    root, commits = repo
    args = ("--repo", str(root), "--good", commits[0], "--bad", "main", *STEP, "--output-dir", str(tmp_path))
    proc = bisect_cli(*args, "--run-id", "first", cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    print(proc.stdout[-3000:])
    data = json.loads((tmp_path / "first" / "bisect.json").read_text())
    out = data["outcome"]
    assert out["call"] == "culprit confirmed" and out["found"] == commits[5][:12], out
    roles = [s["role"] for s in data["steps"] if s["call"] != "again"]
    assert roles[0] == "ends" and roles[-1] == "culprit" and set(roles[1:-1]) == {"counted"}, data["steps"]
    said = data["counts"]["text"]
    assert "python function starts +1 per step" in said and "_longer" in said
    assert "c calls" not in said  # the busy wait's calls vary from step to step: not what tells the ends apart
    assert (data["steps"][-1]["good"], data["steps"][-1]["bad"], data["steps"][-1]["mid"]) == (4, 5, None)
    assert data["skipped"] == {"3": data["skipped"]["3"]} and "SyntaxError" in data["skipped"]["3"]
    assert "skip " + commits[3][:12] in proc.stdout and "step 1: " in proc.stdout
    assert out["verified"]["lo_pct"] > 0 and out["ends"]["lo_pct"] > 0, out  # longer, as both intervals say
    assert proc.stdout.strip().splitlines()[-1].startswith(f"bisect: Culprit confirmed: {commits[5][:12]}")
    assert not list((tmp_path / "cache" / "worktrees").rglob("latency_lab"))  # the worktrees are removed
    dom = chromium_dom((tmp_path / "first" / "bisect.html").as_uri(), tmp_path / "profile")
    assert "Outcome: culprit confirmed" in dom and "Culprit confirmed: " + commits[5][:12] in dom
    assert "Builds in order" in dom
    again = bisect_cli(*args, "--run-id", "again", cache=tmp_path / "cache", timeout=600)
    assert again.returncode == 0 and "taken from an earlier run" in again.stdout, again.stdout[-3000:]
    resumed = json.loads((tmp_path / "again" / "bisect.json").read_text())
    assert resumed["outcome"]["found"] == out["found"] and resumed["seconds"] < 120
    assert (
        f"read back from an earlier run of the same bisection, not timed now: remove {resumed['state']}" in again.stdout
    )


@pytest.mark.ab_runs
def test_a_range_where_no_commit_moves_the_step_is_not_confirmed_at_step_0(tmp_path):
    root = tmp_path / "repo"
    commits = bisect_repo.make(root, 4, slow_at=None)
    proc = bisect_cli(
        *("--repo", str(root), "--good", commits[0], "--bad", commits[-1], *STEP, "--output-dir", str(tmp_path)),
        *("--run-id", "flat"),
        cache=tmp_path / "cache",
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    data = json.loads((tmp_path / "flat" / "bisect.json").read_text())
    out = data["outcome"]
    print(out["text"])
    assert out["call"] == "not confirmed" and out["found"] is None, out
    assert {s["role"] for s in data["steps"]} == {"ends"} and {s["mid"] for s in data["steps"]} == {None}
    assert "change not confirmed between the ends" in out["text"], out
    assert proc.stdout.strip().splitlines()[-1].startswith("bisect: Not confirmed, nothing bisected: change not")


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


class Range:
    """Builds c0, c1, ... whose steps take ``levels[i]``, and a stand-in for ``bisect.time_step`` that reads a
    timing from the levels (bad against good ±4%, M against the middle ±3%) and notes what it timed: (good,
    bad, M or None)."""

    kind = "commit"

    def __init__(self, levels: list[float], calls: list[int] | None = None):
        self.levels, self.timed, self.counted = levels, [], []
        self.calls = calls or [100] * len(levels)  # Python calls per step (``count``)
        self.items = [bisect_builds.Candidate(f"c{i}", f"commit {i}", f"c{i}") for i in range(len(levels))]

    def identity(self) -> dict:
        return {"commits": [c.ref for c in self.items]}

    def build(self, c) -> dict:
        return {"ref": c.ref}

    def time_step(self, p, mid: dict | None, seed: int) -> dict:
        a, b, m = (None if x is None else int(x["ref"][1:]) for x in (p.build_a, p.build_b, mid))
        self.timed.append((a, b, m))
        la, lb = self.levels[a], self.levels[b]
        change = 100 * (lb / la - 1)
        where = None
        if m is not None:
            x = 100 * (self.levels[m] / math.sqrt(la * lb) - 1)
            where = middle(x, x - 3, x + 3, (self.levels[m] - la) / (lb - la))
        record = step(where, side(change, change - 4, change + 4, abs(change) > 4))
        return record | {"aa": "same", "stopping": "", "resolved": True, "seconds": 1.0}

    def count(self, p, build_dicts: list[dict]) -> list[dict]:
        """A stand-in for ``bisect_counts.count``: each build's step makes ``calls[i]`` Python calls of one
        function; notes what it counted."""
        out = []
        for b in build_dicts:
            i = int(b["ref"][1:])
            self.counted.append(i)
            c = counts.Counts(
                {"python_function_starts": self.calls[i], "python_c_calls": 7}, {}, {}, {"m.py:f": self.calls[i]}
            )
            out.append(c.to_dict() | {"seconds": 0.5})
        return out


def bisected(monkeypatch, tmp_path: Path, builds: Range, timings=None) -> dict:
    """``bisect.run`` over ``builds`` with their stand-in timing (or the records of ``timings`` in turn), in a
    cache of its own."""
    from latency_lab.core import parameters

    monkeypatch.setenv("LATENCY_LAB_CACHE", str(tmp_path / "-".join(map(str, builds.levels))))
    monkeypatch.setattr(bisect, "time_step", builds.time_step if timings is None else lambda *_: next(timings))
    monkeypatch.setattr(bisect, "imported", lambda build: ("torch",))
    monkeypatch.setattr(bisect, "why_not", lambda *_: None)
    monkeypatch.setattr(bisect_counts, "count", builds.count)
    return bisect.run(builds, parameters.resolved(preset="tiny", device="cpu", executors="eager", build_b={}))


def test_where_the_ends_count_apart_the_midpoints_are_counted_and_only_the_ends_and_the_culprit_timed(
    monkeypatch, tmp_path
):
    """c3 adds one Python call per step and makes it 20% longer: step 0 times the ends, their counts differ by
    one call of m.py:f, every midpoint takes its side by its counts (no rounds), the culprit is timed."""
    builds = Range([1.0] * 3 + [1.2] * 5, calls=[100] * 3 + [101] * 5)
    data = bisected(monkeypatch, tmp_path, builds)
    assert builds.timed == [(0, 7, None), (2, 3, None)], builds.timed
    assert [s["role"] for s in data["steps"]] == ["ends", "counted", "counted", "counted", "culprit"]
    assert data["outcome"]["call"] == bisect.CONFIRMED and data["outcome"]["found"] == "c3", data["outcome"]
    assert "python function starts +1 per step" in data["counts"]["text"] and "m.py:f: +1" in data["counts"]["text"]
    said = bisect_page.text(data)
    assert "Counts of the ends: counts changed" in said and "3 timed steps" not in said and "2 timed steps" in said


def test_a_bisection_run_again_says_its_steps_were_read_back_and_how_to_time_them_again(monkeypatch, tmp_path):
    builds = Range([1.0, 1.0, 1.2, 1.2])
    first = bisected(monkeypatch, tmp_path, builds)
    assert "read back" not in bisect_page.text(first)
    again = bisected(monkeypatch, tmp_path, builds)
    assert builds.timed == [(0, 3, None), (0, 3, 1), (1, 3, 2), (1, 2, None)], builds.timed  # the first run's alone
    assert (
        f"4 timed steps read back from an earlier run of the same bisection, not timed now: remove {again['state']}"
        in (bisect_page.text(again))
    )


def test_a_count_that_moves_elsewhere_than_the_time_leaves_no_culprit(monkeypatch, tmp_path):
    """The counts move at c5, the time at c3: the counts lead to c5, whose timing against c4 shows no change,
    so the regression stands confirmed with no culprit, never a wrong one."""
    builds = Range([1.0] * 3 + [1.2] * 5, calls=[100] * 5 + [101] * 3)
    data = bisected(monkeypatch, tmp_path, builds)
    assert builds.timed[-1] == (4, 5, None), builds.timed
    assert data["outcome"]["call"] == bisect.NO_CULPRIT and data["outcome"]["found"] is None, data["outcome"]


def test_a_midpoint_counted_like_neither_end_is_timed(monkeypatch, tmp_path):
    builds = Range([1.0, 1.0, 1.2, 1.2], calls=[100, 100, 102, 101])
    data = bisected(monkeypatch, tmp_path, builds)
    assert builds.timed == [(0, 3, None), (1, 3, 2), (1, 2, None)], builds.timed  # c1 counted like good, c2 timed
    assert [s["role"] for s in data["steps"]] == ["ends", "counted", "midpoint", "culprit"], data["steps"]
    assert data["outcome"]["found"] == "c2", data["outcome"]


def test_a_confirmed_change_is_bisected_and_its_culprit_timed_again_against_its_parent(monkeypatch, tmp_path):
    """c2 makes the step 20% longer: step 0 confirms the ends, two midpoints close the bracket on c1 and c2
    (step 2 timed c2 against c1 in its rounds), and the culprit is timed against its parent once more."""
    builds = Range([1.0, 1.0, 1.2, 1.2])
    data = bisected(monkeypatch, tmp_path, builds)
    assert builds.timed == [(0, 3, None), (0, 3, 1), (1, 3, 2), (1, 2, None)], builds.timed
    assert [s["role"] for s in data["steps"]] == ["ends", "midpoint", "midpoint", "culprit"]
    assert [s["call"] for s in data["steps"]] == ["confirmed", "good", "bad", "confirmed"]
    assert data["outcome"]["call"] == bisect.CONFIRMED and data["outcome"]["found"] == "c2", data["outcome"]
    assert data["outcome"]["verified"]["change_pct"] == pytest.approx(20), data["outcome"]


def test_a_range_without_a_change_is_not_bisected(monkeypatch, tmp_path):
    builds = Range([1.0, 1.0, 1.0, 1.0])
    data = bisected(monkeypatch, tmp_path, builds)
    assert builds.timed == [(0, 3, None)] and data["outcome"]["call"] == bisect.NOT_CONFIRMED, data["outcome"]
    assert builds.counted == [0, 3] and "the counts of good and bad are the same" in data["counts"]["text"]
    assert "change not confirmed between the ends (bad +0% (-4 to +4%) against good)" in data["outcome"]["why"]
    assert "Builds in order" in bisect_page.to_html(data)


@pytest.mark.parametrize(("levels", "call"), [([1.0, 1.2], bisect.CONFIRMED), ([1.0, 1.0], bisect.NOT_CONFIRMED)])
def test_adjacent_ends_are_step_0_alone_which_is_the_culprits_check(monkeypatch, tmp_path, levels, call):
    """Good and bad adjacent: step 0 timed the culprit against its parent in fresh workers already."""
    builds = Range(levels)
    data = bisected(monkeypatch, tmp_path, builds)
    assert builds.timed == [(0, 1, None)] and data["outcome"]["call"] == call, data["outcome"]
    assert bisect_page.outcome(data)["found"] == ("c1" if call == bisect.CONFIRMED else None)
    assert "Builds in order" in bisect_page.to_html(data)


@pytest.mark.parametrize(
    ("first", "short"),
    [
        (step(None, SLOWER, controls="A/A called -3.5%") | {"aa": "changed"}, "its controls failed"),
        (step(None, side(20, 5, 35, True)) | {"aa": "same"}, "its interval did not reach a third of the change"),
    ],
)
def test_step_0_that_would_stop_short_is_timed_once_more_and_only_the_second_timing_is_read(
    monkeypatch, tmp_path, first, short
):
    """The A/A control called at 95% in about 1 step of 20, or a change told apart but wider than a third of it:
    step 0 is timed again with fresh workers; a second timing that passes is read (the culprit confirmed), one
    that stops short again stops."""
    first = first | {"stopping": "", "resolved": True, "seconds": 1.0}
    passed = step(None, SLOWER) | {"aa": "same", "stopping": "", "resolved": True, "seconds": 1.0}
    for n, (second, call) in enumerate(((passed, bisect.CONFIRMED), (first, bisect.NOT_CONFIRMED))):
        data = bisected(monkeypatch, tmp_path / str(n), Range([1.0, 1.2]), iter([first, second]))
        assert [s["call"] for s in data["steps"]][0] == "again", data["steps"]
        assert f"{short}: again with fresh workers" in data["steps"][0]["why"]
        assert data["outcome"]["call"] == call, data["outcome"]


def test_a_wide_step_0_whose_ends_count_apart_is_not_timed_again_and_the_midpoints_are_counted(monkeypatch, tmp_path):
    """Step 0 reads +20% ± 15 (wider than a third): with the ends' counts apart it confirms the change at once,
    the midpoints take their sides by their counts, and the culprit is timed against its parent; without
    counts (equal ones) the same step 0 is timed again."""
    wide = step(None, side(20, 5, 35, True)) | {"aa": "same", "stopping": "", "resolved": True, "seconds": 1.0}
    passed = step(None, SLOWER) | {"aa": "same", "stopping": "", "resolved": True, "seconds": 1.0}
    builds = Range([1.0, 1.0, 1.2, 1.2], calls=[100, 100, 101, 101])
    data = bisected(monkeypatch, tmp_path, builds, iter([wide, passed]))
    assert [s["role"] for s in data["steps"]] == ["ends", "counted", "counted", "culprit"], data["steps"]
    assert data["steps"][0]["call"] == "confirmed" and "the counts tell the ends apart" in data["steps"][0]["why"]
    assert data["outcome"]["call"] == bisect.CONFIRMED and data["outcome"]["found"] == "c2", data["outcome"]
    same = bisected(monkeypatch, tmp_path / "same", Range([1.0, 1.0, 1.2, 1.2]), iter([wide, wide]))
    assert [s["call"] for s in same["steps"]] == ["again", "stop"], same["steps"]
