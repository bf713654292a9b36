"""The counting instrument (``instruments.counts``): exact counts of one step, the same in step n and n + 1; one
Python call more per step reads as exactly one more start, named by its function; an identical step reads the
same; what cannot be counted here says why."""

import json
import sys

import torch

from latency_lab.instruments import counts


def _step(extra: int = 0):
    w = torch.ones(4, 4)

    def helper():
        return None

    def step(x):
        for _ in range(extra):
            helper()
        return torch.relu(x @ w).sum()

    return step, {"x": torch.ones(2, 4)}


def test_a_step_counts_the_same_twice_and_one_more_call_reads_as_one_named_by_its_function():
    base = counts.count_step(*_step(), "cpu")
    again = counts.count_step(*_step(), "cpu")
    more = counts.count_step(*_step(extra=1), "cpu")
    assert base.counters["python_function_starts"] >= 1 and base.counters["python_c_calls"] >= 3
    assert "python_function_starts" not in base.unsteady and "python_c_calls" not in base.unsteady
    same = counts.difference(base, again)
    assert all(v["change"] == 0 for k, v in same["counters"].items() if k in counts.JUDGED), same
    assert counts.text(same).startswith("counts: same")
    diff = counts.difference(base, more)
    assert diff["counters"]["python_function_starts"]["change"] == 1, diff
    assert diff["counters"]["python_c_calls"]["change"] == 0, diff
    (name,) = diff["functions"]
    assert name.endswith("test_counts.py:_step.<locals>.helper") and diff["functions"][name] == 1, diff
    assert counts.text(diff).startswith("counts changed: python function starts +1 per step (+")
    assert counts.text(diff).endswith(f"Functions: {name}: +1 per step")


def test_a_saved_record_reads_back_whole_and_an_older_one_without_its_functions():
    c = counts.count_step(*_step(extra=1), "cpu")
    record = json.loads(json.dumps(c.to_dict()))  # as a results file holds it
    assert counts.Counts.from_dict(record) == c and record["all_functions"] == c.all_functions
    del record["all_functions"]  # saved before every function was kept
    assert counts.Counts.from_dict(record).all_functions == {}


def test_what_cannot_be_counted_here_says_why():
    c = counts.count_step(*_step(), "cpu", instructions=True)
    assert "kernel launches" not in c.counters and "no CUDA device" in c.unavailable["kernel_launches"]
    assert "no CUDA device" in c.unavailable["device_allocations"]
    if hasattr(sys, "monitoring"):
        assert c.counters["python_instructions"] > 0 and c.method.startswith("sys.monitoring")
    else:
        assert "Python 3.12+" in c.unavailable["python_instructions"] and c.method == "sys.setprofile"
    assert c.seconds < 30
