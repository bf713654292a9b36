"""Results files and the run report."""

import json
import math

import pytest

from latency_lab.core import parameters as P
from latency_lab.core import results
from latency_lab.run import notebook_run, report, run_page


def test_save_and_load_roundtrip_json_safe(tmp_path):
    p = P.validate(preset="tiny")
    table = results.key_table("t", [{"a": 1, "b": math.nan}, {"a": 2, "c": (1, 2)}])
    assert table["columns"] == ["a", "b", "c"] and table["rows"][1] == [2, None, (1, 2)]
    path = results.save(tmp_path, "99_x", p, {"python": "3"}, table, extra={"v": float("inf")})
    data = results.load(path)
    assert data["key_table"]["rows"] == [[1, None, None], [2, None, [1, 2]]]
    assert data["extra"] == {"v": None} and data["params"]["preset"] == "tiny"
    assert not list(tmp_path.glob("*.tmp"))


def test_load_rejects_incomplete(tmp_path):
    bad = tmp_path / "x.results.json"
    bad.write_text(json.dumps({"notebook": "x"}))
    with pytest.raises(ValueError, match="lacks"):
        results.load(bad)


def test_summary_marks_missing_results_failed(tmp_path):
    ok = notebook_run.Outcome("01_a", "ok", 1.0, None, {"ipynb": "01_a.ipynb"})
    summary = report.summarize(tmp_path, {"run_id": "r"}, [ok])
    assert not summary["ok"] and summary["notebooks"][0]["error"]["ename"] == "MissingResults"
    page = run_page.index_html(summary)
    assert "01_a" in page and "MissingResults" in page


def test_select_notebooks_by_number_or_name():
    found = notebook_run.discover()
    assert list(found)[:3] == ["00_explorer", "01_model_setup", "02_executor_timing"]
    assert list(notebook_run.select(found, "02,01")) == ["01_model_setup", "02_executor_timing"]
    assert list(notebook_run.select(found, "02_executor_timing")) == ["02_executor_timing"]
    with pytest.raises(ValueError, match="invalid --notebooks entry '77'"):
        notebook_run.select(found, "01,77")


def test_write_atomic_keeps_the_old_file_when_a_write_fails(tmp_path):
    path = tmp_path / "summary.json"
    results.write_atomic(path, '{"old": 1}')
    with pytest.raises(UnicodeEncodeError):  # fails mid-write, as a full disk does
        results.write_atomic(path, '{"new": "' + "x" * 100_000 + '\udcff"}')
    assert path.read_text() == '{"old": 1}' and sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("5", "a results file is a JSON object, this holds a int"),
        ('{"notebook": "x"', "not a readable JSON file (truncated?)"),
        (
            '{"notebook": "x", "created": 1, "params": [], "environment": {}, "key_table": {}}',
            "wrong shape: params, key_table",
        ),
        (
            '{"notebook": "x", "created": 1, "params": {}, "environment": {}, '
            '"key_table": {"columns": ["a"], "rows": [[1, 2]]}}',
            "wrong shape: key_table",
        ),
    ],
)
def test_load_names_what_is_wrong(tmp_path, text, fragment):
    path = tmp_path / "x.results.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"^x\.results\.json: ") as err:
        results.load(path)
    assert fragment in str(err.value)


def test_a_failed_row_names_its_comparison_and_why():
    """The runner's FAILED ROWS line: for 08 which build's row failed and why, not just the executor."""
    table = {
        "columns": ["executor", "comparison", "status", "reason"],
        "rows": [
            ["thunder:torch", "B vs A", "failed", "worker B #1: first call: TypeError: unexpected cache_positions"],
            ["thunder:torch", "A' vs A (A/A control)", "ok", None],
            ["eager", "B vs A", "unavailable", "not here"],
        ],
    }
    assert results.failed_rows(table) == [
        "thunder:torch B vs A (failed: worker B #1: first call: TypeError: unexpected cache_positions)"
    ]
    assert results.failed_rows({"columns": ["executor", "status"], "rows": [["eager", "partial"]]}) == [
        "eager (partial)"
    ]
