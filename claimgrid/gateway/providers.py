"""The one LiteLLM Router of the gateway, and the custom provider behind reference models.

The Router is built on the first call that needs it (claimgrid.gateway.dispatch): a real
model, or a swap involving one. Reference-only calls never reach it; the custom provider
here serves a reference substitute for a real assigned model (and the ``router``
reference path the parity test compares against).

Reference models are deployments ``claimgrid/<name>`` of the LiteLLM custom provider
``claimgrid``; real models (any LiteLLM model string) are ordinary deployments whose
keys LiteLLM reads from the environment. The run's script reaches the provider through
a context variable set by the request handler, never through the request itself, so the
answer key is not copied into LiteLLM's request logging.
"""

from __future__ import annotations

import contextvars
import logging
import math
import threading
import time
import uuid
from typing import Any

import litellm  # noqa: E402
from litellm import CustomLLM, ModelResponse, Router  # noqa: E402
from litellm.router_api import ChangeSet  # noqa: E402
from litellm.types.router import Deployment  # noqa: E402

from claimgrid.gateway import offline  # noqa: F401  (must precede the LiteLLM import)
from claimgrid.gateway.pricing import has_price  # noqa: E402
from claimgrid.gateway.scripted import SUBSTITUTE_PREFIX  # noqa: E402
from claimgrid.reference import progress  # noqa: E402
from claimgrid.reference.policies import Turn, message_text, next_turn  # noqa: E402
from claimgrid.reference.script import REFERENCE_MODEL_NAMES, RunScript  # noqa: E402

# LiteLLM prints a provider-list banner on errors; the gateway reports errors itself.
litellm.suppress_debug_info = True

PROVIDER = "claimgrid"
CURRENT_SCRIPT: contextvars.ContextVar[RunScript | None] = contextvars.ContextVar(
    "claimgrid_current_script", default=None
)
# The run's progress, this call's index and the gateway fault applied to it (None: no run
# progress): the policy steps by the gateway's record of the run on this path as on the
# harness's (claimgrid.reference.progress), or a probe that changes only its first answer
# would change every one here.
CURRENT_PROGRESS: contextvars.ContextVar[tuple[progress.RunProgress, int, str | None] | None] = contextvars.ContextVar(
    "claimgrid_current_progress", default=None
)


