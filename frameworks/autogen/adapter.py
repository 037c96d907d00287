"""claimgrid adapter for AutoGen AgentChat's ``AssistantAgent`` (runs inside ``.venvs/autogen``).

Contract: docs/CONTRACTS.md ("Adapter contract", "Adapter correctness rules"); shared parts
from the kit (frameworks/_harness/kit.py).

- agent: ``autogen_agentchat.agents.AssistantAgent`` with the harness prompt as its
  ``system_message``, ``max_tool_iterations`` = the run's model-call budget (with
  ``reflect_on_tool_use`` at its default, False, that is at most that many model calls) and
  AutoGen's own loop; a run ends when ``AssistantAgent.run()`` returns, and its final text is
  the content of the last chat message of the ``TaskResult`` (a ``TextMessage``, or the
  ``ToolCallSummaryMessage`` AutoGen composes from the tool results when the last
  iteration still called tools);
- model: ``autogen_ext.models.openai.OpenAIChatCompletionClient`` at the gateway (the openai
  SDK; no LiteLLM in this venv), ``max_retries=0``, the per-call deadline as ``timeout``, a
  ``model_info`` for the gateway's non-OpenAI model name (function calling, nothing else).
  AutoGen has no retry of its own around a model call;
- tools: each harness tool a ``FunctionTool`` over an ``async`` function whose signature is the
  harness schema's (``Annotated[str, description]``, optional ones default None, dropped
  before the call); AutoGen validates the arguments with the pydantic model it derives from
  that signature. The function is async so AutoGen awaits it on its loop: the calls of one
  model turn run one after another in the model's order (a sync function would go to a
  thread pool and the harness tool layer records one call at a time);
- runtime events: model calls from AutoGen's own event log (``LLMCallEvent`` on
  ``autogen_core.EVENT_LOGGER_NAME``: the response's served ``model`` and its usage), tool
  calls as the harness tool runs, attributed to the ``AssistantAgent``'s name;
- telemetry: AutoGen's OpenTelemetry spans have no SDK in this venv (no-op) and its runtime
  tracing is off (venvs.toml ``AUTOGEN_DISABLE_RUNTIME_TRACING``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging

import kit

FRAMEWORK = "autogen"

# The gateway serves a blinded model name AutoGen cannot look up: what the client may use.
MODEL_INFO = {
    "vision": False,
    "function_calling": True,
    "json_output": False,
    "family": "unknown",
    "structured_output": False,
}


def preload() -> None:
    kit.preload(
        "autogen_agentchat.agents",
        "autogen_agentchat.messages",
        "autogen_core.tools",
        "autogen_ext.models.openai",
        "openai.resources.chat.completions",
    )
    _build(kit.preload_ctl(), [], None)


def versions() -> dict:
    return kit.versions(
        FRAMEWORK,
        "autogen-agentchat",
        "autogen-core",
        "autogen-ext",
        retries={"autogen_model_client_retry": "none (AutoGen does not retry a model call)"},
        turn_limit="max_tool_iterations = budgets.max_model_calls (AutoGen default 1)",
        reflect_on_tool_use="False (AutoGen's default without output_content_type)",
        model_client="autogen_ext OpenAIChatCompletionClient (openai SDK, no LiteLLM)",
        streaming=False,
        history="AutoGen's model context (UnboundedChatCompletionContext); a run ends when run() returns",
    )


def _tool(harness_tool, rec, agent_name: str):
    from typing import Annotated

    from autogen_core.tools import FunctionTool

    required = set(harness_tool.parameters.get("required") or [])
    params, hints = [], {}
    for key, spec in harness_tool.parameters["properties"].items():
        hints[key] = Annotated[str, spec.get("description") or key]
        params.append(
            inspect.Parameter(
                key,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=hints[key],
                default=inspect.Parameter.empty if key in required else None,
            )
        )

    async def call(**kwargs) -> str:
        args = {k: v for k, v in kwargs.items() if v is not None}  # an optional one not sent
        if rec is not None:
            rec.tool_call(agent_name, harness_tool.name, args)
        return harness_tool(**args)

    call.__name__ = harness_tool.name
    call.__signature__ = inspect.Signature(params, return_annotation=str)
    call.__annotations__ = {**hints, "return": str}
    return FunctionTool(call, description=harness_tool.description, name=harness_tool.name)


def _build(ctl: dict, tools: list, rec, limit: int = 1):
    from autogen_agentchat.agents import AssistantAgent
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    client = OpenAIChatCompletionClient(
        model=ctl["model"],
        base_url=ctl["gateway_url"],
        api_key=ctl["token"],
        max_retries=kit.HTTP_CLIENT_MAX_RETRIES,
        timeout=kit.call_timeout(ctl),
        model_info=MODEL_INFO,
    )
    name = ctl["agent_name"]
    return AssistantAgent(
        name,
        model_client=client,
        tools=[_tool(t, rec, name) for t in tools],
        system_message=kit.system_prompt(ctl),
        max_tool_iterations=limit,
    )


class _ModelCalls(logging.Handler):
    """Each ``LLMCallEvent`` AutoGen's model client logs: one runtime ``model_call``."""

    def __init__(self, rec, agent: str, default: str):
        super().__init__(logging.INFO)
        self.rec, self.agent, self.default = rec, agent, default

    def emit(self, record: logging.LogRecord) -> None:
        from autogen_core.logging import LLMCallEvent

        event = record.msg
        if isinstance(event, LLMCallEvent):
            response = event.kwargs.get("response") or {}
            self.rec.model_call(
                self.agent,
                response.get("model") or self.default,
                kit.usage(event.kwargs, "prompt_tokens", "completion_tokens"),
            )


def run(ctl: dict, tools: list, rec) -> str | None:
    from autogen_core import EVENT_LOGGER_NAME

    limit = kit.turn_limit(ctl)
    kit.start_run(rec, ctl, limit, "model calls (AssistantAgent max_tool_iterations)", "framework")
    agent = _build(ctl, tools, rec, limit)
    log = logging.getLogger(EVENT_LOGGER_NAME)
    handler = _ModelCalls(rec, agent.name, ctl["model"])
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # AutoGen's event records go to the runtime channel only, not to stderr
    try:
        with kit.recording_errors(rec, agent.name):
            result = asyncio.run(agent.run(task=ctl["prompt"]))
    finally:
        log.removeHandler(handler)
    final = result.messages[-1] if result.messages else None
    text = getattr(final, "content", None) if final is not None and final.source == agent.name else None
    return kit.final_message(rec, agent.name, text if isinstance(text, str) else None)
