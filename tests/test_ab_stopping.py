"""08's stopping rule does not raise the false-call rate: simulated runs (``ab_simulation``) of an identical B,
batch by batch under ``stopping.stop_reason``, against the same runs read at their full budget; and a rule that
stops at the first narrow interval, which the same simulation shows raising it (so the check can fail)."""

from types import SimpleNamespace

import ab_simulation

from latency_lab.core import paired
from latency_lab.studies.ab.stopping import Stopping, stop_reason

RUNS, BATCHES, ROUNDS = 300, 6, 8  # a batch is 2 x repeats rounds, 10 s each in the simulation


def simulate(rule) -> tuple[float, float]:
    """The share of runs that call an identical B when stopped by ``rule(change, batch)``, and when read at the
    full budget, over the same simulated machines (12 slots, processes 0.6% apart, a 1% target)."""
    stopped = full = 0
    for seed in range(RUNS):
        m = ab_simulation.Machine(slots=12, process_sd=0.006, seed=seed)
        levels = m.processes({"A": 1.0, "X": 1.0})
        data, first = None, None
        for batch in range(1, BATCHES + 1):
            more = m.rounds(levels, ROUNDS)
            data = more if data is None else ab_simulation.merged(data, more)
            arms = ab_simulation.series(data[0])
            c = paired.change("host_ms", arms["A"], arms["X"], ab_simulation.steady_of(data[1]))
            if first is None and (batch == BATCHES or rule(c, batch)):
                first = c
        stopped += first.called
        full += c.called
    return stopped / RUNS, full / RUNS


def test_the_shipped_stopping_rule_keeps_the_false_call_rate():
    p = SimpleNamespace(resolve_pct=1.0, budget_s=10 * BATCHES + 5, repeats=ROUNDS // 2)
    stopped, full = simulate(lambda c, batch: stop_reason(c, 10 * batch, 10, p) is not None)
    print(f"identical B called: {stopped:.1%} stopped by the rule, {full:.1%} at the full budget")
    assert full <= 0.05 + 0.025 and stopped <= full + 0.01, (stopped, full)


def test_stopping_at_the_first_narrow_interval_would_raise_it():
    stopped, full = simulate(lambda c, batch: c.judged and c.half_width <= 0.01)
    print(f"identical B called: {stopped:.1%} stopped at ±1%, {full:.1%} at the full budget")
    assert stopped >= full + 0.02, (stopped, full)


def test_the_advice_asks_for_rounds_where_the_slots_it_had_would_do_and_for_slots_where_they_would_not():
    """A page had said "about 2 workers per arm would resolve ±5%" after 2 workers per arm reached ±11%."""
    run = dict(target_pct=5.0, half_width_pct=11.0, resolved=False, reason="the next 20 rounds would pass the budget")
    rounds = Stopping(**run, rounds=20, build_s=90.0, seconds=160.0, workers_needed=2, slots=2).text()
    assert "its 2 slots would resolve ±5% with more rounds (a larger --budget)" in rounds and "about" not in rounds
    slots = Stopping(**run, rounds=20, build_s=90.0, seconds=160.0, workers_needed=10, slots=2).text()
    assert "about 10 slots (a worker of every arm on each) would resolve ±5%" in slots
    assert "with more rounds" not in Stopping(**{**run, "resolved": True}, rounds=20, build_s=9.0, seconds=16.0).text()
