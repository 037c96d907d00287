"""claimgrid adapter for Google's Agent Development Kit (runs inside ``.venvs/google-adk``).

Contract: docs/CONTRACTS.md, "Adapter contract"; shared parts from ``kit``.

- model: ADK's own LiteLLM wrapper, ``google.adk.models.lite_llm.LiteLlm``, on the gateway's
  LiteLLM model string (``kit.gateway_model``) with ``api_base`` = the gateway, the run token,
  the per-call deadline as ``timeout`` and ``num_retries`` 0 (LiteLLM configured by the kit);
  non-streaming (``RunConfig``'s default ``StreamingMode.NONE``);
- tools: each harness tool a ``FunctionTool`` over ``kit.tool_function``: ADK builds a tool's
  declaration from the function's signature and passes it only the arguments that signature
  names, so the function has the schema's typed parameters, plus ADK's ``tool_context`` (the
  agent a call is attributed to: ``tool_context.agent_name``);
- agent: ``LlmAgent`` with the harness prompt as its ``instruction``, run by an
  ``InMemoryRunner`` (in-memory session, artifact and memory services: nothing on disk);
- turn limit: ``RunConfig(max_llm_calls=budget)`` (ADK raises ``LlmCallsLimitExceededError``
  on the call past it);
- runtime events: ``after_model_callback`` (one per model response: the served name from
  the kit's LiteLLM probe, usage from ``usage_metadata``), the tool function (each executed
  call, with the arguments ADK passed), the runner's events (an event's ``error_code`` /
  ``error_message``, the final response's text, attributed to ``event.author``).

ADK 2.x puts a failure on an event (``workflow/_node_runner.py``: ``error_code`` the
exception's type name, ``error_message`` its text) and then raises the same exception out of
``run_async``: each is recorded once (``kit.RunErrors``).

ADK's ``LiteLlm`` copies ``litellm.acompletion`` into its own module on its first use
(``lite_llm._ensure_litellm_imported``): ``preload()`` makes that copy after ``kit.preload``
installed the served-name probe, so ADK's copy is the probe's.
"""

from __future__ import annotations

import asyncio

import kit

FRAMEWORK = "google-adk"
APP = "claimgrid"
USER = "claimgrid"


def preload() -> None:
    kit.preload(
        "google.adk",
        "google.adk.agents",
        "google.adk.models.lite_llm",
        "google.adk.runners",
        "google.adk.tools",
        "google.adk.tools.function_tool",
        "google.genai.types",
    )
    from google.adk.models import lite_llm

    # ADK's copy of litellm.acompletion, taken now: after the kit's probe wrapped it.
    lite_llm._ensure_litellm_imported()
    _runner(kit.preload_ctl(), [], None)
    kit.preload(shared=False)  # the no-thread check after the throwaway agent too


def versions() -> dict:
    return kit.versions(
        FRAMEWORK,
        "google-adk",
        "google-genai",
        model_client="ADK LiteLlm (litellm.acompletion)",
        streaming=False,
        api="chat completions",
        turn_limit="RunConfig.max_llm_calls = budgets.max_model_calls (ADK default 500)",
        tools="FunctionTool over a function with the schema's signature (kit.tool_function)",
        litellm_add_function_to_prompt="True (set by ADK; only for models without native tool calls)",
    )


def _model(ctl: dict):
    from google.adk.models.lite_llm import LiteLlm

    return LiteLlm(
        model=kit.gateway_model(ctl),
        api_base=ctl["gateway_url"],
        api_key=ctl["token"],
        timeout=kit.call_timeout(ctl),
        num_retries=kit.LITELLM_NUM_RETRIES,
    )


def _tool(harness_tool, rec):
    from google.adk.tools import FunctionTool, ToolContext

    def before(tool_context, args):
        if rec is not None:  # attributed to the agent ADK runs the tool for
            rec.tool_call(tool_context.agent_name if tool_context else None, harness_tool.name, args)

    return FunctionTool(kit.tool_function(harness_tool, before, context="tool_context", context_type=ToolContext))


def _runner(ctl: dict, tools: list, rec):
    from google.adk.agents import LlmAgent
    from google.adk.runners import InMemoryRunner

    def after_model(callback_context, llm_response):
        if rec is not None:
            u = llm_response.usage_metadata
            rec.model_call(
                callback_context.agent_name,
                kit.probe.served(llm_response.model_version or ctl["model"]),
                None if u is None else kit.usage(u, "prompt_token_count", "candidates_token_count"),
            )
        return None  # the response unchanged

    agent = LlmAgent(
        name=ctl["agent_name"],
        model=_model(ctl),
        instruction=kit.system_prompt(ctl),
        tools=[_tool(t, rec) for t in tools],
        after_model_callback=after_model,
    )
    return InMemoryRunner(agent=agent, app_name=APP)


def run(ctl: dict, tools: list, rec) -> str | None:
    from google.adk.agents.run_config import RunConfig
    from google.genai import types

    limit = kit.turn_limit(ctl)
    kit.start_run(rec, ctl, limit, "model calls (RunConfig.max_llm_calls)", "framework")
    runner = _runner(ctl, tools, rec)
    name = ctl["agent_name"]

    async def drive(errors) -> tuple[str | None, str]:
        session = await runner.session_service.create_session(app_name=APP, user_id=USER)
        text, author = None, name
        message = types.Content(role="user", parts=[types.Part(text=ctl["prompt"])])
        try:
            async for event in runner.run_async(
                user_id=USER, session_id=session.id, new_message=message, run_config=RunConfig(max_llm_calls=limit)
            ):
                if event.error_code or event.error_message:
                    errors.report(
                        event.error_message or event.error_code,
                        kind=str(event.error_code or "error"),
                        agent=event.author or name,
                    )
                if event.is_final_response() and event.content and not event.partial:
                    got = kit.content_text([{"text": p.text} for p in event.content.parts or [] if p.text], sep="")
                    if got is not None:
                        text, author = got, event.author or name
        finally:
            await runner.close()
        return text, author

    with kit.recording_errors(rec, name) as errors:
        text, author = asyncio.run(drive(errors))
    return kit.final_message(rec, author, text)
