"""OpenAI Responses (``POST /v1/responses``), the API Codex CLI speaks.

Request -> internal chat request:

- ``instructions`` becomes the first, ``system`` message; ``input`` as a string one ``user``
  message; as a list of items: a ``message`` item (``role`` user / assistant / system /
  developer, content a string or ``input_text`` / ``output_text`` parts) a message of that
  role; ``function_call`` items the ``tool_calls`` of the assistant message they follow (a new
  one when none precedes them), ``id`` = ``call_id``; ``function_call_output`` a ``tool``
  message (``tool_call_id`` = ``call_id``); ``reasoning`` items are dropped;
- one text part is sent as a string, several as text content parts (the policies read both);
- function ``tools`` (``name``, ``description``, ``parameters``) become chat function tools;
  a ``custom`` (freeform) tool, whose call carries one text ``input`` (Codex's ``apply_patch``),
  becomes a chat function tool of one string argument ``input``; ``custom_tool_call`` items
  become tool calls with arguments ``{"input": ...}`` and ``custom_tool_call_output`` items
  ``tool`` messages;
  ``tool_choice``, ``parallel_tool_calls``, ``temperature``, ``top_p`` carry over and
  ``max_output_tokens`` becomes ``max_tokens``.

Answer -> Responses ``response`` object: a ``message`` output item with one ``output_text``
part (when the answer has text), then one ``function_call`` item per tool call (``call_id`` =
the internal id, item ``id`` = ``fc_`` + it, ``arguments`` exactly as the model gave them; a
call of a ``custom`` tool of the request is a ``custom_tool_call`` item with its ``input``:
the ``input`` argument when the arguments are a JSON object that has it, else the arguments
text as it is);
``status`` ``completed``, or ``incomplete`` with ``incomplete_details.reason``
``max_output_tokens`` (length) or ``content_filter``; ``usage`` as ``input_tokens`` /
``output_tokens`` / ``total_tokens``.

The gateway keeps no response state: ``previous_response_id`` and ``item_reference`` items are
refused (400), as are non-text input parts and tools other than functions and custom tools
(hosted tools such as ``web_search``, ``namespace`` groups). The key arrives as
a bearer token, as from every OpenAI client.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from numbers import Real

from claimgrid.gateway.dialects.wire import Dialect, DialectError, bearer, joined_text
from claimgrid.gateway.exchanges import openai_error
from claimgrid.gateway.sse import pieces

NAME = "openai-responses"
ROLES = ("user", "assistant", "system", "developer")
TEXT_PARTS = ("input_text", "output_text", "text")
INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}
DROPPED_ITEMS = ("reasoning",)
TOOL_TYPES = ("function", "custom")
# A custom (freeform) tool as a chat function: its call's one text input is the argument ``input``.
CUSTOM_PARAMETERS = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}


def custom_tools(body: dict) -> set[str]:
    """Names of the request's ``custom`` tools (their calls are ``custom_tool_call`` items)."""
    given = body.get("tools")
    tools = given if isinstance(given, list) else []
    return {
        t["name"] for t in tools if isinstance(t, dict) and t.get("type") == "custom" and isinstance(t.get("name"), str)
    }


def _custom_input(arguments: str) -> str:
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError):
        return arguments
    return parsed["input"] if isinstance(parsed, dict) and isinstance(parsed.get("input"), str) else arguments


def _text(value, where: str) -> str | list[dict]:
    return joined_text(value, where, TEXT_PARTS, "an input_text or output_text part with a string 'text'", "text parts")


def _string(item: dict, key: str, where: str) -> str:
    if not isinstance(item.get(key), str):
        raise DialectError(f"'{where}.{key}' must be a string")
    return item[key]


