"""The dialect translations in process: request -> internal chat request, answer -> dialect body.

Over HTTP through the real client libraries: tests/integration/gateway/test_gateway_dialects.py.
"""

from __future__ import annotations

import json

import pytest

from claimgrid.gateway.dialects import DialectError, anthropic, responses
from claimgrid.gateway.request import body_error

CALL = {"id": "call_7", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}


def completion(content=None, calls=(), finish="stop"):
    message = {"role": "assistant", "content": content, **({"tool_calls": list(calls)} if calls else {})}
    return {
        "id": "chatcmpl-abc",
        "object": "chat.completion",
        "created": 5,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
    }


def test_anthropic_history_becomes_the_chat_history():
    body = {
        "model": "m",
        "max_tokens": 99,
        "system": [{"type": "text", "text": "sys"}],
        "tools": [{"name": "read_file", "description": "d", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "stop_sequences": ["X"],
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "s"},
                    {"type": "text", "text": "reading"},
                    {"type": "tool_use", "id": "call_7", "name": "read_file", "input": {"path": "a.py"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_7", "content": [{"type": "text", "text": "x = 1"}]},
                    {"type": "text", "text": "and?"},
                ],
            },
        ],
    }
    chat = anthropic.to_chat(body)
    assert body_error(chat) is None
    assert chat["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "reading", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_7", "content": "x = 1"},
        {"role": "user", "content": "and?"},
    ]
    assert chat["tools"] == [
        {"type": "function", "function": {"name": "read_file", "description": "d", "parameters": {"type": "object"}}}
    ]
    assert (chat["tool_choice"], chat["parallel_tool_calls"], chat["max_tokens"], chat["stop"]) == (
        "required",
        False,
        99,
        ["X"],
    )


@pytest.mark.parametrize("finish,stop", sorted(anthropic.STOP_REASONS.items()))
def test_anthropic_answer_keeps_ids_text_and_stop_reason(finish, stop):
    reply = anthropic.from_chat(completion("looking", [CALL], finish), {})
    assert reply["stop_reason"] == stop and reply["id"] == "msg_abc"
    assert reply["content"] == [
        {"type": "text", "text": "looking"},
        {"type": "tool_use", "id": "call_7", "name": "read_file", "input": {"path": "a.py"}},
    ]
    assert reply["usage"] == {"input_tokens": 11, "output_tokens": 3}


def test_anthropic_cut_off_arguments_stay_raw_in_json_and_stream():
    cut = {**CALL, "function": {"name": "read_file", "arguments": '{"path": "a'}}
    chat = completion(None, [cut], "length")
    reply = anthropic.from_chat(chat, {})
    assert reply["content"][0]["input"] == '{"path": "a'
    deltas = [
        json.loads(line[6:])
        for line in "".join(anthropic.stream(chat, reply, {})).splitlines()
        if line.startswith("data: ")
    ]
    sent = "".join(
        d["delta"]["partial_json"]
        for d in deltas
        if d["type"] == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    )
    assert sent == '{"path": "a'
    assert [d["type"] for d in deltas][0] == "message_start" and deltas[-1]["type"] == "message_stop"
    # Sent back by the client as it received it, it is the same arguments text again.
    back = anthropic.to_chat({"max_tokens": 1, "messages": [{"role": "assistant", "content": reply["content"]}]})
    assert back["messages"][0]["tool_calls"][0]["function"]["arguments"] == '{"path": "a'


def test_responses_items_become_the_chat_history():
    body = {
        "model": "m",
        "instructions": "sys",
        "max_output_tokens": 50,
        "tool_choice": "required",
        "tools": [{"type": "function", "name": "read_file", "parameters": {"type": "object"}}],
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "go"}]},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "reading"}]},
            {
                "type": "function_call",
                "id": "fc_call_7",
                "call_id": "call_7",
                "name": "read_file",
                "arguments": '{"path": "a.py"}',
            },
            {"type": "function_call", "call_id": "call_8", "name": "read_file", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_7", "output": "x = 1"},
            {"type": "function_call_output", "call_id": "call_8", "output": "y"},
        ],
    }
    chat = responses.to_chat(body)
    assert body_error(chat) is None
    second = {"id": "call_8", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    assert chat["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "reading", "tool_calls": [CALL, second]},
        {"role": "tool", "tool_call_id": "call_7", "content": "x = 1"},
        {"role": "tool", "tool_call_id": "call_8", "content": "y"},
    ]
    assert (chat["max_tokens"], chat["tool_choice"]) == (50, "required")


def test_responses_answer_keeps_call_ids_and_says_when_incomplete():
    done = responses.from_chat(completion("looking", [CALL]), {"instructions": "sys"})
    assert [i["type"] for i in done["output"]] == ["message", "function_call"]
    assert done["output"][1] | {} == {
        "type": "function_call",
        "id": "fc_call_7",
        "call_id": "call_7",
        "name": "read_file",
        "arguments": '{"path": "a.py"}',
        "status": "completed",
    }
    assert (done["status"], done["instructions"], done["usage"]["total_tokens"]) == ("completed", "sys", 14)
    cut = responses.from_chat(completion("partial", finish="length"), {})
    assert (cut["status"], cut["incomplete_details"]) == ("incomplete", {"reason": "max_output_tokens"})
    kinds = [
        json.loads(line[6:])["type"]
        for line in "".join(responses.stream({}, cut, {})).splitlines()
        if line.startswith("data: ")
    ]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.incomplete"


@pytest.mark.parametrize(
    "translate,body,field",
    [
        (anthropic.to_chat, {"messages": [{"role": "user", "content": "go"}]}, "max_tokens"),
        (anthropic.to_chat, {"max_tokens": 1, "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            anthropic.to_chat,
            {"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": 3}]}]},
            "messages[0].content[0].tool_use_id",
        ),
        (
            anthropic.to_chat,
            {"max_tokens": 1, "messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "sometimes"}},
            "tool_choice",
        ),
        (responses.to_chat, {"input": 3}, "input"),
        (responses.to_chat, {"input": [{"type": "function_call", "call_id": "c", "name": "n"}]}, "input[0].arguments"),
        (responses.to_chat, {"input": "go", "max_output_tokens": "9"}, "max_output_tokens"),
        (responses.to_chat, {"input": [{"role": "tool", "content": "x"}]}, "input[0].role"),
    ],
)
def test_a_body_the_dialect_cannot_serve_names_its_field(translate, body, field):
    with pytest.raises(DialectError, match=field.replace("[", r"\[").replace("]", r"\]")) as err:
        translate(body)
    assert "\n" not in str(err.value)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

