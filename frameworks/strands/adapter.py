"""claimgrid adapter for Strands Agents (runs inside ``.venvs/strands``, never in the driver).

Contract (docs/CONTRACTS.md, "Adapter contract"): ``FRAMEWORK``, ``preload()``,
``versions()`` and ``run(ctl, tools, rec) -> str | None``.

How a run is built, all with Strands' own parts:

- model: ``strands.models.litellm.LiteLLMModel`` pointed at the harness gateway
  (``api_base`` = ``ctl["gateway_url"]``, ``api_key`` = the run token, model id
  ``"openai/" + ctl["model"]``), streaming as Strands does by default (SSE with usage
  chunks, ``stream_options.include_usage``);
- tools: each harness tool becomes a ``strands.tools.PythonAgentTool`` whose spec is the
  harness tool's JSON schema and whose function calls the harness tool with the JSON
  arguments the model sent;
- agent: ``strands.Agent`` with ``callback_handler=None`` (no console printing);
- runtime events: a Strands ``HookProvider`` (``BeforeToolCallEvent``,
  ``AfterModelCallEvent``, ``AfterInvocationEvent``), attributed to ``event.agent.name``.

What Strands does not expose, and what is recorded instead:

- Strands drops the ``model`` field of LiteLLM's responses (neither its stream events
  nor ``AfterModelCallEvent`` carry it). The adapter wraps ``litellm.acompletion`` (the
  call ``LiteLLMModel`` makes) to note the model name on the response/chunks LiteLLM hands
  to Strands (for streams, LiteLLM's ``provider_response_model`` hidden param: it rewrites
  each chunk's ``model`` to the requested name), and ``model_call`` events carry that
  name: a "reported" swap is visible in the runtime channel, a "silent" one is not. Only
  if no response carried a name does the event fall back to the configured model.
- Strands has no limit on event-loop cycles. The budget ``max_model_calls`` is enforced
  by the gateway (it refuses with HTTP 429 once spent); what Strands does with that
  refusal is the framework's own behaviour and is part of the result.

Retries are fixed, not left to defaults, because they change what a run sends to the
gateway: LiteLLM ``num_retries=0`` (which also sets the OpenAI client's ``max_retries``
to 0; LiteLLM's default would be 2 silent client retries). Strands' own
``ModelRetryStrategy`` is left at its default (6 attempts, 4 s initial delay, 240 s
cap); it only retries ``ModelThrottledException``, which ``LiteLLMModel`` never raises
(a 429 surfaces as ``litellm.RateLimitError``), so in practice it does not retry.
Tools run with ``SequentialToolExecutor`` (Strands' default runs a response's tool calls
concurrently in threads), so that the harness tool layer's before/after workspace
snapshots of one call are not interleaved with another's.
"""

from __future__ import annotations

import os
from importlib import metadata

# LiteLLM would otherwise try to download its model cost map at import (no network here).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

FRAMEWORK = "strands"

LITELLM_NUM_RETRIES = 0
TOOL_EXECUTOR = "sequential"

SYSTEM_PROMPT = (
    "You are a software engineering agent working in a repository. Use the tools to "
    "inspect and change files and to run commands. When you are finished, reply with "
    "your final report."
)


# Modules a run loads. The LiteLLM ones past the first few are imported lazily on the
# first completion call (found by diffing sys.modules around a run): listing them here
# keeps a forked child's first model call from paying ~2 s of imports.
_RUN_MODULES = (
    "strands",
    "strands.hooks",
    "strands.models.litellm",
    "strands.tools",
    "strands.tools.executors",
    "litellm",
    "litellm.litellm_core_utils.streaming_handler",
    "litellm.litellm_core_utils.default_encoding",  # loads the bundled tiktoken encoding
    "litellm.litellm_core_utils.logging_callback_manager",
    "litellm.llms.openai.openai",
    "litellm.llms.openai_like.dynamic_config",
    "litellm.llms.litellm_proxy.chat.transformation",
    "litellm.llms.github_copilot.authenticator",
    "litellm.llms.github_copilot.per_user_auth",
    "litellm.llms.openai.chat.gpt_audio_transformation",
    "litellm.llms.bedrock.chat.invoke_transformations.amazon_ai21_transformation",
    "litellm.proxy.openai_files_endpoints.common_utils",
    "litellm.proxy.spend_tracking.savings",
    "litellm.integrations.generic_api.generic_api_callback",
    "litellm.integrations.prometheus_services",
    "litellm._service_logger",
    "litellm.proxy._types",
    "litellm.types.litellm_core_utils.streaming_chunk_builder_utils",
    "anyio._backends._asyncio",
    "anyio.streams.memory",
    "anyio.streams.stapled",
    "anyio.streams.tls",
)


