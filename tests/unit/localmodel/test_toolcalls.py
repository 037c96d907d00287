"""The local server's documented tool-call rule (claimgrid/localmodel/toolcalls.py)."""

from __future__ import annotations

import json

import pytest

from claimgrid.localmodel.toolcalls import parse_tool_calls, render_messages, tools_prompt

TOOLS = [{"type": "function", "function": {"name": "run", "description": "d", "parameters": {"type": "object"}}}]


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        ('<tool_call>{"name": "run", "arguments": {"command": "ls"}}</tool_call>', [("run", {"command": "ls"})]),
        ('I will look.\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>{"name": "b"}', [("a", {}), ("b", {})]),
        ('{"name": "run", "arguments": "{\\"x\\": 1}"}', [("run", {"x": 1})]),
        ('```json\n{"name": "run", "arguments": {"x": 2}}\n```', [("run", {"x": 2})]),
        ('<tool_call>{"name": "run", "arguments": [1]}</tool_call>', []),  # arguments not an object
        ("<tool_call>{broken json</tool_call>", []),
        ('Use {"name": "run", "arguments": {}} to run.', []),  # not the whole answer
        ('{"name": "", "arguments": {}}', []),
        ("<start_of_turn>model\nrun ls", []),
    ],
)
def test_parse_rule(text, calls):
    got = parse_tool_calls(text)
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in got] == calls
    assert all(c["type"] == "function" and c["id"].startswith("call_") for c in got)
    assert len({c["id"] for c in got}) == len(got)


def test_tools_are_offered_in_a_system_message_and_history_is_rendered():
    msgs = render_messages(
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "fix it"}]},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "function": {"name": "run", "arguments": '{"c": 1}'}}]},
            {"role": "tool", "tool_call_id": "1", "content": "ok"},
            {"role": "tool", "tool_call_id": "2", "content": "also"},
        ],
        TOOLS,
        "required",
    )
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[0]["content"].startswith("be brief") and '"name": "run"' in msgs[0]["content"]
    assert "must call at least one" in msgs[0]["content"]
    assert '<tool_call>\n{"name": "run", "arguments": {"c": 1}}\n</tool_call>' == msgs[2]["content"]
    assert msgs[3]["content"].count("<tool_response>") == 2  # two results in a row: one turn


def test_tool_choice_none_offers_nothing():
    assert tools_prompt(TOOLS, "none") is None and tools_prompt([], "auto") is None
    assert render_messages([{"role": "user", "content": "hi"}], TOOLS, "none") == [{"role": "user", "content": "hi"}]
