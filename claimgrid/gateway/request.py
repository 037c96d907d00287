"""Validation of a chat-completions request body: anything malformed is a client error (400).

``parse_body(raw)`` returns ``(body, None)`` for a body the gateway can serve, or
``(None, message)`` with a one-line message naming the field and what is allowed. It never
raises: no body can crash the handler (not even JSON nested 100,000 levels deep, which
makes ``json.loads`` raise ``RecursionError``). Only the shape the gateway and the
reference policies read is checked; OpenAI's other parameters pass through untouched.
"""

from __future__ import annotations

import json
from numbers import Real

MAX_DEPTH = 64  # far beyond any chat request (tool schemas nest a dozen levels), far below the interpreter's limit
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
INTS = ("max_tokens", "max_completion_tokens", "n", "seed", "top_logprobs")
NUMBERS = ("temperature", "top_p", "presence_penalty", "frequency_penalty")


def _depth_exceeds(obj, limit: int) -> bool:
    """Whether ``obj`` nests deeper than ``limit`` (iterative: deep input cannot recurse here)."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return False


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _message_error(i: int, m) -> str | None:
    where = f"messages[{i}]"
    if not isinstance(m, dict):
        return f"'{where}' must be an object with 'role' and 'content', got {type(m).__name__}"
    if m.get("role") not in ROLES:
        return f"'{where}.role' must be one of {', '.join(ROLES)}"
    content = m.get("content")
    if content is not None and not isinstance(content, (str, list)):
        return f"'{where}.content' must be a string, a list of content parts or null"
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("text", ""), str):
                return f"'{where}.content[{j}]' must be a content part object whose 'text' is a string"
    calls = m.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            return f"'{where}.tool_calls' must be a list"
        for j, call in enumerate(calls):
            fn = call.get("function") if isinstance(call, dict) else None
            if (
                not isinstance(fn, dict)
                or not isinstance(fn.get("name"), str)
                or not isinstance(fn.get("arguments", ""), (str, type(None)))
            ):
                return (
                    f"'{where}.tool_calls[{j}]' must be an object with 'function': "
                    "{'name': string, 'arguments': string}"
                )
    for key in ("tool_call_id", "name"):
        if key in m and m[key] is not None and not isinstance(m[key], str):
            return f"'{where}.{key}' must be a string"
    return None


def body_error(body) -> str | None:
    """The first thing wrong with a parsed body, or None."""
    if not isinstance(body, dict):
        return f"request body must be a JSON object, got {type(body).__name__}"
    if _depth_exceeds(body, MAX_DEPTH):
        return f"request body nests deeper than {MAX_DEPTH} levels"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list"
    for i, m in enumerate(messages):
        err = _message_error(i, m)
        if err:
            return err
    if "model" in body and not isinstance(body["model"], str):
        return "'model' must be a string"
    if "stream" in body and body["stream"] is not None and not isinstance(body["stream"], bool):
        return "'stream' must be true or false"
    if body.get("stream_options") is not None and not isinstance(body["stream_options"], dict):
        return "'stream_options' must be an object"
    if body.get("tools") is not None and (
        not isinstance(body["tools"], list) or not all(isinstance(t, dict) for t in body["tools"])
    ):
        return "'tools' must be a list of objects"
    for key in INTS:
        if body.get(key) is not None and not _is_int(body[key]):
            return f"'{key}' must be an integer"
    for key in NUMBERS:
        if body.get(key) is not None and (not isinstance(body[key], Real) or isinstance(body[key], bool)):
            return f"'{key}' must be a number"
    stop = body.get("stop")
    if (
        stop is not None
        and not isinstance(stop, str)
        and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
    ):
        return "'stop' must be a string or a list of strings"
    return None


def _loads(raw: bytes) -> tuple[object, str | None]:
    try:
        return json.loads(raw), None
    except RecursionError:
        return None, f"request body nests deeper than {MAX_DEPTH} levels"
    except (ValueError, TypeError):  # TypeError: not even bytes/str; UnicodeDecodeError is a ValueError
        return None, "request body is not valid JSON"


def parse_body(raw: bytes) -> tuple[dict | None, str | None]:
    """Parse and check a request body; ``(body, None)`` or ``(None, one-line 400 message)``."""
    body, bad = _loads(raw)
    if bad:
        return None, bad
    err = body_error(body)
    if err or not isinstance(body, dict):  # body_error names a body that is not an object
        return None, err
    return body, None


def parse_object(raw: bytes) -> tuple[dict | None, str | None]:
    """Parse a request body of another dialect (claimgrid.gateway.dialects): a JSON object
    nesting no deeper than ``MAX_DEPTH``; ``(body, None)`` or ``(None, one-line 400 message)``.
    Its fields are the dialect's translator's to check."""
    body, bad = _loads(raw)
    if bad:
        return None, bad
    if not isinstance(body, dict):
        return None, f"request body must be a JSON object, got {type(body).__name__}"
    if _depth_exceeds(body, MAX_DEPTH):
        return None, f"request body nests deeper than {MAX_DEPTH} levels"
    return body, None
