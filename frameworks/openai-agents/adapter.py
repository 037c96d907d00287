"""claimgrid adapter for the OpenAI Agents SDK (runs inside ``.venvs/openai-agents``).

Contract: docs/CONTRACTS.md, "Adapter contract"; shared parts from ``kit`` (preload list,
system prompt, per-call deadline, error recording, limits).

- model: the SDK's own ``OpenAIChatCompletionsModel`` on an ``openai.AsyncOpenAI`` client at
  the gateway (Chat Completions, the dialect every framework here speaks; ``max_retries=0``,
  the per-call deadline as ``timeout``; the SDK's runner retries left off:
  ``ModelSettings.retry`` unset). No LiteLLM in this venv. The served model name is the
  response's ``model`` field, noted by a small subclass (the SDK's ``ModelResponse`` carries
  no model name);
- tools: each harness tool is a ``FunctionTool`` with the harness JSON schema
  (``strict_json_schema=False``: the harness schemas have optional fields);
- turn limit: ``max_turns`` = the run's model-call budget (``MaxTurnsExceeded`` past it);
- tracing: off (``tracing_disabled`` and ``OPENAI_AGENTS_DISABLE_TRACING``): the SDK's
  exporter would otherwise start a background thread and post traces to OpenAI;
- runtime events: ``RunHooks`` (``on_llm_end``, ``on_tool_start``, ``on_agent_end``),
  agent name = the ``Agent`` the SDK passes to the hook.
"""

from __future__ import annotations

import json

import kit

FRAMEWORK = "openai-agents"

# Imported lazily on a run's first model call (measured: sys.modules after preload() and
# after one run against a stub gateway): the openai SDK's chat resources and its response
# JSON parser, httpx2's IDNA host encoding, the executor the SDK's platform lookup runs in.
FIRST_CALL_MODULES = (
    "openai.resources.chat.chat",
    "openai.resources.chat.completions.completions",
    "openai.lib.streaming.chat",
    "openai.pagination",
    "jiter",
    "encodings.idna",
    "stringprep",
    "concurrent.futures.thread",
)


def preload() -> None:
    """Import what a run loads and build a throwaway agent (never run); starts no thread.

    Also the openai SDK's first-use work: the TLS context its default httpx client loads
    (built once here, shared by every run's client), and the platform facts of its request
    headers (``platform.uname()``, whose processor field runs ``uname -p`` once per process).
    """
    kit.preload("agents", "agents.models.openai_chatcompletions", "agents.run_internal.run_loop", *FIRST_CALL_MODULES)
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    agent = _build(kit.preload_ctl(), [])
    _prime_first_call(kit.prime_openai_client(agent.model._client))


def _prime_first_call(completion) -> None:
    """The first model call's one-time work past ``kit.prime_openai_client``, done before a
    fork (measured: a run's CPU in a process after preload(), first run against the next).
    The openai SDK caches the type hints of its request params on the first request it
    encodes; the SDK converts a completion's message to its own output items, whose
    pydantic models are also built on first use. ``completion``: the kit's parsed one."""
    from agents.models.chatcmpl_converter import Converter
    from openai._utils import maybe_transform
    from openai.types.chat import completion_create_params

    Converter.message_to_output_items(completion.choices[0].message, provider_data={"model": "preload"})
    call = kit.PRIMING_COMPLETION["choices"][0]["message"]["tool_calls"]
    maybe_transform(
        {
            "model": "preload",
            "messages": [
                {"role": "system", "content": "x"},
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": "x", "tool_calls": call},
                {"role": "tool", "tool_call_id": "c", "content": "x"},
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "probe",
                        "description": "x",
                        "parameters": {"type": "object", "properties": {}},
                    },
                }
            ],
        },
        completion_create_params.CompletionCreateParamsNonStreaming,
    )


def versions() -> dict:
    from agents.run import DEFAULT_MAX_TURNS

    return kit.versions(
        FRAMEWORK,
        "openai-agents",
        retries={
            "sdk_runner_retry": "off (ModelSettings.retry unset)",
            "openai_client_max_retries": kit.HTTP_CLIENT_MAX_RETRIES,
            "http_attempts_per_model_call": 1,
        },
        model_client="the SDK's OpenAIChatCompletionsModel on openai AsyncOpenAI (no LiteLLM)",
        api="chat completions (OpenAIChatCompletionsModel, not the SDK's default Responses model)",
        max_turns=f"budgets.max_model_calls (SDK default {DEFAULT_MAX_TURNS})",
        tracing="disabled",
        streaming=False,
        malformed_tool_args="raw JSON string reaches on_invoke_tool; json.loads raises, the SDK's "
        "FunctionTool error handling decides",
    )


