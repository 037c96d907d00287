"""The gateway's Anthropic Messages and OpenAI Responses dialects, over HTTP, through each
dialect's own client library (``anthropic``, ``openai``), JSON and SSE.

Each test plays an agent: it executes the reference model's tool calls against a copy of the
fixture and sends the results back in the dialect's own shape. The same behaviour driven over
Chat Completions (the ``openai`` client) is the yardstick: the exchange events recorded through
a dialect equal those recorded through Chat Completions, apart from ``dialect`` and the
timings. One gateway serves the whole module (tests/test_gateway_support.py).
"""

from __future__ import annotations

import functools
import json

import pytest

from claimgrid.gateway.dialects import CHAT_COMPLETIONS, dialects
from claimgrid.gateway.exchanges import BLIND_MODEL
from claimgrid.reference import registry

from tests import loopback_http
from tests.conftest import LazyModule
from tests.test_gateway_support import TOOLS, register, run_tool, shared_gateway, workspace

anthropic, openai = LazyModule("anthropic"), LazyModule("openai")  # each client: only on the worker that runs these
SYSTEM = "You are an agent."
TIMING = ("t", "latency_ms", "dialect")
NAMES = {d.name for d in dialects()}
# The model that does the task (the default grid's first) and every output-shape probe: each
# answer shape a real model sends (parallel calls, text with calls, a reused id, a cut-off
# final, ...), and so each case a translation has to carry.
MODELS = [registry.default_models()[0]] + [m.name for m in registry.models().values() if m.default and m.shape]


def _root(url: str) -> str:
    return url.removesuffix("/v1")  # the Anthropic client appends /v1/messages itself


@functools.cache
def _openai(url: str) -> openai.OpenAI:
    # One client (one connection pool) per gateway; each run's copy only changes the key.
    return openai.OpenAI(base_url=url, api_key="unset", max_retries=0)


@functools.cache
def _anthropic(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=_root(url), api_key="unset", max_retries=0)


# -- one agent loop per dialect: (final text or None, HTTP status of the last call) ----------


