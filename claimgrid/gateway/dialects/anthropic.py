"""Anthropic Messages (``POST /v1/messages``), the API Claude Code speaks.

Request -> internal chat request:

- ``system`` (a string or text blocks) becomes the first, ``system`` message;
- a ``user`` message's ``tool_result`` blocks become ``tool`` messages (``tool_call_id`` =
  ``tool_use_id``, the result's text as content; one with ``is_error: true`` starts with
  ``claimgrid.vocab.TOOL_ERROR_PREFIX``, ``ERROR: ``, as a failed call of the harness tool layer
  does in a chat history, so the exchange records it as a failed result), its text blocks one
  ``user`` message after them; an ``assistant`` message's text blocks its content and its ``tool_use`` blocks its
  ``tool_calls`` (``arguments`` = the ``input`` object as JSON text); thinking blocks are
  dropped (the internal form has no place for them);
- one text block is sent as a string, several as text content parts (the policies read both);
- ``tools`` (``name``, ``description``, ``input_schema``) become function tools; ``tool_choice``
  ``auto`` / ``any`` / ``tool`` / ``none`` become ``auto`` / ``required`` / the named function /
  ``none``; ``max_tokens``, ``stop_sequences``, ``temperature`` and ``top_p`` carry over.

Answer -> Messages response: text then ``tool_use`` blocks (same ids); ``stop_reason``
``end_turn`` (stop), ``tool_use`` (tool_calls), ``max_tokens`` (length), ``refusal``
(content_filter); ``usage`` as ``input_tokens`` / ``output_tokens``. A tool call whose arguments
are not a JSON object (a model cut off mid-call) keeps its raw text as ``input`` in a JSON
answer and streams it as it is in ``input_json_delta``: the client sees the fault as it would
from a truncated model stream, and the exchange event records the arguments exactly.

Images, documents and server tools are refused (400): the gateway serves text and client tools.
The tool results such a refused request carries are still recorded (``sent_results``): Claude
Code sends a refused request three times (measured with 2.1.328, whatever
``CLAUDE_CODE_MAX_RETRIES`` says), and each result is taken once (claimgrid.classify.evidence).
The key arrives in ``x-api-key`` (the SDK's ``api_key``) or as a bearer token (its
``auth_token``, Claude Code's ``ANTHROPIC_AUTH_TOKEN``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from numbers import Real

from claimgrid.gateway.dialects.wire import Dialect, DialectError, bearer, joined_text
from claimgrid.gateway.sse import pieces
from claimgrid.vocab import TOOL_ERROR_PREFIX

NAME = "anthropic-messages"
STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens", "content_filter": "refusal"}
TOOL_CHOICES = {"auto": "auto", "any": "required", "none": "none"}
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}
DROPPED_BLOCKS = ("thinking", "redacted_thinking")


def error(status: int, message: str | None, code: str | None = None) -> dict:
    """Anthropic's error body: ``{"type": "error", "error": {"type", "message"}}``."""
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


def token(headers: Mapping[str, str]) -> str | None:
    return headers.get("x-api-key") or bearer(headers)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value, where: str) -> str | list[dict]:
    """A string, or text blocks as one string (one block) or text content parts (several)."""
    return joined_text(value, where, ("text",), "a text block ({'type': 'text', 'text': string})", "text blocks")


def _failed(text: str | list[dict]) -> str | list[dict]:
    """A failed tool result's text as the harness tool layer sends one: ``TOOL_ERROR_PREFIX``
    first (once), the agent's own text after it."""
    if isinstance(text, list):
        first = text[0]["text"] if text else ""
        return [{"type": "text", "text": _failed(first)}, *text[1:]]
    return text if text.startswith(TOOL_ERROR_PREFIX) else TOOL_ERROR_PREFIX + text