def preload() -> None:
    """Import every module a run loads, so a child forked from a warm parent imports nothing heavy.

    Besides the imports, one throwaway agent is constructed (no model call): Strands and
    LiteLLM import further modules lazily on first construction, and a forked child should
    not pay for that either.
    """
    import importlib

    for name in _RUN_MODULES:
        importlib.import_module(name)
    _configure_litellm()
    _install_model_probe()
    agent = _build_agent(
        ctl={"agent_name": "preload", "model": "preload", "token": "x",
             "gateway_url": "http://127.0.0.1:9/v1"},
        tools=[],
        rec=None,
    )
    del agent


def versions() -> dict:
    """Parity facts: framework and LiteLLM versions, and the retry/executor settings used."""
    from strands.event_loop.event_loop import INITIAL_DELAY, MAX_ATTEMPTS, MAX_DELAY

    return {
        "framework": FRAMEWORK,
        "strands-agents": metadata.version("strands-agents"),
        "litellm": metadata.version("litellm"),
        "retries": {
            "litellm_num_retries": LITELLM_NUM_RETRIES,
            "openai_client_max_retries": LITELLM_NUM_RETRIES,
            "strands_model_retry": {
                "strategy": "ModelRetryStrategy (default)",
                "max_attempts": MAX_ATTEMPTS,
                "initial_delay_s": INITIAL_DELAY,
                "max_delay_s": MAX_DELAY,
                "retries_on": "ModelThrottledException (not raised by LiteLLMModel)",
            },
        },
        "streaming": True,
        "tool_executor": TOOL_EXECUTOR,
        "max_model_calls_enforced_by": "gateway",
        "runtime_model_name": "litellm response (Strands drops it; noted at litellm.acompletion)",
    }


def run(ctl: dict, tools: list, rec) -> str | None:
    """Run one Strands agent on ``ctl["prompt"]`` and return its final text.

    Exceptions (model errors, refusals the framework does not handle) propagate to the
    shared harness, which records them; nothing here turns a failure into a result.
    """
    _configure_litellm()
    _install_model_probe()
    agent = _build_agent(ctl, tools, rec)
    result = agent(ctl["prompt"])
    return _message_text(result.message)


# -- building blocks ---------------------------------------------------------------------


def _configure_litellm() -> None:
    import litellm

    litellm.telemetry = False
    # Keeps LiteLLM's "Give Feedback / Get Help" banner off stdout on every model error.
    litellm.suppress_debug_info = True
    # Never let LiteLLM drop or rewrite parameters silently for an unknown model name.
    litellm.drop_params = False


class _ModelProbe:
    """The model name on the last response LiteLLM returned (one agent, calls in sequence)."""

    last: str | None = None


def _install_model_probe() -> None:
    """Wrap ``litellm.acompletion`` once per process so each response's model name is noted.

    The wrapper returns what LiteLLM returned (a stream is wrapped only to read each
    chunk's ``model``); it changes no request and no response.
    """
    import litellm

    if getattr(litellm.acompletion, "_claimgrid_probe", False):
        return
    original = litellm.acompletion

    async def acompletion(*args, **kwargs):
        _ModelProbe.last = None
        response = await original(*args, **kwargs)
        if kwargs.get("stream"):
            return _ObservedStream(response)
        _ModelProbe.last = getattr(response, "model", None) or None
        return response

    acompletion._claimgrid_probe = True
    litellm.acompletion = acompletion


