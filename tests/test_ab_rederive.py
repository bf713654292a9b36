"""tools/ab_rederive.py on synthetic runs: 4 slots 8% apart in speed, A, A' and a +10% planted arm over 20 rounds.
Paired on slots, the new procedure removes the slots' spread that Welch over workers keeps in its interval."""

import json
import lzma
import math
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import ab_rederive  # noqa: E402

ARMS = {"A": 1.0, "A'": 1.0, "A + 10% planted": 1.10}
SLOTS, ROUNDS = 4, 20


def write_run(folder: Path, seed: int) -> None:
    """One notebook-08 results file in the kept shape: the rounds, the planted control's measured size, and an
    empty key table."""
    rng = random.Random(seed)
    rounds = [math.exp(rng.gauss(0, 0.03)) for _ in range(ROUNDS)]
    entries = {}
    for arm, factor in ARMS.items():
        for slot in range(SLOTS):
            host = [1.08**slot * factor * r * math.exp(rng.gauss(0, 0.01)) for r in rounds]
            refs = [[1.0 + rng.uniform(0, 0.02) for _ in rounds] for _ in range(2)]
            entries[f"thunder · {arm} #{slot + 1}"] = {
                **{"host_ms": host, "wall_ms": host, "reference_before_ms": refs[0], "reference_after_ms": refs[1]},
                **{"fast": [True] * ROUNDS, "error": None},
            }
    data = {
        "params": {"executors": ["thunder"], "device": "cpu", "confidence": 0.95, "planted_pct": [10.0]},
        "rounds": entries,
        "controls": [
            {"executor": "thunder", "comparison": "A + 10% planted vs A", "planted_pct": 10.0, "planted_se_pct": 0.2}
        ],
        "key_table": {"columns": ["executor", "comparison", "metric"], "rows": []},
    }
    (folder / f"run-{seed:02d}.json.xz").write_bytes(lzma.compress(json.dumps(data).encode()))


def test_new_procedure_pairs_out_the_slots(tmp_path):
    for seed in (1, 2):
        write_run(tmp_path, seed)
    out = tmp_path / "out.json"
    assert ab_rederive.main([str(tmp_path), "--json", str(out)]) == 0
    found = json.loads(out.read_text())[str(tmp_path)]
    assert len(found["runs"]) == 2
    for run in found["runs"]:
        rows = {r["arm"]: r for r in run["rows"]}
        assert set(rows) == {"A'", "A + 10% planted"}
        plant, twin = rows["A + 10% planted"], rows["A'"]
        assert plant["new"]["detected"] and plant["new"]["covered"]
        assert not twin["new"]["called"]
        for r in (plant, twin):
            assert r["new"]["half_pct"] < r["old"]["half_pct"] / 3
    summary = found["summary"]["host_ms · A + 10% planted vs A"]
    assert summary["new"]["both"] == 2 and summary["new"]["called"] == 2