def chat_loop(url, token, model, prompt, ws, stream):
    client = _openai(url).with_options(api_key=token)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    for _ in range(30):
        try:
            if stream:
                content, calls = _chat_stream(
                    client.chat.completions.create(model=model, messages=messages, tools=TOOLS, stream=True)
                )
            else:
                message = client.chat.completions.create(model=model, messages=messages, tools=TOOLS).choices[0].message
                content, calls = (
                    message.content,
                    [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.function.name, "arguments": c.function.arguments},
                        }
                        for c in message.tool_calls or []
                    ],
                )
        except openai.APIStatusError as exc:
            return None, exc.status_code
        messages.append({"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})})
        if not calls:
            return content or None, 200
        for c in calls:
            result = run_tool(ws, c["function"]["name"], c["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})
    return None, 200


def _chat_stream(chunks) -> tuple[str | None, list[dict]]:
    """Text and tool calls accumulated from the chunks, as a client does (the SDK's own
    stream helper refuses a ``length`` finish, which one probe sends on purpose)."""
    text, calls = "", {}
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                slot = calls.setdefault(
                    tc.index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
                )
                slot["id"] = tc.id or slot["id"]
                slot["function"]["name"] += (tc.function and tc.function.name) or ""
                slot["function"]["arguments"] += (tc.function and tc.function.arguments) or ""
    return text or None, [calls[i] for i in sorted(calls)]


ANTHROPIC_TOOLS = [
    {
        "name": t["function"]["name"],
        "description": t["function"]["description"],
        "input_schema": t["function"]["parameters"],
    }
    for t in TOOLS
]


def _anthropic_stream(client, **kw) -> tuple[list[dict], str]:
    """Content blocks and stop reason from the raw stream events, each tool_use's input kept
    as the JSON text received (a client that does not repair cut-off JSON)."""
    blocks: dict[int, dict] = {}
    stop = None
    for event in client.messages.create(stream=True, **kw):
        if event.type == "content_block_start":
            blocks[event.index] = event.content_block.to_dict() | {"_json": ""}
        elif event.type == "content_block_delta":
            if event.delta.type == "text_delta":
                blocks[event.index]["text"] += event.delta.text
            else:
                blocks[event.index]["_json"] += event.delta.partial_json
        elif event.type == "message_delta":
            stop = event.delta.stop_reason
    out = []
    for i in sorted(blocks):
        block = blocks[i]
        raw = block.pop("_json")
        if block["type"] == "tool_use":
            try:
                block["input"] = json.loads(raw) if raw else {}
            except ValueError:
                block["input"] = raw
        out.append(block)
    return out, stop


def messages_loop(url, token, model, prompt, ws, stream):
    client = _anthropic(url).with_options(api_key=token)
    messages: list[dict] = [{"role": "user", "content": prompt}]
    kw = dict(model=model, max_tokens=1024, system=SYSTEM, tools=ANTHROPIC_TOOLS)
    for _ in range(30):
        try:
            if stream:
                content, stop = _anthropic_stream(client, messages=messages, **kw)
            else:
                reply = client.messages.create(messages=messages, **kw)
                content, stop = [b.to_dict(warnings=False) for b in reply.content], reply.stop_reason
        except anthropic.APIStatusError as exc:
            return None, exc.status_code
        messages.append({"role": "assistant", "content": content})
        uses = [b for b in content if b["type"] == "tool_use"]
        if not uses:
            return "".join(b["text"] for b in content if b["type"] == "text") or None, 200
        assert stop in ("tool_use", "max_tokens")
        results = []
        for b in uses:
            arguments = b["input"] if isinstance(b["input"], str) else json.dumps(b["input"])
            results.append(
                {"type": "tool_result", "tool_use_id": b["id"], "content": run_tool(ws, b["name"], arguments)}
            )
        messages.append({"role": "user", "content": results})
    return None, 200


RESPONSES_TOOLS = [
    {
        "type": "function",
        "name": t["function"]["name"],
        "description": t["function"]["description"],
        "parameters": t["function"]["parameters"],
    }
    for t in TOOLS
]


def responses_loop(url, token, model, prompt, ws, stream):
    client = _openai(url).with_options(api_key=token)
    items: list[dict] = [{"role": "user", "content": prompt}]
    kw = dict(model=model, instructions=SYSTEM, tools=RESPONSES_TOOLS)
    for _ in range(30):
        try:
            if stream:
                # The SDK's stream helper checks the events' order and identities as they pass;
                # an incomplete answer ends in response.incomplete, as the API's own does.
                with client.responses.stream(input=items, **kw) as s:
                    ends = [e.response for e in s if e.type in ("response.completed", "response.incomplete")]
                reply = ends[-1]
            else:
                reply = client.responses.create(input=items, **kw)
        except openai.APIStatusError as exc:
            return None, exc.status_code
        output = [item.to_dict() for item in reply.output]
        items.extend(output)
        calls = [item for item in output if item["type"] == "function_call"]
        if not calls:
            return reply.output_text or None, 200
        for c in calls:
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": c["call_id"],
                    "output": run_tool(ws, c["name"], c["arguments"]),
                }
            )
    return None, 200


LOOPS = {"anthropic-messages": messages_loop, "openai-responses": responses_loop}


def _run(loop, task, tmp_path, model, stream):
    # One run id for the pair: the policies' traces name it (delegation_id).
    token, _ = register(task, model=model, max_model_calls=24, run_id=f"dialects-{model}")
    gw = shared_gateway()
    final, status = loop(gw.url, token, model, task.spec.prompt, workspace(task, tmp_path), stream)
    events, raw = gw.finish(token)
    return final, status, events, raw


def _facts(events):
    return [{k: v for k, v in e.items() if k not in TIMING} for e in events]


@functools.cache
def _over_chat(task_id: str, model: str, stream: bool):
    """What the behaviour gives over Chat Completions (the yardstick), once per module."""
    import tempfile
    from pathlib import Path

    from claimgrid.inputs.tasks import load_tasks

    with tempfile.TemporaryDirectory() as tmp:
        final, status, events, _ = _run(chat_loop, load_tasks()[task_id], Path(tmp), model, stream)
    assert {e["dialect"] for e in events} == {CHAT_COMPLETIONS}
    return final, status, _facts(events)


def test_the_dialects_are_the_gateways_routes():
    assert NAMES == {CHAT_COMPLETIONS, *LOOPS}  # every dialect served is tested here


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("dialect", list(LOOPS))
def test_every_behaviour_records_as_over_chat_completions(tasks, tmp_path, dialect, stream):
    """Each reference model of the default grid (but the deadline faults), driven through the
    dialect's client: the same final text, status and exchange events as through Chat Completions."""
    task = tasks["fix-float-add"]
    for model in MODELS:
        want_final, want_status, want = _over_chat(task.id, model, stream)
        final, status, events, raw = _run(LOOPS[dialect], task, tmp_path, model, stream)
        assert (final, status) == (want_final, want_status), model
        assert _facts(events) == want, model
        assert {e["dialect"] for e in events} == {dialect}
        assert all(r["dialect"] == dialect and r["dialect_response"] for r in raw)
        # The raw line keeps the internal chat request and answer, which the ledger readers read.
        assert all(r["request"] is None or r["request"]["messages"] for r in raw)


def test_diligent_tool_round_trip_matches_ids(tasks, tmp_path):
    """A tool call id is the same in both dialects as in the exchange event, and every result
    the client returned is recorded with the request that carried it."""
    task = tasks["fix-float-add"]
    for loop in LOOPS.values():
        final, status, events, raw = _run(loop, task, tmp_path, "diligent", False)
        assert status == 200 and final and "trace:" in final
        requested = [c["id"] for e in events for c in e["tool_calls"]]
        returned = [m["tool_call_id"] for r in raw for m in r["request"]["messages"] if m["role"] == "tool"]
        assert requested and set(returned) == set(requested)
        assert sum(len(e["tool_results"]) for e in events) == len(requested)


def test_the_anthropic_stream_accumulates_in_the_sdk(tasks):
    """The SDK's own MessageStream builds the final message from the gateway's events."""
    token, _ = register(tasks["fix-float-add"], model="text-and-calls")
    client = anthropic.Anthropic(base_url=_root(shared_gateway().url), api_key=token, max_retries=0)
    with client.messages.stream(
        model="m", max_tokens=64, messages=[{"role": "user", "content": "go"}], tools=ANTHROPIC_TOOLS
    ) as s:
        kinds = [e.type for e in s]
        message = s.get_final_message()
    events, _ = shared_gateway().finish(token)
    assert {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    } <= set(kinds)
    sent = events[0]
    assert [b.type for b in message.content] == ["text"] * bool(sent["content"]) + ["tool_use"] * len(
        sent["tool_calls"]
    )
    assert [(b.id, b.name, json.dumps(b.input)) for b in message.content if b.type == "tool_use"] == [
        (c["id"], c["name"], json.dumps(json.loads(c["arguments"]))) for c in sent["tool_calls"]
    ]
    assert message.stop_reason == "tool_use" and message.usage.output_tokens == sent["usage"]["completion_tokens"]


def test_bearer_token_for_anthropic_clients(tasks):
    """Claude Code's ANTHROPIC_AUTH_TOKEN arrives as a bearer token, not in x-api-key."""
    token, _ = register(tasks["fix-float-add"], model="diligent")
    client = anthropic.Anthropic(base_url=_root(shared_gateway().url), auth_token=token, max_retries=0)
    reply = client.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": "go"}])
    shared_gateway().finish(token)
    assert reply.type == "message" and reply.usage.input_tokens > 0


BAD = {
    "anthropic-messages": [
        ({"model": "m", "messages": [{"role": "user", "content": "go"}]}, "max_tokens"),
        ({"max_tokens": 8, "messages": [{"role": "tool", "content": "x"}]}, "messages[0]"),
        (
            {"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
            "messages[0].content[0]",
        ),
        (
            {"max_tokens": 8, "messages": [{"role": "user", "content": "go"}], "tools": [{"type": "web_search"}]},
            "tools[0]",
        ),
    ],
    "openai-responses": [
        ({"model": "m"}, "input"),
        ({"input": "go", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type"),
        ({"input": "go", "tools": [{"type": "web_search"}]}, "tools[0]"),
    ],
}
PATHS = {"anthropic-messages": "/messages", "openai-responses": "/responses"}


@pytest.mark.parametrize("dialect", list(LOOPS))
def test_bad_requests_get_the_dialects_error_shape(tasks, dialect):
    token, _ = register(tasks["fix-float-add"], model="diligent")
    url = shared_gateway().url + PATHS[dialect]
    headers = {"x-api-key": token} if dialect == "anthropic-messages" else {"authorization": f"Bearer {token}"}
    answers = [loopback_http.post(url, json=body, headers=headers) for body, _ in BAD[dialect]]
    answers.append(loopback_http.post(url, content=b"{not json", headers=headers))
    unknown = loopback_http.post(url, json={}, headers={"x-api-key": "nobody", "authorization": "Bearer nobody"})
    events, raw = shared_gateway().finish(token)
    for r, (_, field) in zip(answers, [*BAD[dialect], (None, "JSON")]):
        assert r.status_code == 400
        message = r.json()["error"]["message"]
        assert field in message and "\n" not in message and "Traceback" not in r.text
    assert unknown.status_code == 401
    if dialect == "anthropic-messages":
        assert all(
            r.json()["type"] == "error" and r.json()["error"]["type"] == "invalid_request_error" for r in answers
        )
        assert unknown.json()["error"]["type"] == "authentication_error"
    else:
        assert all(r.json()["error"]["code"] == "invalid_request" for r in answers)
        assert unknown.json()["error"]["code"] == "invalid_api_key"
    # Every refusal of a registered run is recorded, in its dialect; the unknown token nowhere.
    assert [e["status"] for e in events] == [400] * len(answers)
    assert all(e["dialect"] == dialect and e["served_model"] is None for e in events)
    assert [r["dialect_response"] for r in raw] == [a.json() for a in answers]


def test_budget_refusal_reaches_the_client_in_its_dialect(tasks):
    """A refusal the gateway makes after the body is read (the call budget) is the client's
    own error class: the SDKs raise it, with the gateway's message."""
    token, _ = register(tasks["fix-float-add"], model="diligent", max_model_calls=0)
    client = anthropic.Anthropic(base_url=_root(shared_gateway().url), api_key=token, max_retries=0)
    with pytest.raises(anthropic.RateLimitError, match="budget"):
        client.messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "go"}])
    oa = openai.OpenAI(base_url=shared_gateway().url, api_key=token, max_retries=0)
    with pytest.raises(openai.RateLimitError, match="budget"):
        oa.responses.create(model="m", input="go")
    events, _ = shared_gateway().finish(token)
    assert [(e["status"], e["dialect"]) for e in events] == [(429, "anthropic-messages"), (429, "openai-responses")]


@pytest.mark.parametrize("dialect", list(LOOPS))
def test_replay_serves_a_recording_in_the_clients_dialect(tasks, tmp_path, dialect):
    """``grid.py replay``'s provider: a run recorded through a dialect, replayed offline to the
    same client, gives the same answers, and every request hashes as the recorded one."""
    from claimgrid.gateway import Gateway
    from claimgrid.gateway.recorded import ReplaySource
    from claimgrid.store.lines import EVENTS_NAME

    from tests.test_gateway_support import script

    task = tasks["fix-float-add"]
    final, status, events, raw = _run(LOOPS[dialect], task, tmp_path, "diligent", True)
    run = tmp_path / "ledger" / "runs" / "dialects-diligent"
    run.mkdir(parents=True)
    (run / "gateway.jsonl").write_text("".join(json.dumps(r) + "\n" for r in raw))
    (run / EVENTS_NAME).write_text("".join(json.dumps(e) + "\n" for e in events))
    replaying = Gateway(replay=ReplaySource(tmp_path / "ledger"))
    url = replaying.start()
    try:
        replaying.register("replay", script(task, model="diligent", run_id="dialects-diligent"))
        again = LOOPS[dialect](url, "replay", "diligent", task.spec.prompt, workspace(task, tmp_path), True)
        replayed, _ = replaying.finish("replay")
    finally:
        # Its keep-alive connections closed first: the server waits for open ones when it stops.
        (_anthropic if dialect == "anthropic-messages" else _openai)(url).close()
        replaying.stop()
    assert status == 200 and again == (final, status)
    assert [e["replay"]["match"] for e in replayed] == [True] * len(events)
    assert {e["dialect"] for e in replayed} == {dialect}
    assert [e["tool_calls"] for e in replayed] == [e["tool_calls"] for e in events]


def _is_error_loop(url, token, model, prompt, ws, stream):
    """The Messages loop as Claude Code sends a failed tool: ``is_error: true`` and its own text,
    without the harness tool layer's ``ERROR: `` form."""
    client = _anthropic(url).with_options(api_key=token)
    messages: list[dict] = [{"role": "user", "content": prompt}]
    kw = dict(model=model, max_tokens=1024, system=SYSTEM, tools=ANTHROPIC_TOOLS)
    for _ in range(30):
        reply = client.messages.create(messages=messages, **kw)
        content = [b.to_dict(warnings=False) for b in reply.content]
        messages.append({"role": "assistant", "content": content})
        uses = [b for b in content if b["type"] == "tool_use"]
        if not uses:
            return "".join(b["text"] for b in content if b["type"] == "text") or None, 200
        results = []
        for b in uses:
            arguments = b["input"] if isinstance(b["input"], str) else json.dumps(b["input"])
            text = run_tool(ws, b["name"], arguments)
            failed = text.startswith("ERROR: ")
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": b["id"],
                    "is_error": failed,
                    "content": [{"type": "text", "text": text.removeprefix("ERROR: ")}],
                }
            )
        messages.append({"role": "user", "content": results})
    return None, 200


