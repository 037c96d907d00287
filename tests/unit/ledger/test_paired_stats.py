"""The exact McNemar test and Holm's adjustment against hand-computed values (and scipy when
it happens to be installed), and the paired framework tests on constructed cells."""

from __future__ import annotations

import math

import pytest

from claimgrid.ledger.paired import framework_tests
from claimgrid.ledger.stats import holm, mcnemar_exact


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (0, 0, 1.0),  # nothing discordant: nothing to test
        (0, 6, 2 / 64),  # 2 * C(6,0) / 2^6
        (6, 0, 2 / 64),  # symmetric
        (0, 5, 2 / 32),  # 0.0625: five one-sided pairs are not enough at 0.05
        (1, 9, 2 * (1 + 10) / 1024),  # 0.021484375
        (2, 8, 2 * (1 + 10 + 45) / 1024),  # 0.109375
        (5, 5, 1.0),  # 2 * P(X <= 5) > 1: capped
        (3, 4, 1.0),
    ],
)
def test_mcnemar_exact_matches_hand_computed_values(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, abs=1e-15)


def test_mcnemar_exact_matches_the_binomial_tail_and_scipy_when_present():
    for b in range(0, 25):
        for c in range(0, 25):
            n = b + c
            want = 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) * 0.5**n for i in range(min(b, c) + 1)))
            assert mcnemar_exact(b, c) == pytest.approx(want, rel=1e-12)
    try:
        from scipy.stats import binomtest
    except ImportError:
        return
    for b, c in [(0, 6), (1, 9), (7, 19), (30, 12), (4, 4)]:
        assert mcnemar_exact(b, c) == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-9)


def test_mcnemar_exact_refuses_negative_counts():
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)


def test_holm_adjusts_in_input_order_monotone_and_capped():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def _rows(model, outcomes_by_fw, repeats):
    """``outcomes_by_fw[fw][cell]`` = claim_vs_outcome per repeat (a list of ``repeats``)."""
    rows = []
    for fw, cells in outcomes_by_fw.items():
        for cell, outs in enumerate(cells):
            for rep in range(repeats):
                rows.append(
                    {
                        "framework": fw,
                        "task": f"t{cell}",
                        "content": "clean",
                        "swap_condition": "none",
                        "model": model,
                        "repeat": rep,
                        "claim_vs_outcome": outs[rep],
                    }
                )
    return rows


def test_framework_tests_state_a_difference_only_when_the_holm_adjusted_test_says_so():
    ts, hf = "TRUE_SUCCESS", "HONEST_FAILURE"
    # a succeeds in every one of 4 cells x 3 repeats, b in none, c as a in all but one run.
    reps = 3
    a = [[ts] * reps for _ in range(4)]
    b = [[hf] * reps for _ in range(4)]
    c = [[ts] * reps for _ in range(4)]
    c[0][0] = hf
    tests = framework_tests(_rows("m", {"a": a, "b": b, "c": c}, reps), ["a", "b", "c"], ["m"])
    by = {(t.outcome, t.a, t.b): t for t in tests}
    assert len(tests) == 2 * 3  # 2 outcomes x 3 pairs
    ab = by[(ts, "a", "b")]
    assert (ab.n, ab.a_only, ab.b_only) == (12, 12, 0)
    assert ab.p == pytest.approx(2 / 2**12)
    # Holm over the six: the smallest p is multiplied by 6 (and a vs b, c vs b tie for it).
    assert ab.differs and ab.p_adj == pytest.approx(min(1.0, 6 * 2 / 2**12))
    assert "a more often than b" in ab.result()
    ac = by[(ts, "a", "c")]
    assert (ac.a_only, ac.b_only) == (1, 0) and not ac.differs
    assert ac.result().startswith("no difference shown (n=12, p=")
    assert ac.repeats_needed is None
    # FALSE_SUCCESS never happened: no discordant cell, p = 1
    assert all(t.p == 1.0 and not t.differs for t in tests if t.outcome == "FALSE_SUCCESS")
    # repeats needed: on repeat 1 alone a vs b has 4 discordant cells (p = 0.125, not enough);
    # with repeats 1..2 it has 8 (p = 2/256, times 6 = 0.047 < 0.05).
    assert ab.repeats_needed == 2
    cb = by[(ts, "b", "c")]
    assert cb.differs and cb.repeats_needed == 3  # 1..2 gives 7 discordant: 5 * 2/128 = 0.078


def test_unknown_outcomes_are_left_out_of_the_pairs():
    ts, unk = "TRUE_SUCCESS", "UNKNOWN"
    rows = _rows("m", {"a": [[ts], [ts], [unk]], "b": [[unk], ["HONEST_FAILURE"], ["HONEST_FAILURE"]]}, 1)
    t = next(x for x in framework_tests(rows, ["a", "b"], ["m"]) if x.outcome == ts)
    assert (t.n, t.unknown, t.a_only, t.b_only) == (1, 2, 1, 0)
