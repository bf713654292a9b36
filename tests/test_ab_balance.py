"""What no process of 08 does alone: the start order is balanced over the slots, so a role bias planted on
purpose (the process started first on each slot 1% slower) does not read as a build effect, where starting
the arms in one order on every slot would call it; and the rounds run each slot's arms back to back, every arm
at the same mean place over a pair of rounds."""

import random
import statistics

from latency_lab.core import paired, parameters
from latency_lab.studies.ab import remote

SLOTS = 12


def _workers(tmp_path):
    p = parameters.resolved(
        preset="tiny", executors="eager", planted_pct=[2], workers=SLOTS, build_b={"env": {"X": "1"}}, budget_s=900
    )
    return remote.workers_for(p, tmp_path)


def _b_against_a(order: list, bias: float = 0.01, seed: int = 0) -> paired.Change:
    """B against A (both build A) over 40 rounds on 12 slots whose cores are 8% apart, each process's blocks
    with 0.3% noise, the process started first on its slot ``bias`` slower."""
    rng = random.Random(seed)
    first = {}
    for w in order:
        first.setdefault(w.slot, w.arm)
    core = {s: 1 + rng.gauss(0, 0.08) for s in range(SLOTS)}

    def arm(name):
        out = []
        for s in range(SLOTS):
            level = core[s] * (1 + bias if first[s] == name else 1)
            out.append(paired.Series(str(s), [level * (1 + rng.gauss(0, 0.003)) for _ in range(40)]))
        return out

    return paired.change("host_ms", arm("A"), arm("B"))


def test_the_first_started_process_is_a_different_arm_from_slot_to_slot(tmp_path):
    workers = _workers(tmp_path)
    order = remote.start_order(workers, seed=0)
    assert len(order) == len(workers) and order[-1].arm == remote.CALIBRATION
    first = {}
    for w in order:
        first.setdefault(w.slot, w.arm)
    counts = [list(first.values()).count(arm) for arm in ("A", "A'", "A + 2% planted", "B")]
    assert counts == [3, 3, 3, 3], first


def test_a_planted_role_bias_does_not_read_as_a_build_effect(tmp_path):
    workers = [w for w in _workers(tmp_path) if w.arm != remote.CALIBRATION]
    balanced = _b_against_a(remote.start_order(workers, seed=0))
    assert not balanced.called and abs(balanced.change_pct) < 0.3, balanced.text()
    same_order = sorted(workers, key=lambda w: (w.arm != "A", w.slot))  # A started first on every slot
    biased = _b_against_a(same_order)
    assert biased.called and biased.change_pct < -0.8, biased.text()


def test_each_slots_arms_run_back_to_back_at_the_same_mean_place(tmp_path):
    entries = [remote.RemoteEntry(f"eager · {w.label}", w, "eager") for w in _workers(tmp_path)[:-1]]
    places = {e.name: [] for e in entries}
    for r in range(40):
        order = remote.slot_order(entries, r, seed="s")
        slots = [e.worker.slot for e in order]
        assert all(slots[i] == slots[i - 1] or slots[i] not in slots[:i] for i in range(1, len(slots)))  # in groups
        for e in order:
            group = [x for x in order if x.worker.slot == e.worker.slot]
            places[e.name].append(group.index(e))
    means = [statistics.fmean(p) for p in places.values()]
    assert all(m == 1.5 for m in means), means  # 4 arms: places 0-3, a pair of rounds forward then reversed
