"""Reference models answered by harness code: the policy's turn as an OpenAI chat
completion, with the run's swap applied, exactly as the LiteLLM Router path answers it.

Reference calls used to go through LiteLLM's Router (a custom provider and
``mock_testing_fallbacks`` for the swaps), which cost gateway CPU on every call and made
every ``grid.py`` start import LiteLLM (figures in bench/README.md). This module gives the same
response body, served/reported model, swap headers and cost with none of it;
tests/integration/gateway/test_gateway_reference_parity.py drives both paths over HTTP and asserts they are
identical (apart from random ids and timestamps).

What the Router path gives, and so this module:

- ``none`` / ``silent``: the served policy answers; the response carries the client's
  requested model name (else the assigned one), as LiteLLM's proxy restamps it; no
  extra headers.
- ``reported``: the substitute answers under its own name, with LiteLLM's fallback
  headers: ``x-litellm-attempted-fallbacks: 1``, ``x-litellm-attempted-retries: 0``,
  ``x-litellm-model-group: <substitute>`` and ``x-litellm-model-id``.
- ``bound`` never reaches a model (claimgrid.gateway.app answers 503).
- ``cost_usd`` is None: no price exists for a reference model.

``x-litellm-model-id`` is the only value that cannot be copied: LiteLLM puts there the
serving deployment's id, a random ``uuid4`` drawn when the Router registers the
substitute deployment (a new one per gateway process). It names nothing beyond the
model group, and nothing in claimgrid reads it (the ledger reads ``served_model`` /
``reported_model`` from the exchange event). The harness gives a UUID of the same form,
derived from the deployment (``uuid5``), so it still identifies the serving deployment
and a recorded ledger no longer differs from run to run by a random header.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import uuid

from claimgrid.gateway.answer import Answer
from claimgrid.reference import progress
from claimgrid.reference.policies import ToolCall, Turn, message_text, next_turn
from claimgrid.reference.script import RunScript

# The Router's model group of a substitute: separate from the assigned model's group so
# that a model substituting for itself (reader for reader) is a real fallback.
SUBSTITUTE_PREFIX = "substitute::"
_DEPLOYMENT_NS = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/claimgrid/deployments")


class PolicyError(Exception):
    """A reference policy raised: answered 500 (``upstream_error``), as the Router path
    answers it, but the message names no model (the Router's would name the assigned
    model and the substitute after a swap: blinding)."""

    status_code = 500

    def __init__(self, exc: BaseException):
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        super().__init__(f"reference policy failed: {type(exc).__name__}: {first}")


def estimate_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: about four characters per token."""
    return math.ceil(len(text) / 4) if text else 0


def completion(turn: Turn, model: str, messages: list) -> dict:
    """The OpenAI chat.completion dict of one policy turn, answered as ``model``.

    Usage is estimated from the request's message texts and the answer's text and tool
    calls (``estimate_tokens``)."""
    message: dict = {"role": "assistant", "content": turn.content}
    message.update(dict(turn.extra))
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in turn.tool_calls
        ]
    prompt = estimate_tokens("".join(message_text(m) for m in messages if isinstance(m, dict)))
    completion_tokens = estimate_tokens((turn.content or "") + "".join(c.name + c.arguments for c in turn.tool_calls))
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": turn.finish_reason}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
        },
    }


def deployment_id(group: str) -> str:
    """The stable id of the gateway's deployment for a model group (``x-litellm-model-id``)."""
    return str(uuid.uuid5(_DEPLOYMENT_NS, group))


def reported_headers(substitute: str) -> dict:
    """The fallback headers a ``reported`` swap carries: what LiteLLM's Router adds after
    one fallback, into the substitute's group, with no retry."""
    return {
        "x-litellm-attempted-fallbacks": "1",
        "x-litellm-attempted-retries": "0",
        "x-litellm-model-group": substitute,
        "x-litellm-model-id": deployment_id(SUBSTITUTE_PREFIX + substitute),
    }


def in_protocol(script: RunScript, turn: Turn, call_index: int) -> Turn:
    """The policy's turn in the framework's final-answer protocol: a final text becomes a
    call of the framework's final-answer tool when the framework ends only on one
    (``RunScript.final_answer``: (tool, argument)); for an agent with its own tools
    (``RunScript.tool_table``) each abstract call is spelled in them
    (claimgrid.reference.tool_table), and a final text is its table's final-answer call when
    the table has one; every other turn is sent as it is."""
    table = script.tool_table
    if table is not None and turn.tool_calls:
        calls = tuple(ToolCall(c.id, *table.spell(c.name, c.arguments)) for c in turn.tool_calls)
        return dataclasses.replace(turn, tool_calls=calls)
    final = table.spell_final(turn.content or "") if table is not None and turn.final else None
    if final is not None:
        # An agent with its own tools that ends only on a call (its table's [final_answer]).
        call = ToolCall(f"call_final_{call_index}", *final)
        return Turn(tool_calls=(call,), finish=turn.finish, extra=turn.extra)
    if script.final_answer is None or turn.tool_calls or not turn.final:
        return turn
    tool, argument = script.final_answer
    call = ToolCall(f"call_final_{call_index}", tool, json.dumps({argument: turn.content or ""}))
    return Turn(tool_calls=(call,), finish=turn.finish, extra=turn.extra)


def answer(
    script: RunScript,
    swap: str,
    body: dict,
    requested: str | None,
    run: progress.RunProgress | None = None,
    call_index: int = 0,
    fault: str | None = None,
) -> Answer:
    """Serve one call of a run whose models are all reference models (``harness_serves``).

    ``swap`` is the call's serving state (claimgrid.gateway.swap.swap_for_call), never
    ``bound``. ``run``: the run's progress (claimgrid.reference.progress): the policy is
    given its view and the answer is recorded there, with ``fault``, the kind of gateway
    fault applied to this call (None: none); without it the policy reads the messages.
    A policy exception is raised as ``PolicyError``."""
    substituted = swap in ("silent", "reported")
    served = script.substitute if substituted else script.model
    messages = body["messages"]
    view = run.view(call_index, messages) if run is not None else None
    try:
        with progress.active(view):
            turn = next_turn(served, script, messages)
    except Exception as exc:  # a user's policy file: a recorded 500, never a crashed handler
        raise PolicyError(exc) from exc
    if run is not None:
        run.answered(messages, progress.parsed_calls(turn.tool_calls), fault)
    turn = in_protocol(script, turn, call_index)
    if swap == "reported":
        return Answer(completion(turn, served, messages), served, reported_headers(served), None)
    # What LiteLLM's proxy does without a fallback: restamp the client's model name.
    return Answer(completion(turn, requested or script.model, messages), served, {}, None)
