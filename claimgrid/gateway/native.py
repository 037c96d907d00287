"""Native pass-through: a client's own dialect sent verbatim to a provider that speaks it.

Translating a dialect to the internal chat form and back loses what the chat form has no
place for: Claude Code's ``thinking`` / ``redacted_thinking`` blocks and their signatures,
``cache_control``, ``context_management``, ``output_config``, ``metadata``, ``is_error`` on a
tool result as a field; Codex's ``reasoning`` items with ``encrypted_content``, ``include``,
``store``, ``previous_response_id``, ``text.format``; and whatever field a provider adds next.
A real agent's transcript would not be what it sent. So when a call's model is a real model
(no swap to a substitute) of the provider whose API the client speaks (Anthropic Messages to
an ``anthropic/...`` model, OpenAI Responses to an ``openai/...`` model), the gateway:

* forwards the client's body **verbatim**, every field and block kept, except ``model``,
  which becomes the run's assigned model (the agent never chooses its model) and, for a
  stream, ``stream`` (the provider is asked for the whole answer, the client is streamed
  from it, as the gateway streams every answer); the client's ``anthropic-version`` /
  ``anthropic-beta`` / ``openai-beta`` headers go with it; the key is the harness's own
  (``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``, base ``ANTHROPIC_API_BASE`` /
  ``OPENAI_API_BASE`` or the providers' public URLs), never the run token;
* returns the provider's body **verbatim**, except ``model``, restamped with the name the
  client asked for (blinding: the agent does not learn what it runs on);
* records both as they went (``upstream_request``, ``upstream_response`` in the raw
  exchange, beside ``dialect_request`` / ``dialect_response``), and reads the internal chat
  view of the exchange from them (:func:`chat_response`) for the exchange event, the
  classifier and the budget.

Retries of the provider's weather are the gateway's (claimgrid.gateway.retry), as on the
Router path. Every other call (reference models, a swap, a provider that does not speak the
client's dialect) takes the translated path (claimgrid.gateway.dialects).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from claimgrid.gateway.answer import SUBSTITUTING, Answer
from claimgrid.gateway.connections import provider_of
from claimgrid.gateway.retry import RetryPolicy, with_retries
from claimgrid.gateway.sse import pieces
from claimgrid.reference import registry

ANTHROPIC, RESPONSES = "anthropic-messages", "openai-responses"
# dialect -> (provider, its endpoint below the base URL, the key's environment variable, the
# base URL's variables, the public base URL, the client headers that go with the body)
PROVIDERS = {
    ANTHROPIC: (
        "anthropic",
        "/v1/messages",
        "ANTHROPIC_API_KEY",
        ("ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"),
        "https://api.anthropic.com",
        ("anthropic-version", "anthropic-beta"),
    ),
    RESPONSES: (
        "openai",
        "/responses",
        "OPENAI_API_KEY",
        ("OPENAI_API_BASE", "OPENAI_BASE_URL"),
        "https://api.openai.com/v1",
        ("openai-beta",),
    ),
}
STOP_REASONS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "refusal": "content_filter",
                "stop_sequence": "stop", "pause_turn": "stop"}  # fmt: skip


@dataclass(frozen=True)
class Route:
    dialect: str
    model: str  # the provider's model name (the LiteLLM string without its provider prefix)
    url: str
    key_env: str
    headers: tuple[str, ...]


def route(dialect: str, model: str, swap: str) -> Route | None:
    """The native route of a call, or None (the translated path): module docstring."""
    if dialect not in PROVIDERS or swap in SUBSTITUTING or registry.is_reference(model):
        return None
    provider, path, key_env, base_envs, public, headers = PROVIDERS[dialect]

    if provider_of(model) != provider:
        return None
    base = next((os.environ[v] for v in base_envs if os.environ.get(v)), public).rstrip("/")
    if dialect == RESPONSES and not base.endswith("/v1"):
        base += "/v1"  # OPENAI_API_BASE names the API root, as for the OpenAI clients
    name = model.split("/", 1)[1] if "/" in model else model
    return Route(dialect, name, base + path, key_env, headers)


def possible(dialect: str, model: str) -> bool:
    """True when a call of this run may take the native route (its unswapped model's)."""
    return route(dialect, model, "none") is not None


class UpstreamError(Exception):
    """A provider's HTTP error, shaped as LiteLLM's for claimgrid.gateway.retry."""

    def __init__(self, status: int, text: str, headers: dict):
        super().__init__(f"provider answered HTTP {status}: {text[:300]}")
        self.status_code = status
        self.message = str(self)
        self.response = type("R", (), {"headers": headers})()
        self.body = text


def upstream_body(given: dict, r: Route) -> dict:
    """The client's body as the provider gets it: every field, ``model`` the run's, no stream."""
    body = dict(given)
    body["model"] = r.model
    body.pop("stream", None)
    return body


async def call(r: Route, given: dict, client_headers, retry) -> tuple[dict, dict, dict]:
    """``(upstream request, provider's response, provider record)``; raises ProviderFailure."""
    import httpx

    body = upstream_body(given, r)
    headers = {"content-type": "application/json"}
    for name in r.headers:
        if client_headers.get(name):
            headers[name] = client_headers[name]
    key = os.environ.get(r.key_env, "")
    if r.dialect == ANTHROPIC:
        headers["x-api-key"] = key
        headers.setdefault("anthropic-version", "2023-06-01")
    else:
        headers["authorization"] = f"Bearer {key}"
    policy = retry or RetryPolicy()

    async def once() -> dict:
        async with httpx.AsyncClient(timeout=policy.timeout_s, verify=_tls()) as client:
            resp = await client.post(r.url, json=body, headers=headers)
        if resp.status_code >= 400:
            raise UpstreamError(resp.status_code, resp.text, dict(resp.headers))
        value = resp.json()
        if not isinstance(value, dict):
            raise UpstreamError(502, "the provider's answer is not a JSON object", {})
        return value

    answer, provider = await with_retries(once, policy, r.model)
    return body, answer, provider


@cache
def _tls():
    """One TLS context per process: a new httpx client would load the CA bundle into a new
    one (a CPU cost larger than the call's own forwarding) on every forwarded call."""
    import httpx

    return httpx.create_ssl_context()


def restamped(answer: dict, requested: str | None) -> dict:
    """The provider's answer as the client gets it: verbatim, ``model`` the client's name."""
    reply = dict(answer)
    if requested is not None and "model" in reply:
        reply["model"] = requested
    return reply


def chat_response(dialect: str, answer: dict, reported: str) -> dict:
    """The internal chat.completion view of a provider's native answer (for the exchange
    event, the classifier and the budget); the answer itself is what the client got."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[dict] = []
    if dialect == ANTHROPIC:
        for block in answer.get("content") or []:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text" and isinstance(block.get("text"), str):
                content.append(block["text"])
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                reasoning.append(block["thinking"])
            elif kind == "tool_use":
                args = block.get("input")
                calls.append(
                    _call(block.get("id"), block.get("name"), args if isinstance(args, str) else json.dumps(args))
                )
        finish = STOP_REASONS.get(str(answer.get("stop_reason")), "stop")
        usage = answer.get("usage") or {}
        prompt, completion = usage.get("input_tokens"), usage.get("output_tokens")
    else:
        for item in answer.get("output") or []:
            kind = item.get("type") if isinstance(item, dict) else None
            if kind == "message":
                for part in item.get("content") or []:
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        content.append(part["text"])
            elif kind == "reasoning":
                for part in item.get("summary") or []:
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        reasoning.append(part["text"])
            elif kind == "function_call":
                calls.append(_call(item.get("call_id"), item.get("name"), item.get("arguments")))
            elif kind == "custom_tool_call":
                calls.append(_call(item.get("call_id"), item.get("name"), json.dumps({"input": item.get("input")})))
        incomplete = (answer.get("incomplete_details") or {}).get("reason")
        finish = "tool_calls" if calls else {"max_output_tokens": "length"}.get(str(incomplete), "stop")
        usage = answer.get("usage") or {}
        prompt, completion = usage.get("input_tokens"), usage.get("output_tokens")
    message: dict = {"role": "assistant", "content": "".join(content) or None}
    if reasoning:
        message["reasoning_content"] = "\n".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    ints = [v for v in (prompt, completion) if isinstance(v, int)]
    return {
        "id": "chatcmpl-" + str(answer.get("id") or uuid.uuid4().hex),
        "object": "chat.completion",
        "created": 0,
        "model": reported,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": sum(ints) if ints else None,
        },
    }


def _call(call_id, name, arguments) -> dict:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": str(call_id), "type": "function", "function": {"name": str(name), "arguments": text}}


def answer_of(dialect: str, answer: dict, provider: dict, requested: str | None, model: str) -> Answer:
    """The gateway's Answer of a native exchange (cost from LiteLLM's price map when it has one)."""
    chat = chat_response(dialect, answer, requested or model)
    return Answer(chat, model, {}, _cost(model, chat), provider)


def _cost(model: str, chat: dict) -> float | None:
    from claimgrid.gateway.pricing import has_price

    if not has_price(model):
        return None
    import litellm

    usage = chat["usage"]
    try:
        prompt, completion = litellm.cost_per_token(
            model=model, prompt_tokens=usage["prompt_tokens"] or 0, completion_tokens=usage["completion_tokens"] or 0
        )
    except Exception:  # noqa: BLE001 - a price map entry LiteLLM cannot apply: unknown
        return None
    return float(prompt + completion)


# ---------------------------------------------------------------- streams of a whole answer


def _sse(kind: str | None, data: dict) -> str:
    head = f"event: {kind}\n" if kind else ""
    return head + f"data: {json.dumps(data, separators=(',', ':'), ensure_ascii=False)}\n\n"


def stream(dialect: str, reply: dict) -> Iterator[str]:
    """The server-sent events of a native answer, every block's fields in them."""
    if dialect == ANTHROPIC:
        yield from _anthropic_stream(reply)
    else:
        yield from _responses_stream(reply)