KEYS = [
    "model",
    "max_tokens",
    "messages",
    "role",
    "content",
    "type",
    "text",
    "id",
    "name",
    "input",
    "tool_use_id",
    "system",
    "tools",
    "input_schema",
    "tool_choice",
    "instructions",
    "call_id",
    "arguments",
    "output",
    "previous_response_id",
    "stream",
    "max_output_tokens",
    "parameters",
]
WORDS = [
    "user",
    "assistant",
    "text",
    "tool_use",
    "tool_result",
    "message",
    "function_call",
    "function_call_output",
    "function",
    "reasoning",
    "input_text",
    "any",
    "tool",
]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(WORDS),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=5),
    max_leaves=25,
)


# Blocks and items shaped nearly right, so that most examples reach the deeper checks.
PART = st.fixed_dictionaries(
    {"type": st.sampled_from(WORDS)},
    optional={
        k: JSON
        for k in ("text", "id", "name", "input", "tool_use_id", "content", "call_id", "arguments", "output", "role")
    },
)
MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "developer"]) | JSON,
        "content": st.sampled_from(WORDS) | st.lists(PART, max_size=3) | JSON,
    }
)
BODY = st.fixed_dictionaries(
    {
        "max_tokens": st.integers(1, 9) | JSON,
        "messages": st.lists(MESSAGE | PART, max_size=4),
        "input": st.sampled_from(WORDS) | st.lists(MESSAGE | PART, max_size=4),
    },
    optional={k: JSON for k in KEYS if k not in ("max_tokens", "messages", "input")},
)


@settings(max_examples=80, deadline=None)
@given(body=BODY | st.dictionaries(st.sampled_from(KEYS), JSON, max_size=6))
def test_any_body_is_translated_or_refused_in_one_line(body):
    """Whatever a client sends, a translator gives a chat body the gateway accepts or a
    DialectError: never another exception (the handler would answer 500, not 400)."""
    for translate in (anthropic.to_chat, responses.to_chat):
        try:
            chat = translate(body)
        except DialectError as exc:
            assert "\n" not in str(exc)
        else:
            assert body_error(chat) is None, (body, chat)


PATCH = "*** Begin Patch\n*** Add File: a.py\n+x = 1\n*** End Patch\n"


def test_responses_custom_tools_are_one_text_input_both_ways():
    """A custom (freeform) tool, as Codex sends apply_patch: a chat function of one string
    ``input``; its calls and outputs in the history, and an answer's call of it, keep the text."""
    tools = [{"type": "custom", "name": "apply_patch", "description": "patch", "format": {"type": "grammar"}}]
    chat = responses.to_chat(
        {
            "tools": tools,
            "input": [
                {"role": "user", "content": "go"},
                {"type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch", "input": PATCH},
                {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Done!"},
            ],
        }
    )
    assert body_error(chat) is None
    (fn,) = chat["tools"]
    assert fn["function"]["name"] == "apply_patch" and fn["function"]["parameters"]["required"] == ["input"]
    assert chat["messages"][1]["tool_calls"][0]["function"] == {
        "name": "apply_patch",
        "arguments": json.dumps({"input": PATCH}),
    }
    assert chat["messages"][2] == {"role": "tool", "tool_call_id": "call_1", "content": "Done!"}
    call = {
        "id": "call_2",
        "type": "function",
        "function": {"name": "apply_patch", "arguments": json.dumps({"input": PATCH})},
    }
    reply = responses.from_chat(completion(None, [call]), {"tools": tools})
    (item,) = reply["output"]
    assert (item["type"], item["call_id"], item["input"]) == ("custom_tool_call", "call_2", PATCH)
    events = [
        json.loads(line[6:])
        for line in "".join(responses.stream({}, reply, {"tools": tools})).splitlines()
        if line.startswith("data: ")
    ]
    assert "".join(e["delta"] for e in events if e["type"] == "response.custom_tool_call_input.delta") == PATCH
    assert [e["input"] for e in events if e["type"] == "response.custom_tool_call_input.done"] == [PATCH]


def test_responses_hosted_tools_are_refused_naming_the_tool():
    with pytest.raises(DialectError, match=r"tools\[1\]") as err:
        responses.to_chat(
            {
                "input": "go",
                "tools": [{"type": "function", "name": "f"}, {"type": "web_search", "external_web_access": True}],
            }
        )
    assert "\n" not in str(err.value)
