"""Which limits a run hit and whether one ended its work (claimgrid.classify.limits), from
evidence only, and what the classifier makes of it: a harness limit that ended the work is
UNKNOWN (reason limit), never the agent's HONEST_FAILURE; a PASS stays PASS; the run's own
budgets (turns, tokens) and a deadline an injected fault made a call miss stay the run's result."""

from __future__ import annotations

import pytest

from claimgrid.classify.classifier import RunFacts, classify
from claimgrid.classify.limits import deciding, describe, limit_hits


def ex(i, status=200, limit=None, fault=None, finish="stop"):
    e = {
        "source": "gateway",
        "kind": "exchange",
        "call_index": i,
        "status": status,
        "finish_reason": finish,
        "content": "x" if status == 200 else None,
        "tool_calls": [],
        "usage": None,
    }
    if limit:
        e["limit"] = limit
    if fault:
        e["fault"] = fault
    return e


def proc(timed_out=False, timeout_s=120.0, exc=None):
    return {
        "source": "process",
        "kind": "exit",
        "exit_code": None if timed_out else 0,
        "timed_out": timed_out,
        "outcome_status": "missing" if timed_out else "ok",
        "timeout_s": timeout_s,
        "adapter_exception": exc,
        "signal": "SIGKILL" if timed_out else None,
    }


def verifier(empty=True, passed=False):
    return [
        {"source": "verifier", "kind": "diff", "empty": empty, "expected": "required", "files": []},
        {"source": "verifier", "kind": "scope", "outside_allowed": [], "protected_touched": []},
        {"source": "verifier", "kind": "required_files", "missing": [], "content_mismatch": []},
        {"source": "verifier", "kind": "tests", "passed": passed},
    ]


DEADLINE = {"kind": "call_deadline", "value": 15.0}
ERROR = {"type": "APIStatusError", "message": "504"}


@pytest.mark.parametrize(
    "events,decided",
    [
        ([ex(0, 504, DEADLINE), proc(exc=ERROR)], True),  # ended at the deadline, nothing after
        ([ex(0, 504, DEADLINE), ex(1), proc()], False),  # a retry was answered: the run went on
        ([ex(0), ex(1, 200, DEADLINE, fault="slow"), proc(exc=ERROR)], False),  # an injected fault's doing
        ([ex(0), ex(1, 200, {"kind": "output_cap", "value": 1024}, finish="length"), proc()], True),
        ([ex(0, 200, {"kind": "output_cap", "value": 1024}, finish="length"), ex(1), proc()], False),
        ([ex(0), ex(1, 429, {"kind": "turns", "value": 2}), proc(exc=ERROR)], False),  # the run's own budget
        ([ex(0), ex(1, 429, {"kind": "run_tokens", "value": 10, "used": 12}), proc(exc=ERROR)], False),
        (
            [
                ex(0),
                {"source": "gateway", "kind": "in_flight", "call_index": 1, "t": 3.0, "open_s": 117.0},
                proc(timed_out=True),
            ],
            True,
        ),  # killed while the model was still answering
        ([ex(0), proc(timed_out=True)], False),  # killed in the agent's own loop
        # the provider refused a prompt longer than the model's context window, nothing answered after
        ([ex(0, 400, {"kind": "context", "value": 4096}), proc(exc=ERROR)], True),
        ([ex(0), ex(1, 400, {"kind": "context", "value": 4096}), ex(2), proc()], False),  # the agent went on
    ],
)
def test_a_limit_decided_the_run_only_when_it_ended_the_work_waiting_on_the_model(events, decided):
    hits = limit_hits(events)
    assert hits, "every limit hit is recorded"
    assert (deciding(hits) is not None) is decided
    c = classify(events + verifier(), RunFacts(role="builder"))
    if decided:
        assert (c.outcome, c.claim_vs_outcome, c.unknown_reason) == ("UNKNOWN", "UNKNOWN", "limit")
    else:
        assert c.claim_vs_outcome == "HONEST_FAILURE" and c.unknown_reason is None


def test_a_pass_despite_a_limit_stays_pass():
    events = [ex(0, 504, DEADLINE), proc()] + verifier(empty=False, passed=True)
    c = classify(events, RunFacts(role="builder"))
    assert c.outcome == "PASS" and c.unknown_reason is None


def test_hits_in_words():
    hits = limit_hits([ex(0, 504, DEADLINE), ex(1, 429, {"kind": "turns", "value": 24}), proc(exc=ERROR)])
    assert [describe(h) for h in hits] == [
        "per-call deadline 15 s hit on call 0",
        "model-call budget 24 calls hit on call 1",
    ]
    wall = limit_hits(
        [
            {"source": "gateway", "kind": "in_flight", "call_index": 3, "t": 1.0, "open_s": 2.0},
            proc(timed_out=True, timeout_s=600.0),
        ]
    )
    assert describe(wall[0]) == "run wall time 600 s hit waiting on call 3" and wall[0]["source"] == "process"


def test_a_context_window_refusal_is_named_with_its_window():
    assert describe(limit_hits([ex(0, 400, {"kind": "context", "value": 4096}), proc()])[0]) == (
        "model context window 4096 tokens hit on call 0"
    )
