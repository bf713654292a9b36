"""One verdict vocabulary: every verdict that compare's rule and 08's paired test print starts with one of
the four words, and the words read back."""

import random

import pytest

from latency_lab.core import paired, run_to_run, verdicts

EFFECT = {"sigma": 0.01, "min_effect": 0.02}


@pytest.mark.parametrize(
    ("kind", "a", "b", "ia", "ib", "effect", "word"),
    [
        (run_to_run.COUNT, 36, 37, None, None, None, "changed"),
        (run_to_run.COUNT, 36, 36, None, None, None, "same"),
        (None, 1.0, 1.0, None, None, EFFECT, "not judged"),
        (run_to_run.TIME, 1.0, 1.5, (0.99, 1.01), (1.49, 1.51), EFFECT, "changed"),
        (run_to_run.TIME, 1.0, 1.005, (0.99, 1.01), (0.995, 1.015), EFFECT, "same"),
        (run_to_run.TIME, 1.0, 1.06, (0.7, 1.6), (1.0, 1.1), EFFECT, "not judged"),  # too noisy to judge
        (run_to_run.TIME, 1.0, 1.5, (0.99, 1.01), (1.49, 1.51), None, "not judged"),
    ],
)
def test_compare_rule_speaks_the_vocabulary(kind, a, b, ia, ib, effect, word):
    judged = run_to_run.judge(kind, a, b, ia, ib, effect)
    assert judged.verdict == word == verdicts.read_word(judged.decided)


def test_the_paired_test_speaks_it_all_three_ways():
    rng = random.Random(0)

    def arm(scale, k=4):
        return [paired.Series(str(i), [scale * (1 + rng.gauss(0, 0.005)) for _ in range(60)]) for i in range(k)]

    a = arm(1.0)
    for scale, word in ((1.10, "changed"), (1.0, "same")):
        c = paired.change("host_ms", a, arm(scale))
        assert c.verdict == word == verdicts.read_word(c.text())
    lone = paired.change("host_ms", a, arm(1.0, k=1))
    assert lone.verdict == "not judged" == verdicts.read_word(lone.text())


def test_said_and_word_of_refuse_other_words():
    assert verdicts.phrase("same", "holds") == "same: holds"
    assert verdicts.read_word("too noisy to judge: B higher by 6%") == "not judged"
    with pytest.raises(ValueError, match="allowed"):
        verdicts.phrase("saves")
    with pytest.raises(ValueError, match="not a verdict"):
        verdicts.read_word("holds")


def test_the_studies_grade_in_the_same_words():
    from latency_lab.studies.host_overhead import findings as graded
    from latency_lab.studies.levers import savings as levers_savings

    grades = (graded.HOLDS, graded.EDGE, graded.HIGHER, graded.LOWER)
    assert [verdicts.read_word(g) for g in (*grades, graded.DOES_NOT_HOLD, levers_savings.SAVES)] == [
        "same",
        "same",
        "changed",
        "changed",
        "changed",
        "changed",
    ]
