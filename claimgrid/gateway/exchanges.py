"""The gateway's evidence: one ``source: gateway`` exchange event per request (CONTRACTS)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from claimgrid.reference.policies import tool_results

# The only model name an agent ever sees (blinding); claimgrid.execute.runner tells the adapter it.
BLIND_MODEL = "agent-model"
# How the Router names a substitute's model group (claimgrid.gateway.providers).
_GROUP_PREFIXES = ("", "substitute::")


def blinded(text: str, models) -> str:
    """``text`` with every name of ``models`` (each as given, without its ``provider/``
    prefix, and as the Router's substitute group) replaced by :data:`BLIND_MODEL`.

    A provider's or LiteLLM's error message names the model it was asked for, and after a
    swap the fallback chain (``model=<assigned> ... Fallbacks=[...substitute...]``): sent on
    to the agent, it would tell the agent its model and its condition. The exchange event
    keeps the message whole; only the answer the agent reads is blinded."""
    names: set[str] = set()
    for model in models:
        if model:
            for name in (model, model.split("/", 1)[-1]):
                names.update(prefix + name for prefix in _GROUP_PREFIXES)
    if not names:
        return text
    # Whole names only (``slow`` stays in ``slowly``); longest first, so a group name wins
    # over the model name inside it.
    pattern = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.sub(rf"(?<![\w-])(?:{pattern})(?![\w-])", BLIND_MODEL, text)


def openai_error(status: int, message: str | None, code: str | None = None) -> dict:
    """An OpenAI-style error body; the ``type`` follows OpenAI's names for the status."""
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
    }.get(status, "api_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


@dataclass(frozen=True)
class Call:
    """One request as the gateway received it: its ``index`` among the run's requests (from
    0, retries and refusals included), ``t`` (seconds since the run was registered),
    whether it asked to ``stream``, the model name it ``requested`` and its ``messages``
    (None when the body was not read)."""

    index: int
    t: float
    stream: bool
    requested: str | None
    messages: object = None


@dataclass(frozen=True)
class Routing:
    """Which models the call involved: the run's ``assigned`` model, the one that ``served``
    it and the name the caller was ``reported`` (both None if refused), and what the
    gateway did (``swap``: none | silent | reported | bound)."""

    assigned: str
    served: str | None = None
    reported: str | None = None
    swap: str = "none"


@dataclass(frozen=True)
class Answer:
    """What went back: the HTTP ``status``, the ``error`` message (None on success), the
    ``latency_ms``, the OpenAI ``response`` dict sent back (None if refused) and its
    ``cost_usd`` (None when unknown)."""

    status: int
    error: str | None
    latency_ms: float
    response: dict | None = None
    cost_usd: float | None = None


def exchange_event(call: Call, routing: Routing, answer: Answer) -> dict:
    """Build the exchange event (docs/CONTRACTS.md, source gateway).

    ``tool_results`` holds the text of the role=tool messages that are new in this
    request (after its last assistant message), ``tool_result_ids`` their call ids: it is how
    the classifier knows that an injected text actually reached the model, and which call a
    result answers. Earlier results were logged with the
    request that first carried them, so the log grows linearly with the run.
    """
    message, finish, usage = {}, None, None
    if answer.response:
        choice = answer.response["choices"][0]
        message, finish, usage = choice["message"], choice["finish_reason"], answer.response.get("usage")
    messages = call.messages
    since = _since_last_assistant(messages) if isinstance(messages, list) else []
    results = tool_results(since)
    return {
        "source": "gateway",
        "kind": "exchange",
        "call_index": call.index,
        "t": call.t,
        "stream": call.stream,
        "requested_model": call.requested,
        "assigned_model": routing.assigned,
        "served_model": routing.served,
        "reported_model": routing.reported,
        "swap": routing.swap,
        "status": answer.status,
        "error": answer.error,
        "latency_ms": answer.latency_ms,
        "usage": (
            {"prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens")}
            if usage
            else None
        ),
        "cost_usd": answer.cost_usd,
        "tool_calls": [
            {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in message.get("tool_calls") or []
        ],
        "content": message.get("content"),
        "finish_reason": finish,
        "tool_results": results,
        # Their lengths as sent, before any cap on stored evidence (whether a framework cut a result).
        "tool_result_chars": [len(r) for r in results],
        # The call id each result answers (tool_call_id; None where the client sent none): a
        # request sent again carries the same ids, so a result is counted once (classify.evidence).
        "tool_result_ids": [_result_id(m) for m in since if isinstance(m, dict) and m.get("role") == "tool"],
    }


def _result_id(message: dict) -> str | None:
    value = message.get("tool_call_id")
    return value if isinstance(value, str) else None


def _since_last_assistant(messages: list) -> list:
    last = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"), default=-1)
    return messages[last + 1 :]