# turn_to_response and estimate_tokens are the pre-issue-12 code, deliberately not shared
# with claimgrid.gateway.scripted: the ``router`` reference path is the yardstick that
# tests/integration/gateway/test_gateway_reference_parity.py holds the harness path to, so a change to the
# harness's answers cannot also move the yardstick.
def estimate_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: about four characters per token."""
    return math.ceil(len(text) / 4) if text else 0


def turn_to_response(turn: Turn, model: str, messages: list[dict]) -> ModelResponse:
    message: dict[str, Any] = {"role": "assistant", "content": turn.content}
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in turn.tool_calls
        ]
    message.update(
        dict(turn.extra)
    )  # an output-shape probe's fields (refusal, reasoning_content), as the harness sends
    prompt = estimate_tokens("".join(message_text(m) for m in messages if isinstance(m, dict)))
    completion = estimate_tokens((turn.content or "") + "".join(c.name + c.arguments for c in turn.tool_calls))
    return ModelResponse(
        id=f"chatcmpl-{uuid.uuid4().hex[:24]}",
        created=int(time.time()),
        model=model,
        choices=[{"index": 0, "finish_reason": turn.finish_reason, "message": message}],
        usage={"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    )


class ReferenceProvider(CustomLLM):
    """LiteLLM custom provider: answers with the reference policy named by the model."""

    def _answer(self, model: str, messages: list) -> ModelResponse:
        script = CURRENT_SCRIPT.get()
        name = model.split("/", 1)[1] if model.startswith(PROVIDER + "/") else model
        if script is None:
            raise litellm.exceptions.BadRequestError(
                message=f"reference model '{name}' needs a run registered with the claimgrid gateway",
                model=name,
                llm_provider=PROVIDER,
            )
        if name not in REFERENCE_MODEL_NAMES:
            raise litellm.exceptions.NotFoundError(
                message=f"unknown reference model '{name}'", model=name, llm_provider=PROVIDER
            )
        current = CURRENT_PROGRESS.get()
        if current is None:
            return turn_to_response(next_turn(name, script, messages), name, messages)
        run, call_index, fault = current
        with progress.active(run.view(call_index, messages)):
            turn = next_turn(name, script, messages)
        run.answered(messages, progress.parsed_calls(turn.tool_calls), fault)
        return turn_to_response(turn, name, messages)

    def completion(self, model, messages, *args, **kwargs):
        return self._answer(model, messages)

    async def acompletion(self, model, messages, *args, **kwargs):
        return self._answer(model, messages)


_LOCK = threading.Lock()
_PROVIDER = ReferenceProvider()


def install_provider() -> None:
    """Register the ``claimgrid`` custom provider with LiteLLM (idempotent)."""
    with _LOCK:
        if not any(item.get("provider") == PROVIDER for item in litellm.custom_provider_map):
            litellm.custom_provider_map.append({"provider": PROVIDER, "custom_handler": _PROVIDER})
            # LiteLLM reads the map when it sets up its callbacks; refresh it for late additions.
            litellm.utils.custom_llm_setup()


# Substitutes live in their own model groups (SUBSTITUTE_PREFIX): when the substitute is
# the assigned model itself (reader swapped for reader), a fallback into the failed group
# would fail too.


def group_model(group: str) -> str:
    """The model name behind a Router model group (substitute groups included)."""
    return group[len(SUBSTITUTE_PREFIX) :] if group.startswith(SUBSTITUTE_PREFIX) else group


# Models the driver serves itself (claimgrid.localmodel): the model name -> its LiteLLM
# parameters (an OpenAI-compatible server on 127.0.0.1) and its per-call output-token cap.
_LOCAL: dict[str, tuple[dict, int | None]] = {}


def register_local(model: str, api_base: str, output_cap: int | None, api_key: str) -> None:
    """Serve ``model`` (``local/smollm2-135m``, or ``server/<model id>`` of ``--model-server``)
    through the Router as the OpenAI-compatible server at ``api_base``; every call forwarded to
    it asks for at most ``output_cap`` tokens (None: the grid's own cap) and carries ``api_key``,
    the server's key (a bearer token, as llama-server's ``--api-key`` takes it), which only this
    deployment holds: the server refuses a request without it. A server with no key gets a
    placeholder, so no provider key of the environment is sent to it."""
    name = model.split("/", 1)[1]
    params = {"model": f"openai/{name}", "api_base": api_base, "api_key": api_key or "no-key"}
    _LOCAL[model] = (params, None if output_cap is None else int(output_cap))


def output_cap(model: str) -> int | None:
    """The output-token cap of a model the driver serves (None: no cap of the gateway's)."""
    local = _LOCAL.get(group_model(model))
    return local[1] if local else None


def deployment(group: str) -> dict:
    """The Router deployment for a model group: reference policy or LiteLLM model string."""
    model = group_model(group)
    if model in REFERENCE_MODEL_NAMES:
        return {"model_name": group, "litellm_params": {"model": f"{PROVIDER}/{model}"}}
    if model in _LOCAL:
        return {"model_name": group, "litellm_params": dict(_LOCAL[model][0])}
    return {"model_name": group, "litellm_params": {"model": model}}


class ModelRouter:
    """One LiteLLM Router for the whole grid; real-model deployments are added on demand.

    Retries and cooldowns are off: a retry would hide a failure from the evidence, and a
    cooldown triggered by one run's simulated outage would leak into other runs.
    """

    def __init__(self) -> None:
        install_provider()
        # A simulated outage is evidence in the gateway log, not an error for the console:
        # LiteLLM would print a stack of "fallback" errors for every swapped call.
        litellm.suppress_debug_info = True
        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        self.router = Router(
            model_list=[deployment(m) for m in REFERENCE_MODEL_NAMES], num_retries=0, disable_cooldowns=True
        )
        self._known = set(REFERENCE_MODEL_NAMES)
        self._priced: dict[str, bool] = {m: False for m in REFERENCE_MODEL_NAMES}
        self._lock = threading.Lock()

    def ensure(self, model: str) -> None:
        with self._lock:
            if model not in self._known:
                # Asked before the Router registers the deployment: registering adds an
                # empty price entry that LiteLLM then reads as a price of 0.
                self._priced[model] = has_price(group_model(model))
                self.router.apply(ChangeSet(upsert=[Deployment(**deployment(model))]))
                self._known.add(model)

    def priced(self, model: str) -> bool:
        """True when LiteLLM's bundled price map knows ``model`` (so its cost is not invented)."""
        return self._priced.get(model, self._priced.get(SUBSTITUTE_PREFIX + model, False))