def _items(items: list, out: list[dict]) -> None:
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise DialectError(f"'{where}' must be an object")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            if item.get("role") not in ROLES:
                raise DialectError(f"'{where}.role' must be one of {', '.join(ROLES)}")
            out.append({"role": item["role"], "content": _text(item.get("content"), f"{where}.content")})
        elif kind == "function_call":
            call_id = _string(item, "call_id", where)
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": _string(item, "name", where), "arguments": _string(item, "arguments", where)},
            }
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "custom_tool_call":
            call_id = _string(item, "call_id", where)
            args = json.dumps({"input": _string(item, "input", where)})
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": _string(item, "name", where), "arguments": args},
            }
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = _text(item.get("output"), f"{where}.output")
            out.append({"role": "tool", "tool_call_id": _string(item, "call_id", where), "content": output})
        elif kind in DROPPED_ITEMS:
            continue
        else:
            raise DialectError(
                f"'{where}.type' must be message, function_call, function_call_output, custom_tool_call, "
                "custom_tool_call_output or reasoning (this gateway keeps no stored items)"
            )


def _tools(tools) -> list[dict]:
    if not isinstance(tools, list):
        raise DialectError("'tools' must be a list of objects")
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") not in TOOL_TYPES or not isinstance(tool.get("name"), str):
            raise DialectError(
                f"'tools[{i}]' must be a function or custom tool ({{'type': 'function' or 'custom', 'name': string, ...}})"
            )
        params = CUSTOM_PARAMETERS if tool["type"] == "custom" else tool.get("parameters")
        fn = {"name": tool["name"], "parameters": params or {"type": "object", "properties": {}}}
        if isinstance(tool.get("description"), str):
            fn["description"] = tool["description"]
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(choice) -> str | dict:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise DialectError("'tool_choice' must be auto, none, required or {'type': 'function', 'name': string}")


def to_chat(body: dict) -> dict:
    """The internal chat request of a Responses request body (module docstring)."""
    if body.get("previous_response_id") is not None:
        raise DialectError(
            "'previous_response_id' is not served: this gateway keeps no responses; send the whole 'input'"
        )
    messages: list[dict] = []
    if body.get("instructions") is not None:
        if not isinstance(body["instructions"], str):
            raise DialectError("'instructions' must be a string")
        messages.append({"role": "system", "content": body["instructions"]})
    given = body.get("input")
    if isinstance(given, str):
        messages.append({"role": "user", "content": given})
    elif isinstance(given, list):
        _items(given, messages)
    else:
        raise DialectError("'input' must be a string or a list of input items")
    if not messages:
        raise DialectError("'input' must hold at least one message")
    chat: dict = {"messages": messages}
    if "model" in body:
        if not isinstance(body["model"], str):
            raise DialectError("'model' must be a string")
        chat["model"] = body["model"]
    for key in ("stream", "parallel_tool_calls"):
        if body.get(key) is not None and not isinstance(body[key], bool):
            raise DialectError(f"'{key}' must be true or false")
    if body.get("stream"):
        chat["stream"] = True
    if body.get("parallel_tool_calls") is not None:
        chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    if body.get("tools") is not None:
        chat["tools"] = _tools(body["tools"])
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    limit = body.get("max_output_tokens")
    if limit is not None:
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise DialectError("'max_output_tokens' must be an integer")
        chat["max_tokens"] = limit
    for key in ("temperature", "top_p"):
        value = body.get(key)
        if value is not None:
            if not isinstance(value, Real) or isinstance(value, bool):
                raise DialectError(f"'{key}' must be a number")
            chat[key] = value
    return chat


