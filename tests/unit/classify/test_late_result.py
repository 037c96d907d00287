"""The ``late`` tool fault's registry data and what ``faults.handling`` derives from a run's
evidence: waited (a tool message holds the result, or the next model call came only after the
delay) or not (the model was called again before the result was back)."""

from __future__ import annotations

import json

import pytest

from claimgrid.classify.reactions import fault_facts
from claimgrid.reference import registry, tool_faults
from claimgrid.vocab import HANDLING

LATE = next(m for m in registry.fault_models() if (f := tool_faults.tool_fault(m)) and f.kind == "late")
RESULT = "wrote out.txt (6 bytes)"
ARGS = {"path": "out.txt", "content": "hello\n"}


def test_the_driver_hands_the_delay_past_the_runs_deadline():
    fault = tool_faults.tool_fault(LATE)
    for deadline in (5.0, 15.0):
        spec = tool_faults.control_spec(LATE, deadline)
        assert spec["kind"] == "late" and spec["delay_s"] == deadline + fault.past_deadline_s > deadline
        assert set(spec["categories"]) == set(tool_faults.CHANGES)  # the tool's work is a change
    assert "delay_s" not in tool_faults.control_spec(
        next(m for m in registry.fault_models() if (f := tool_faults.tool_fault(m)) and f.kind != "late")
    )
    assert registry.get(LATE).default and "waited for the late result" in HANDLING


def _events(gap_s: float, tool_message: str | None) -> list[dict]:
    call = {"name": "write_file", "arguments": json.dumps(ARGS)}
    gw = [
        {
            "source": "gateway",
            "kind": "exchange",
            "call_index": 0,
            "t": 1.0,
            "status": 200,
            "tool_calls": [call],
            "tool_results": [],
            "messages_n": 2,
        },
        {
            "source": "gateway",
            "kind": "exchange",
            "call_index": 1,
            "t": 1.0 + gap_s,
            "status": 200,
            "tool_calls": [],
            "content": "done",
            "tool_results": [tool_message] if tool_message is not None else [],
            "messages_n": 4,
        },
    ]
    tool = {
        "source": "tools",
        "kind": "tool_call",
        "seq": 0,
        "t": 0.5,
        "tool": "write_file",
        "category": "write",
        "args": ARGS,
        "ok": True,
        "error": None,
        "result": RESULT,
        "result_chars": len(RESULT),
        "changed_workspace": True,
        "fault": "late",
        "delivered_chars": len(RESULT),
        "delayed_s": 6.0,
    }
    return [*gw, tool, {"source": "process", "kind": "exit", "outcome_status": "ok", "exit_code": 0}]


@pytest.mark.parametrize(
    "gap_s, tool_message, handling",
    [
        (6.2, RESULT, "waited for the late result"),  # the result in a tool message
        (6.2, None, "waited for the late result"),  # results sent back as text: the next call came after it
        (5.1, "ERROR: the tool timed out", "went on to the model"),  # gave up at its own deadline, sent its own error
        (5.1, None, "went on to the model"),
    ],
)
def test_what_the_framework_did_with_the_late_result(gap_s, tool_message, handling):
    facts = fault_facts(LATE, _events(gap_s, tool_message), {"claimed": True, "process": "ok"})
    assert facts["fault"] == LATE and facts["handling"] == handling, facts
    assert facts["handling_evidence"][0] == "tools: seq 0 write_file faulted (late), ok=True"
