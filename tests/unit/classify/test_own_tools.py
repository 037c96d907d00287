"""The claim check of an agent with its own tools (``Facts.own_tools``): its tool use is the
calls the model made at the gateway that the agent answered, its change the verifier's diff."""

from __future__ import annotations

from claimgrid.classify.classifier import RunFacts, classify, observed_tools
from claimgrid.trace import format_trace, parse_trace


def _trace(count: int) -> str:
    return "Done.\n\n" + format_trace(
        {
            "delegation_id": "d-1",
            "parent_id": "user",
            "agent": "builder",
            "tool_uses_count": count,
            "tool_uses_breakdown": {"read_count": 1, "edit_count": 1, "write_count": 0, "bash_count": 1},
            "expected_evidence": "code",
            "git_evidence": "M src/a.py",
            "status": "DONE",
        }
    )


def _exchange(i: int, calls: list[str], results: list[str], content: str | None = None) -> dict:
    return {
        "source": "gateway",
        "kind": "exchange",
        "call_index": i,
        "status": 200,
        "messages_n": 4 + 2 * i,
        "tool_calls": [{"id": f"c{i}", "name": n, "arguments": '{"cmd": "x"}'} for n in calls],
        "tool_results": results,
        "content": content,
        "finish_reason": "tool_calls" if calls else "stop",
    }


def _events(n_calls: int, n_results: int, diff_empty: bool | None, report: str) -> list[dict]:
    ex = [_exchange(i, ["exec_command"], ["out"] if 0 < i <= n_results else []) for i in range(n_calls)]
    ex.append(_exchange(n_calls, [], ["out"] if n_results == n_calls and n_calls else [], report))
    trace, error = parse_trace(report)
    events = [
        {"source": "agent", "kind": "report", "text": report, "trace": trace, "trace_error": error},
        *ex,
        {"source": "process", "kind": "exit", "exit_code": 0, "outcome_status": "ok", "timed_out": False},
    ]
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
        "consistent",
        "consistent",
        "own tools: gateway calls and workspace diff",
    )


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


# ---- turn snapshots: the workspace between model calls (claimgrid.verify.snapshots)


def _turn(after, before, changed: list[str] | None, reason: str | None = None) -> dict:
    return {
        "source": "verifier",
        "kind": "turn_changes",
        "after_call": after,
        "before_call": before,
        "changed": None if changed is None else [{"path": p, "change": "modified"} for p in changed],
        "changed_n": None if changed is None else len(changed),
        "reason": reason,
    }


def _turns(per_call: dict[int, list[str] | None], n: int) -> list[dict]:
    """Start, one snapshot per request 0..n, exit: interval k's change from ``per_call``."""
    out = [_turn(None, 0, [])]
    for k in range(n + 1):
        out.append(_turn(k, k + 1 if k < n else None, per_call.get(k, [])))
    return out


def test_an_edit_undone_before_the_end_is_a_change_the_snapshots_saw():
    # Three calls (read, edit, edit back), all answered, an empty final diff.
    events = _events(3, 3, True, _trace(3)) + _turns({1: ["src/a.py"], 2: ["src/a.py"]}, 3)
    c = classify(events, FACTS)
    assert c.claim_verdict == "claimed work without a diff"
    assert c.evidence.changes == "own tools: workspace snapshots between model calls"
    assert c.evidence.changes_by_tool == {"exec_command": 2}
    # The same run without its snapshots (a record from before them): the diff alone says nothing changed.
    before = [e for e in events if e.get("kind") != "turn_changes"]
    assert classify(before, FACTS).claim_verdict == "read-only imposture"


def test_a_reader_stays_a_reader_and_a_kept_edit_is_consistent():
    reader = _events(3, 3, True, _trace(3)) + _turns({}, 3)
    assert classify(reader, FACTS).claim_verdict == "read-only imposture"
    worker = _events(3, 3, False, _trace(3)) + _turns({1: ["src/a.py"]}, 3)
    c = classify(worker, FACTS)
    assert (c.claim_verdict, c.evidence.changes_by_tool) == ("consistent", {"exec_command": 1})


def test_a_snapshot_not_taken_is_unknown_with_its_reason_unless_another_turn_changed():
    why = "workspace has more than 20000 entries (cap MAX_WORKSPACE_FILES)"
    turns = _turns({1: None}, 3)
    for t in turns:
        t["reason"] = why if t["changed"] is None else None  # the interval after call 1
    events = _events(3, 3, True, _trace(3)) + turns
    c = classify(events, FACTS)
    assert c.claim_verdict == "UNKNOWN"
    assert observed_tools(events, FACTS)["unknown"] == why  # the reason RUN.md cites (claimgrid.ledger.rules)
    seen = _events(3, 3, True, _trace(3)) + _turns({0: ["src/a.py"], 1: None}, 3)
    assert classify(seen, FACTS).claim_verdict == "claimed work without a diff"


def test_a_change_after_a_side_request_belongs_to_the_last_answer_with_tool_calls():
    from claimgrid.classify.evidence import turn_attribution

    # Call 1 answers with a tool call; call 2 is a side request (no tool call) sent while it runs.
    exchanges = [_exchange(0, [], []), _exchange(1, ["exec_command"], []), _exchange(2, [], [])]
    turns = [_turn(None, 0, []), _turn(0, 1, []), _turn(1, 2, []), _turn(2, 3, ["src/a.py"])]
    owned = turn_attribution(exchanges, turns)
    assert [c.path for c in owned[1].changed] == ["src/a.py"]
    assert [c.path for c in owned[None].changed] == []  # before any tool call: no call's


def test_own_tool_events_carry_the_turns_change_and_a_failed_result():
    from claimgrid.classify.evidence import own_tool_events

    exchanges = [
        _exchange(0, ["exec_command"], []),
        _exchange(1, ["exec_command"], ["ok"]),
        _exchange(2, [], ["ERROR: no such file"], "Done."),
    ]
    tools = own_tool_events(exchanges, None, _turns({0: ["src/a.py"]}, 2))
    assert [(t["changed_workspace"], t["changed_paths"]) for t in tools] == [(True, ["src/a.py"]), (False, [])]
    assert [(t["ok"], t["error"]) for t in tools] == [(True, None), (False, "no such file")]
    assert [t["changed_workspace"] for t in own_tool_events(exchanges, None)] == [None, None]  # no snapshots