def test_a_tool_result_with_is_error_is_recorded_as_a_failed_result(tasks, tmp_path):
    """Claude Code marks a failed tool with ``is_error``: the exchange records it as the Chat
    Completions path records a harness tool's failure (an ``ERROR: `` result), event for event."""
    from claimgrid.classify.evidence import own_tool_events

    task = tasks["fix-float-add"]
    model = next(m.name for m in registry.models().values() if m.fault and "JSON" in m.behaviour)
    want_final, want_status, want = _over_chat(task.id, model, False)
    final, status, events, raw = _run(_is_error_loop, task, tmp_path, model, False)
    assert (final, status) == (want_final, want_status)
    assert _facts(events) == want
    failed = [t for t in own_tool_events(events, None) if not t["ok"]]
    assert failed and all(t["error"] and not t["error"].startswith("ERROR: ") for t in failed)
    assert any(
        b.get("is_error")
        for r in raw
        for m in r["dialect_request"]["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
    )


def test_count_tokens_is_the_estimate_the_call_reports_and_no_model_call(tasks):
    token, _ = register(tasks["fix-float-add"], model="diligent")
    client = anthropic.Anthropic(base_url=_root(shared_gateway().url), api_key=token, max_retries=0)
    kw = dict(
        model="m",
        system=SYSTEM,
        messages=[{"role": "user", "content": "fix the bug in TICKET.md"}],
        tools=ANTHROPIC_TOOLS,
    )
    counted = client.messages.count_tokens(**kw)
    sent = client.messages.create(max_tokens=64, **kw)
    bad = loopback_http.post(
        shared_gateway().url + "/messages/count_tokens",
        json={"messages": []},
        headers={"x-api-key": token, "anthropic-version": "2023-06-01"},
    )
    nobody = loopback_http.post(
        shared_gateway().url + "/messages/count_tokens",
        json={},
        headers={"x-api-key": "nobody", "anthropic-version": "2023-06-01"},
    )
    events, _ = shared_gateway().finish(token)
    assert counted.input_tokens == sent.usage.input_tokens > 0
    assert bad.status_code == 400 and "messages" in bad.json()["error"]["message"]
    assert bad.json()["type"] == "error" and nobody.status_code == 401
    assert [e["call_index"] for e in events] == [0]  # the count is not a model call


def test_the_model_list_in_both_clients_shapes(tasks):
    token, script = register(tasks["fix-float-add"], model="diligent")
    url = shared_gateway().url
    listed = anthropic.Anthropic(base_url=_root(url), api_key=token, max_retries=0).models.list()
    one = anthropic.Anthropic(base_url=_root(url), auth_token=token, max_retries=0).models.retrieve(BLIND_MODEL)
    other = _openai(url).with_options(api_key=token).models.list()
    with pytest.raises(anthropic.NotFoundError):
        # the assigned model's own name is not the agent's: not found, as any other
        anthropic.Anthropic(base_url=_root(url), api_key=token, max_retries=0).models.retrieve(script.model)
    events, _ = shared_gateway().finish(token)
    assert [m.id for m in listed.data] == [BLIND_MODEL] == [m.id for m in other.data]
    assert listed.data[0].type == "model" and one.id == BLIND_MODEL and one.display_name
    assert events == []  # no model call


def test_a_refused_request_sent_again_records_its_results_and_counts_each_once(tasks):
    """Claude Code sends a request the gateway refuses with 400 three times (2.1.328, measured):
    every attempt is a recorded call (the budget counts it, as any client's retry), the tool
    result it carries is in each refused exchange, and the agent's results count once."""
    from claimgrid.classify.evidence import returned_results

    token, _ = register(tasks["fix-float-add"], model="diligent")
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    history = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "TICKET.md"}}],
        },
    ]

    def send(result_content):
        body = {
            "model": "m",
            "max_tokens": 64,
            "messages": [
                *history,
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result_content}],
                },
            ],
        }
        return loopback_http.post(shared_gateway().url + "/messages", json=body, headers={"x-api-key": token})

    refused = [send([{"type": "text", "text": "the ticket"}, image]) for _ in range(3)]
    served = send([{"type": "text", "text": "the ticket"}])
    events, _ = shared_gateway().finish(token)
    assert [r.status_code for r in refused] == [400] * 3 and served.status_code == 200
    assert [e["status"] for e in events] == [400, 400, 400, 200]
    assert [e["tool_results"] for e in events] == [["the ticket"]] * 4
    assert [e["tool_result_ids"] for e in events] == [["toolu_1"]] * 4
    assert returned_results(events) == ["the ticket"]
