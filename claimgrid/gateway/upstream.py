"""One model call through the Router, with the run's swap applied.

The Router serves real models, and a swap whose assigned model or substitute is a real
model (claimgrid.gateway.dispatch decides). Reference-only calls are answered by
claimgrid.gateway.scripted, which gives what this path gives, without LiteLLM.

For ``silent`` and ``reported`` the Router itself performs the fallback: the call goes to
the assigned model group with ``mock_testing_fallbacks`` (LiteLLM fails the assigned
deployment without contacting it) and a per-request fallback to the substitute, so the
served model and the fallback headers are the ones LiteLLM produces.
"""

from __future__ import annotations

import litellm  # noqa: E402

from claimgrid.gateway import offline  # noqa: F401
from claimgrid.gateway.answer import SUBSTITUTING, Answer, target_model  # noqa: E402
from claimgrid.gateway.providers import (  # noqa: E402
    CURRENT_PROGRESS,
    CURRENT_SCRIPT,
    SUBSTITUTE_PREFIX,
    ModelRouter,
    group_model,
    output_cap,
)
from claimgrid.gateway.retry import RetryPolicy, with_retries  # noqa: E402
from claimgrid.reference import registry  # noqa: E402
from claimgrid.reference.policies import MESSAGE_EXTRAS  # noqa: E402
from claimgrid.reference.progress import RunProgress  # noqa: E402
from claimgrid.reference.script import RunScript  # noqa: E402

# OpenAI chat parameters forwarded to the model. Only these: LiteLLM also honours
# request keys such as ``mock_response``, ``api_base``, ``api_key`` or ``fallbacks``, and
# an agent that could send them would choose its own answer or upstream, forging the
# gateway's evidence. Everything else stays in the raw request log only.
FORWARDED = {
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "n",
    "user",
    "reasoning_effort",
}
FALLBACK_HEADERS = ("x-litellm-attempted-fallbacks", "x-litellm-attempted-retries", "x-litellm-model-group")


def _clean(resp, reported: str) -> dict:
    """A plain OpenAI chat.completion dict, the same shape whoever served it."""
    choice = resp.choices[0]
    msg = choice.message
    message = {"role": "assistant", "content": msg.content}
    # A refusal or reasoning text beside the answer, where the provider (or a reference
    # policy's Turn) set one: placed where the harness's completion dict places it.
    for key in MESSAGE_EXTRAS:
        if getattr(msg, key, None) is not None:
            message[key] = getattr(msg, key)
    if msg.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in msg.tool_calls
        ]
    usage = getattr(resp, "usage", None)
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    return {
        "id": resp.id,
        "object": "chat.completion",
        "created": resp.created,
        "model": reported,
        "choices": [{"index": 0, "message": message, "finish_reason": choice.finish_reason}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": (prompt or 0) + (completion or 0) if usage else None,
        },
    }


def _cost(router: ModelRouter, resp, served: str) -> float | None:
    """LiteLLM's price for this response, or None when the price is not known.

    LiteLLM reports 0.0 for a model missing from its price map; that 0 is invented, so
    an unpriced model (every reference policy included) gives None.
    """
    if not router.priced(served):
        return None
    try:
        return float(litellm.completion_cost(completion_response=resp, model=served))
    except Exception:  # a price map entry LiteLLM cannot apply to this response
        return None


async def call_model(
    router: ModelRouter,
    script: RunScript,
    swap: str,
    body: dict,
    requested: str | None,
    retry: RetryPolicy | None = None,
    at: tuple[RunProgress | None, int, str | None] = (None, 0, None),
) -> Answer:
    """Ask the Router for one answer.

    ``at`` = (``run``, ``call_index``, ``fault``): the run's progress, this call's index and the
    gateway fault applied to it; a reference model the Router serves steps by them as on
    the harness path (claimgrid.gateway.scripted.answer).

    A real provider's transient errors are retried here (claimgrid.gateway.retry) before
    anything else sees them; a final failure raises ``ProviderFailure`` carrying every
    attempt. A reference model is called once and its exceptions propagate unchanged.
    """
    params = {k: v for k, v in body.items() if k in FORWARDED}
    kwargs: dict = {"model": script.model, "messages": body["messages"], **params}
    if swap in SUBSTITUTING:
        router.ensure(SUBSTITUTE_PREFIX + script.substitute)
        kwargs["fallbacks"] = [{script.model: [SUBSTITUTE_PREFIX + script.substitute]}]
        kwargs["mock_testing_fallbacks"] = True
    router.ensure(script.model)
    target = target_model(script, swap)
    cap = output_cap(target)
    if cap is not None:  # a model the driver serves: its output-token cap, whatever the agent asked
        asked = kwargs.pop("max_completion_tokens", None) or kwargs.get("max_tokens")
        kwargs["max_tokens"] = min(asked, cap) if isinstance(asked, int) and asked > 0 else cap
    provider = None
    token = CURRENT_SCRIPT.set(script)
    run, call_index, fault = at
    progress_token = CURRENT_PROGRESS.set((run, call_index, fault) if run is not None else None)
    try:
        # no-log: LiteLLM's logging callbacks are unused here and cost ~20% of the Router's time.
        if registry.is_reference(target):
            resp = await router.router.acompletion(drop_params=True, **{"no-log": True}, **kwargs)
        else:
            # max_retries=0: the provider client must not retry on its own, or attempts
            # would happen that the gateway log never shows.
            policy = retry or RetryPolicy()
            resp, provider = await with_retries(
                lambda: router.router.acompletion(
                    drop_params=True, max_retries=0, timeout=policy.timeout_s, **{"no-log": True}, **kwargs
                ),
                policy,
                target,
            )
    finally:
        CURRENT_PROGRESS.reset(progress_token)
        CURRENT_SCRIPT.reset(token)
    hidden = getattr(resp, "_hidden_params", None) or {}
    extra = hidden.get("additional_headers") or {}
    served = group_model(extra.get("x-litellm-model-group") or script.model)
    headers = {}
    if swap == "reported":
        reported = served
        headers = {k: group_model(str(extra[k])) for k in FALLBACK_HEADERS if k in extra}
        if hidden.get("model_id"):
            headers["x-litellm-model-id"] = str(hidden["model_id"])
    else:
        # What LiteLLM's proxy does without a fallback: restamp the client's model name.
        reported = requested or script.model
    return Answer(_clean(resp, reported), served, headers, _cost(router, resp, served), provider)
