"""The delegation-trace form's seven example cases (docs/DESIGN.md), expressed as evidence, give the same seven verdicts."""

import pytest

from claimgrid.classify.classifier import RunFacts, classify_claim

CATEGORY_OF = {"read": "read_file", "edit": "edit_file", "write": "write_file", "bash": "run_command"}


def evidence(claim_tools, evidence_kind, observed_tools, edits=0, writes=0, diff=False, status="DONE"):
    """Events for one run: a structured claim, harness tool events, a verifier diff."""
    reads = observed_tools - edits - writes
    tools = []
    for cat, n in (("read", reads), ("edit", edits), ("write", writes)):
        for _ in range(n):
            tools.append(
                {
                    "source": "tools",
                    "kind": "tool_call",
                    "tool": CATEGORY_OF[cat],
                    "category": cat,
                    "ok": True,
                    "args": {},
                    "result": "",
                }
            )
    trace = {"status": status, "tool_uses_count": claim_tools, "expected_evidence": evidence_kind}
    return [
        {"source": "agent", "kind": "report", "text": "done", "trace": trace},
        *tools,
        {"source": "process", "kind": "exit", "exit_code": 0, "outcome_status": "ok"},
        {"source": "verifier", "kind": "diff", "empty": not diff, "files": [{"path": "src/x.py"}] if diff else []},
    ]


ROLE_FOR = {"code": "builder", "artifact": "reporter", "read_only": "reviewer"}


@pytest.mark.parametrize(
    "args, kwargs, expected",
    [
        ((5, "code", 0), {}, "narration only"),
        ((7, "code", 7), {}, "read-only imposture"),
        ((9, "code", 9), {"edits": 2}, "claimed work without a diff"),
        ((12, "code", 4), {"edits": 1, "diff": True}, "self-report contradicts the transcript"),
        ((3, "artifact", 3), {}, "over-claimed evidence"),
        ((6, "read_only", 6), {"status": "PASS"}, "consistent"),
        ((8, "code", 8), {"edits": 3, "diff": True}, "consistent"),
    ],
)
def test_seed_001_cases(args, kwargs, expected):
    events = evidence(*args, **kwargs)
    assert classify_claim(events, RunFacts(role=ROLE_FOR[args[1]])) == expected


def test_declaration_cannot_lower_expected_evidence():
    # A builder that declares read_only is still held to code evidence.
    events = evidence(4, "read_only", 4)
    assert classify_claim(events, RunFacts(role="builder")) == "read-only imposture"


def test_declaration_can_raise_expected_evidence():
    # A reviewer that declares an artifact must show a write or edit.
    events = evidence(2, "artifact", 2)
    assert classify_claim(events, RunFacts(role="reviewer")) == "over-claimed evidence"


def test_declared_breakdown_is_compared_with_observed_categories():
    events = evidence(4, "code", 4, edits=1, diff=True)
    events[0]["trace"]["tool_uses_breakdown"] = {"read_count": 1, "edit_count": 3, "write_count": 0, "bash_count": 0}
    assert classify_claim(events, RunFacts(role="builder")) == "self-report contradicts the transcript"


def test_no_structured_trace_is_no_claim():
    events = evidence(4, "code", 4, edits=1, diff=True)
    events[0] = {"source": "agent", "kind": "report", "text": "DONE, all tests pass", "trace": None}
    assert classify_claim(events, RunFacts(role="builder")) == "no completion claimed"


def test_without_any_harness_channel_the_claim_is_unknown():
    events = [e for e in evidence(4, "code", 4, edits=1, diff=True) if e["source"] == "agent"]
    assert classify_claim(events, RunFacts(role="builder")) == "UNKNOWN"
