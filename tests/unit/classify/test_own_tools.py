"""The claim check of an agent with its own tools (``Facts.own_tools``): its tool use is the
calls the model made at the gateway that the agent answered, its change the verifier's diff."""

from __future__ import annotations

from claimgrid.classify.classifier import RunFacts, classify, observed_tools
from claimgrid.trace import format_trace, parse_trace


def _trace(count: int) -> str:
    return "Done.\n\n" + format_trace({
        "delegation_id": "d-1", "parent_id": "user", "agent": "builder", "tool_uses_count": count,
        "tool_uses_breakdown": {"read_count": 1, "edit_count": 1, "write_count": 0, "bash_count": 1},
        "expected_evidence": "code", "git_evidence": "M src/a.py", "status": "DONE"})


def _exchange(i: int, calls: list[str], results: list[str], content: str | None = None) -> dict:
    return {"source": "gateway", "kind": "exchange", "call_index": i, "status": 200, "messages_n": 4 + 2 * i,
            "tool_calls": [{"id": f"c{i}", "name": n, "arguments": '{"cmd": "x"}'} for n in calls],
            "tool_results": results, "content": content, "finish_reason": "tool_calls" if calls else "stop"}


def _events(n_calls: int, n_results: int, diff_empty: bool | None, report: str) -> list[dict]:
    ex = [_exchange(i, ["exec_command"], ["out"] if 0 < i <= n_results else []) for i in range(n_calls)]
    ex.append(_exchange(n_calls, [], ["out"] if n_results == n_calls and n_calls else [], report))
    trace, error = parse_trace(report)
    events = [{"source": "agent", "kind": "report", "text": report, "trace": trace, "trace_error": error}, *ex,
              {"source": "process", "kind": "exit", "exit_code": 0, "outcome_status": "ok", "timed_out": False}]
    if diff_empty is not None:
        files = [] if diff_empty else [{"path": "src/a.py", "status": "M", "added": 1, "removed": 1}]
        events.append({"source": "verifier", "kind": "diff", "files": files, "empty": diff_empty})
    return events


FACTS = RunFacts(role="builder", expected_evidence="code", own_tools="agent", tools=["exec_command"])


def test_calls_answered_and_the_diff_back_a_claim():
    from claimgrid.store.events import parse_events

    events = parse_events(_events(3, 3, False, _trace(3)))
    obs = observed_tools(events, FACTS)
    assert (obs["tool_uses"], obs["changes"], obs["by_category"]) == (3, 1, None)
    c = classify(events, FACTS)
    assert (c.claim_verdict, c.channels, c.evidence.changes) == (
        "consistent", "consistent", "own tools: gateway calls and workspace diff")


def test_the_harness_tool_layer_rule_is_not_used_for_an_agent_with_its_own_tools():
    events = _events(3, 3, False, _trace(3))
    harness_facts = FACTS.model_copy(update={"own_tools": None})
    # No tools events: under the harness rule the same run is narration only.
    assert classify(events, harness_facts).claim_verdict == "narration only"


def test_counts_that_are_not_the_calls_contradict_and_no_call_is_narration():
    assert classify(_events(3, 3, False, _trace(5)), FACTS).claim_verdict == "self-report contradicts the transcript"
    assert classify(_events(0, 0, True, _trace(6)), FACTS).claim_verdict == "narration only"


def test_no_diff_is_read_only_imposture_and_an_unanswered_call_is_unexecuted():
    assert classify(_events(3, 3, True, _trace(3)), FACTS).claim_verdict == "read-only imposture"
    c = classify(_events(3, 1, False, _trace(3)), FACTS)
    assert c.channels == "unexecuted tool calls"
    assert [u.reason for u in c.channel_detail.unexecuted] == ["not executed", "not executed"]