class _ObservedStream:
    """Async-iterates LiteLLM's stream unchanged, noting the model name the chunks carry.

    Strands iterates the same stream twice (up to ``finish_reason``, then for the usage
    chunk), so this is its own iterator over the one underlying iterator.
    """

    def __init__(self, stream):
        self._stream = stream
        self._it = stream.__aiter__()
        self._sent: str | None = None

    def __aiter__(self):
        return self

    async def __anext__(self):
        chunk = await self._it.__anext__()
        # LiteLLM rewrites a stream chunk's ``model`` to the requested name; the name the
        # endpoint actually sent is kept in the chunk's hidden params.
        # (A usage-only chunk may lack it: it must not overwrite the name already seen.)
        hidden = getattr(chunk, "_hidden_params", None) or {}
        sent = hidden.get("provider_response_model")
        if sent:
            self._sent = sent
        _ModelProbe.last = self._sent or getattr(chunk, "model", None) or _ModelProbe.last
        return chunk

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _build_agent(ctl: dict, tools: list, rec):
    from strands import Agent
    from strands.models.litellm import LiteLLMModel
    from strands.tools.executors import SequentialToolExecutor

    model = LiteLLMModel(
        client_args={"api_key": ctl["token"], "api_base": ctl["gateway_url"]},
        model_id="openai/" + ctl["model"],
        params={"num_retries": LITELLM_NUM_RETRIES},
    )
    hooks = [_RuntimeHooks(rec, runtime_model=ctl["model"])] if rec is not None else []
    return Agent(
        name=ctl["agent_name"],
        model=model,
        tools=[_native_tool(t) for t in tools],
        system_prompt=SYSTEM_PROMPT,
        callback_handler=None,
        hooks=hooks,
        tool_executor=SequentialToolExecutor(),
    )


def _native_tool(harness_tool):
    """Expose one harness tool as a Strands ``PythonAgentTool`` (spec = the tool's JSON schema)."""
    from strands.tools import PythonAgentTool

    spec = {
        "name": harness_tool.name,
        "description": harness_tool.description,
        "inputSchema": {"json": harness_tool.parameters},
    }

    def call(tool_use, **_invocation_state) -> dict:
        args = tool_use.get("input")
        # Strands turns unparseable argument JSON into {}: pass on exactly what it hands us.
        if not isinstance(args, dict):
            args = {}
        text = harness_tool(**args)
        return {"toolUseId": tool_use["toolUseId"], "status": "success", "content": [{"text": str(text)}]}

    call.__name__ = harness_tool.name
    return PythonAgentTool(harness_tool.name, spec, call)


def _message_text(message: dict | None) -> str | None:
    if not message:
        return None
    texts = [b["text"] for b in message.get("content", []) if isinstance(b, dict) and "text" in b]
    return "\n".join(texts) if texts else None


def _usage(message: dict) -> dict:
    u = (message.get("metadata") or {}).get("usage") or {}
    return {"prompt_tokens": u.get("inputTokens"), "completion_tokens": u.get("outputTokens")}


class _RuntimeHooks:
    """Strands hook provider that writes ``source: runtime`` events on the recorder.

    Agent names come from ``event.agent.name``: the name Strands itself attributes the
    call to, not the name the adapter configured.
    """

    def __init__(self, rec, runtime_model: str):
        self.rec = rec
        self.runtime_model = runtime_model

    def register_hooks(self, registry, **_kwargs) -> None:
        from strands.hooks import AfterInvocationEvent, AfterModelCallEvent, BeforeToolCallEvent

        registry.add_callback(BeforeToolCallEvent, self._tool_call)
        registry.add_callback(AfterModelCallEvent, self._model_call)
        registry.add_callback(AfterInvocationEvent, self._final_message)

    def _tool_call(self, event) -> None:
        tool_use = event.tool_use
        args = tool_use.get("input")
        self.rec.tool_call(event.agent.name, tool_use.get("name"), args if isinstance(args, dict) else {})

    def _model_call(self, event) -> None:
        if event.stop_response is not None:
            seen = _ModelProbe.last or self.runtime_model
            self.rec.model_call(event.agent.name, seen, _usage(event.stop_response.message))
        elif event.exception is not None and hasattr(self.rec, "error"):
            # Recorded as the runtime saw it; the exception itself still propagates.
            self.rec.error(event.agent.name, type(event.exception).__name__, str(event.exception))

    def _final_message(self, event) -> None:
        result = getattr(event, "result", None)
        if result is None:
            return
        text = _message_text(result.message)
        if text is not None:
            self.rec.message(event.agent.name, "assistant", text)