def _user(content: list, where: str) -> list[dict]:
    results, texts = [], []
    for j, block in enumerate(content):
        at = f"{where}[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block)
        elif kind == "tool_result":
            if not isinstance(block.get("tool_use_id"), str):
                raise DialectError(f"'{at}.tool_use_id' must be a string")
            inner = block.get("content")
            text = "" if inner is None else _text(inner, f"{at}.content")
            failed = block.get("is_error")
            if failed is not None and not isinstance(failed, bool):
                raise DialectError(f"'{at}.is_error' must be true or false")
            results.append(
                {"role": "tool", "tool_call_id": block["tool_use_id"], "content": _failed(text) if failed else text}
            )
        elif kind in DROPPED_BLOCKS:
            continue
        else:
            raise DialectError(f"'{at}' must be a text or tool_result block (this gateway serves text only)")
    out = results
    if texts:
        out.append({"role": "user", "content": _text(texts, where)})
    return out


def _assistant(content: list, where: str) -> dict:
    texts, calls = [], []
    for j, block in enumerate(content):
        at = f"{where}[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block)
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise DialectError(f"'{at}' must be a tool_use block with string 'id' and 'name'")
            arguments = block.get("input", {})
            # A raw string is what this gateway sent for arguments that were not JSON (module doc).
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            calls.append(
                {"id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": text}}
            )
        elif kind in DROPPED_BLOCKS:
            continue
        else:
            raise DialectError(f"'{at}' must be a text or tool_use block")
    message: dict = {"role": "assistant", "content": _text(texts, where) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _messages(body: dict) -> list[dict]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise DialectError("'messages' must be a non-empty list")
    out: list[dict] = []
    if body.get("system") is not None:
        out.append({"role": "system", "content": _text(body["system"], "system")})
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise DialectError(f"'{where}' must be an object whose 'role' is user or assistant")
        content = m.get("content")
        if isinstance(content, str):
            out.append({"role": m["role"], "content": content})
        elif isinstance(content, list):
            if m["role"] == "user":
                out.extend(_user(content, f"{where}.content"))
            else:
                out.append(_assistant(content, f"{where}.content"))
        else:
            raise DialectError(f"'{where}.content' must be a string or a list of content blocks")
    return out


def _tools(tools) -> list[dict]:
    if not isinstance(tools, list):
        raise DialectError("'tools' must be a list of objects")
    out = []
    for i, tool in enumerate(tools):
        if (
            not isinstance(tool, dict)
            or not isinstance(tool.get("name"), str)
            or not isinstance(tool.get("input_schema"), dict)
            or tool.get("type") not in (None, "custom")
        ):
            raise DialectError(
                f"'tools[{i}]' must be a client tool with a string 'name' and an 'input_schema' object "
                "(server tools are not served)"
            )
        fn = {"name": tool["name"], "parameters": tool["input_schema"]}
        if isinstance(tool.get("description"), str):
            fn["description"] = tool["description"]
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(choice) -> str | dict:
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind in TOOL_CHOICES:
        return TOOL_CHOICES[kind]
    if kind == "tool" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise DialectError("'tool_choice' must be an object whose 'type' is auto, any, tool (with 'name') or none")


def to_chat(body: dict) -> dict:
    """The internal chat request of a Messages request body (module docstring)."""
    chat: dict = {"messages": _messages(body)}
    if "model" in body:
        if not isinstance(body["model"], str):
            raise DialectError("'model' must be a string")
        chat["model"] = body["model"]
    if not _is_int(body.get("max_tokens")):
        raise DialectError("'max_tokens' is required and must be an integer")
    chat["max_tokens"] = body["max_tokens"]
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise DialectError("'stream' must be true or false")
    if stream:
        chat["stream"] = True
    if body.get("tools") is not None:
        chat["tools"] = _tools(body["tools"])
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
        if isinstance(body["tool_choice"], dict) and body["tool_choice"].get("disable_parallel_tool_use") is True:
            chat["parallel_tool_calls"] = False
    stop = body.get("stop_sequences")
    if stop is not None:
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise DialectError("'stop_sequences' must be a list of strings")
        chat["stop"] = stop
    for key in ("temperature", "top_p"):
        value = body.get(key)
        if value is not None:
            if not isinstance(value, Real) or isinstance(value, bool):
                raise DialectError(f"'{key}' must be a number")
            chat[key] = value
    if body.get("top_k") is not None and not _is_int(body["top_k"]):
        raise DialectError("'top_k' must be an integer")
    return chat


def _input(arguments: str):
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError):
        return arguments
    return value if isinstance(value, dict) else arguments