def _tool(harness_tool):
    from agents import FunctionTool

    async def invoke(_ctx, raw: str) -> str:
        # The SDK hands a FunctionTool the model's raw argument string (documented: the
        # callback parses it). A parse error is raised, as the SDK's own function_tool does.
        args = json.loads(raw) if raw else {}
        return harness_tool(**args)

    return FunctionTool(
        name=harness_tool.name,
        description=harness_tool.description,
        params_json_schema=harness_tool.parameters,
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


_TLS_CONTEXT = None


def _tls_context():
    """The TLS context the openai SDK's default httpx client builds (``verify=True``), built
    once per process: unshared, every run's client loads the CA bundle again (measured:
    bench/README.md) for a plain-HTTP gateway. Holds no connection, so a warm parent may fork after it."""
    global _TLS_CONTEXT
    if _TLS_CONTEXT is None:
        import httpx2

        _TLS_CONTEXT = httpx2.create_ssl_context()
    return _TLS_CONTEXT


_PLATFORM = None


def _platform():
    """The openai SDK's platform name for its request headers (``get_platform()``), computed
    once per process. An ``AsyncOpenAI`` client without one computes it on its first request in
    a worker thread (``asyncify(get_platform)``, ``openai/_base_client.py``), so every run would
    start a thread pool for a value its warm parent already holds."""
    global _PLATFORM
    if _PLATFORM is None:
        from openai._base_client import get_platform

        _PLATFORM = get_platform()
    return _PLATFORM


_MODEL_CLASS = None


def _model_class():
    """``OpenAIChatCompletionsModel`` that keeps the served name (the response's ``model``
    field) of its last completion: the SDK's ``ModelResponse`` handed to ``on_llm_end`` has
    none, and its ``provider_data["model"]`` is the configured name."""
    global _MODEL_CLASS
    if _MODEL_CLASS is None:
        from agents import OpenAIChatCompletionsModel
        from openai.types.chat import ChatCompletion

        class ServedNameModel(OpenAIChatCompletionsModel):
            served: str | None = None

            async def _fetch_response(self, *args, **kwargs):
                self.served = None
                ret = await super()._fetch_response(*args, **kwargs)
                if isinstance(ret, ChatCompletion):
                    self.served = ret.model
                return ret

        _MODEL_CLASS = ServedNameModel
    return _MODEL_CLASS


def _build(ctl: dict, tools: list):
    import openai
    from agents import Agent

    # The gateway's own model name (no LiteLLM provider prefix), as the other openai-SDK
    # adapters pass it. max_retries=0: the SDK's default is 2 (correctness rule: zero client retries).
    # http_client: what AsyncOpenAI builds when given none (the SDK's defaults, its base URL
    # and timeout), but on the process's one TLS context.
    timeout = kit.call_timeout(ctl)
    http = openai.DefaultAsyncHttpxClient(base_url=ctl["gateway_url"], timeout=timeout, verify=_tls_context())
    client = openai.AsyncOpenAI(
        base_url=ctl["gateway_url"],
        api_key=ctl["token"],
        max_retries=kit.HTTP_CLIENT_MAX_RETRIES,
        timeout=timeout,
        http_client=http,
    )
    client._platform = _platform()
    model = _model_class()(model=ctl["model"], openai_client=client)
    return Agent(
        name=ctl["agent_name"], instructions=kit.system_prompt(ctl), model=model, tools=[_tool(t) for t in tools]
    )


def _hooks(rec):
    from agents import RunHooks

    class Hooks(RunHooks):
        async def on_llm_end(self, context, agent, response):
            # The response's own ``model`` field, noted by the model of the agent that made the call.
            rec.model_call(agent.name, getattr(agent.model, "served", None), kit.usage(response.usage))

        async def on_tool_start(self, context, agent, tool):
            raw = getattr(context, "tool_arguments", None)
            rec.tool_call(agent.name, tool.name, kit.tool_args(raw) if raw else {})

        async def on_agent_end(self, context, agent, output):
            kit.final_message(rec, agent.name, str(output))

    return Hooks()


def run(ctl: dict, tools: list, rec) -> str | None:
    from agents import RunConfig, Runner

    limit = kit.turn_limit(ctl)
    kit.start_run(rec, ctl, limit, "model calls (max_turns)", "framework")
    agent = _build(ctl, tools)
    with kit.recording_errors(rec, ctl["agent_name"]):
        result = Runner.run_sync(
            agent, ctl["prompt"], max_turns=limit, hooks=_hooks(rec), run_config=RunConfig(tracing_disabled=True)
        )
    out = result.final_output
    return None if out is None else str(out)