def from_chat(response: dict, body: dict) -> dict:
    """The Responses ``response`` object of an internal chat completion (module docstring)."""
    choice = response["choices"][0]
    message = choice["message"]
    suffix = str(response["id"]).removeprefix("chatcmpl-")
    output: list[dict] = []
    if isinstance(message.get("content"), str) and message["content"]:
        part = {"type": "output_text", "text": message["content"], "annotations": [], "logprobs": []}
        output.append(
            {"type": "message", "id": f"msg_{suffix}", "status": "completed", "role": "assistant", "content": [part]}
        )
    custom = custom_tools(body)
    for call in message.get("tool_calls") or []:
        fn = call["function"]
        if fn["name"] in custom:
            output.append(
                {
                    "type": "custom_tool_call",
                    "id": f"ctc_{call['id']}",
                    "call_id": call["id"],
                    "name": fn["name"],
                    "input": _custom_input(fn["arguments"]),
                    "status": "completed",
                }
            )
            continue
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{call['id']}",
                "call_id": call["id"],
                "name": fn["name"],
                "arguments": fn["arguments"],
                "status": "completed",
            }
        )
    usage = response.get("usage") or {}
    prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    reason = INCOMPLETE.get(choice.get("finish_reason"))
    return {
        "id": f"resp_{suffix or uuid.uuid4().hex}",
        "object": "response",
        "created_at": response.get("created") or 0,
        "status": "incomplete" if reason else "completed",
        "error": None,
        "incomplete_details": {"reason": reason} if reason else None,
        "instructions": body.get("instructions"),
        "model": response["model"],
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "max_output_tokens": body.get("max_output_tokens"),
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "metadata": {},
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        },
    }


def stream(response: dict, reply: dict, body: dict) -> Iterator[str]:
    """Responses server-sent events of the complete answer ``reply``: response.created,
    response.in_progress, per output item output_item.added, its content (content_part.added,
    output_text.delta / .done, content_part.done; or function_call_arguments.delta / .done),
    output_item.done, then response.completed (response.incomplete when incomplete)."""
    sequence = iter(range(1 << 30))

    def event(kind: str, data: dict) -> str:
        payload = {"type": kind, "sequence_number": next(sequence), **data}
        return f"event: {kind}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n"

    opening = {**reply, "status": "in_progress", "output": [], "incomplete_details": None}
    yield event("response.created", {"response": opening})
    yield event("response.in_progress", {"response": opening})
    for index, item in enumerate(reply["output"]):
        at = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            yield event(
                "response.output_item.added",
                {"output_index": index, "item": {**item, "status": "in_progress", "content": []}},
            )
            part = item["content"][0]
            empty = {**part, "text": ""}
            yield event("response.content_part.added", {**at, "content_index": 0, "part": empty})
            for piece in pieces(part["text"]):
                yield event("response.output_text.delta", {**at, "content_index": 0, "delta": piece, "logprobs": []})
            yield event("response.output_text.done", {**at, "content_index": 0, "text": part["text"], "logprobs": []})
            yield event("response.content_part.done", {**at, "content_index": 0, "part": part})
        elif item["type"] == "custom_tool_call":
            yield event(
                "response.output_item.added",
                {"output_index": index, "item": {**item, "input": "", "status": "in_progress"}},
            )
            for piece in pieces(item["input"]):
                if piece:
                    yield event("response.custom_tool_call_input.delta", {**at, "delta": piece})
            yield event("response.custom_tool_call_input.done", {**at, "input": item["input"]})
        else:
            opened = {**item, "arguments": "", "status": "in_progress"}
            yield event("response.output_item.added", {"output_index": index, "item": opened})
            for piece in pieces(item["arguments"]):
                if piece:
                    yield event("response.function_call_arguments.delta", {**at, "delta": piece})
            yield event(
                "response.function_call_arguments.done", {**at, "name": item["name"], "arguments": item["arguments"]}
            )
        yield event("response.output_item.done", {"output_index": index, "item": item})
    closing = "response.incomplete" if reply["status"] == "incomplete" else "response.completed"
    yield event(closing, {"response": reply})


DIALECT = Dialect(
    name=NAME,
    paths=("/v1/responses", "/responses"),
    to_chat=to_chat,
    from_chat=from_chat,
    stream=stream,
    error=openai_error,
    token=bearer,
)