def from_chat(response: dict, body: dict) -> dict:
    """The Messages response of an internal chat completion (module docstring)."""
    choice = response["choices"][0]
    message = choice["message"]
    content: list[dict] = []
    if isinstance(message.get("content"), str) and message["content"]:
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        fn = call["function"]
        content.append({"type": "tool_use", "id": call["id"], "name": fn["name"], "input": _input(fn["arguments"])})
    usage = response.get("usage") or {}
    return {
        "id": "msg_" + str(response["id"]).removeprefix("chatcmpl-"),
        "type": "message",
        "role": "assistant",
        "model": response["model"],
        "content": content,
        "stop_reason": STOP_REASONS.get(choice.get("finish_reason"), "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.get("prompt_tokens") or 0,
            "output_tokens": usage.get("completion_tokens") or 0,
        },
    }


def _event(kind: str, data: dict) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data}, separators=(',', ':'))}\n\n"


def stream(response: dict, reply: dict, body: dict) -> Iterator[str]:
    """Messages server-sent events of the complete answer ``reply``: message_start, per
    block content_block_start / _delta (text_delta, input_json_delta) / _stop, message_delta
    (stop_reason, output usage), message_stop."""
    start = {**reply, "content": [], "stop_reason": None, "usage": {**reply["usage"], "output_tokens": 0}}
    yield _event("message_start", {"message": start})
    calls = iter(response["choices"][0]["message"].get("tool_calls") or [])
    for index, block in enumerate(reply["content"]):
        if block["type"] == "text":
            yield _event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
            for piece in pieces(block["text"]):
                yield _event("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": piece}})
        else:
            arguments = next(calls)["function"]["arguments"]  # the raw text, whatever ``input`` holds
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            yield _event("content_block_start", {"index": index, "content_block": opened})
            for piece in pieces(arguments):
                if piece:
                    delta = {"type": "input_json_delta", "partial_json": piece}
                    yield _event("content_block_delta", {"index": index, "delta": delta})
        yield _event("content_block_stop", {"index": index})
    delta = {"stop_reason": reply["stop_reason"], "stop_sequence": None}
    yield _event("message_delta", {"delta": delta, "usage": {"output_tokens": reply["usage"]["output_tokens"]}})
    yield _event("message_stop", {})


def sent_results(body: dict) -> list[dict]:
    """The ``tool_result`` blocks of the user messages after the last assistant message, as
    internal ``tool`` messages: read leniently (a block this dialect cannot serve, an image in
    a result, is left out) from a body ``to_chat`` refused, so what the agent sent back is in
    the refused request's exchange event."""
    given = body.get("messages")
    messages: list = given if isinstance(given, list) else []
    last = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"), default=-1)
    out = []
    for m in messages[last + 1 :]:
        content = m.get("content") if isinstance(m, dict) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            inner = block.get("content")
            if isinstance(inner, list):
                inner = "\n".join(b["text"] for b in inner if isinstance(b, dict) and isinstance(b.get("text"), str))
            text = inner if isinstance(inner, str) else ""
            text = _failed(text) if block.get("is_error") is True else text
            call_id = block.get("tool_use_id") if isinstance(block.get("tool_use_id"), str) else None
            out.append({"role": "tool", "tool_call_id": call_id, "content": text})
    return out


DIALECT = Dialect(
    name=NAME,
    paths=("/v1/messages",),
    to_chat=to_chat,
    from_chat=from_chat,
    stream=stream,
    error=error,
    token=token,
    sent_results=sent_results,
)