# A block's streamed field (sent as deltas after a start event that has it empty).
_DELTAS = {"text": ("text", "text_delta"), "thinking": ("thinking", "thinking_delta")}


def _anthropic_stream(reply: dict) -> Iterator[str]:
    usage = reply.get("usage") or {}
    start = {**reply, "content": [], "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 0}}
    yield _sse("message_start", {"type": "message_start", "message": start})
    for index, block in enumerate(reply.get("content") or []):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in _DELTAS and isinstance(block.get(_DELTAS[kind][0]), str):
            field, delta = _DELTAS[kind]
            opened = {**block, field: ""}
            signature = opened.pop("signature", None)
            if signature is not None:
                opened["signature"] = ""
            yield _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": opened})
            for piece in pieces(block[field]):
                event = {"type": "content_block_delta", "index": index, "delta": {"type": delta, field: piece}}
                yield _sse("content_block_delta", event)
            if signature is not None:
                event = {"type": "content_block_delta", "index": index,
                         "delta": {"type": "signature_delta", "signature": signature}}  # fmt: skip
                yield _sse("content_block_delta", event)
        elif kind == "tool_use":
            yield _sse("content_block_start",
                       {"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}})  # fmt: skip
            args = block.get("input")
            text = args if isinstance(args, str) else json.dumps(args)
            for piece in pieces(text):
                if piece:
                    event = {"type": "content_block_delta", "index": index,
                             "delta": {"type": "input_json_delta", "partial_json": piece}}  # fmt: skip
                    yield _sse("content_block_delta", event)
        else:  # redacted_thinking and any block this gateway does not know: whole, in its start
            yield _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    delta = {"stop_reason": reply.get("stop_reason"), "stop_sequence": reply.get("stop_sequence")}
    yield _sse("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
    yield _sse("message_stop", {"type": "message_stop"})


def _responses_stream(reply: dict) -> Iterator[str]:
    seq = iter(range(1 << 30))
    created = {**reply, "status": "in_progress", "output": []}
    yield _sse("response.created", {"type": "response.created", "sequence_number": next(seq), "response": created})
    for index, item in enumerate(reply.get("output") or []):
        added = {**item, "content": []} if item.get("type") == "message" else item
        yield _sse("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(seq),
                                                  "output_index": index, "item": added})  # fmt: skip
        if item.get("type") == "message":
            for c, part in enumerate(item.get("content") or []):
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    for piece in pieces(part["text"]):
                        yield _sse("response.output_text.delta",
                                   {"type": "response.output_text.delta", "sequence_number": next(seq),
                                    "item_id": item.get("id"), "output_index": index, "content_index": c,
                                    "delta": piece})  # fmt: skip
        yield _sse("response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(seq),
                                                 "output_index": index, "item": item})  # fmt: skip
    yield _sse("response.completed", {"type": "response.completed", "sequence_number": next(seq), "response": reply})
