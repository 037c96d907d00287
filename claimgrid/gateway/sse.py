"""OpenAI-style server-sent events for a completed chat completion.

The gateway always asks its Router for a complete answer and streams that answer out in
chunks: the tool-call deltas and final usage chunk have exactly the shape an OpenAI
stream has, so client libraries accumulate them as they would a real stream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator


def pieces(text: str, parts: int = 2) -> list[str]:
    """``text`` in (at most) ``parts`` pieces: clients must concatenate deltas, as they
    must for a real stream (every dialect's stream splits its text this way)."""
    if len(text) < parts * 2:
        return [text]
    size = -(-len(text) // parts)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _event(obj: dict) -> str:
    return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n"


def stream_events(response: dict, include_usage: bool) -> Iterator[str]:
    """Yield the SSE lines of ``response`` (an OpenAI chat.completion dict), ending in [DONE]."""
    base = {
        "id": response["id"],
        "object": "chat.completion.chunk",
        "created": response["created"],
        "model": response["model"],
    }
    choice = response["choices"][0]
    message = choice["message"]

    def chunk(delta: dict, finish=None) -> str:
        return _event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    yield chunk({"role": "assistant", "content": ""})
    for piece in pieces(message.get("content") or ""):
        if piece:
            yield chunk({"content": piece})
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": ""},
                    }
                ]
            }
        )
        for piece in pieces(fn["arguments"]):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, choice["finish_reason"])
    if include_usage:
        yield _event({**base, "choices": [], "usage": response["usage"]})
    yield "data: [DONE]\n\n"
