"""claimgrid adapter for Pydantic AI (runs inside ``.venvs/pydantic-ai``).

Contract: docs/CONTRACTS.md, "Adapter contract"; shared parts from ``kit``.

- model: Pydantic AI's ``OpenAIChatModel`` with an ``OpenAIProvider`` whose ``AsyncOpenAI``
  client points at the gateway (``max_retries=0``, also as ``ModelSettings.max_retries``).
  Pydantic AI speaks the OpenAI protocol itself; LiteLLM is not installed in this venv;
- tools: ``Tool.from_schema`` with the harness JSON schema, taking Pydantic AI's
  ``RunContext`` so a tool call is attributed to ``ctx.agent.name``;
- turn limit: ``UsageLimits(request_limit=budget)`` (``UsageLimitExceeded`` past it);
- runtime events: the agent graph's nodes (``Agent.iter``): each ``CallToolsNode`` carries
  the ``ModelResponse`` with the served ``model_name`` taken from the response, its usage
  and the tool calls; retry prompts Pydantic AI sends back (bad arguments, unknown tool)
  are recorded as ``error`` events.
"""

from __future__ import annotations

import asyncio

import kit

FRAMEWORK = "pydantic-ai"


def preload() -> None:
    kit.preload("pydantic_ai", "pydantic_ai.models.openai", "pydantic_ai.providers.openai", "openai")
    _build(kit.preload_ctl(), [])


def versions() -> dict:
    return kit.versions(
        FRAMEWORK,
        "pydantic-ai-slim",
        "pydantic-graph",
        retries={"pydantic_ai_tool_retries": 1, "pydantic_ai_output_retries": 1},
        request_limit="budgets.max_model_calls (Pydantic AI default 50)",
        model_client="openai SDK (no LiteLLM)",
        streaming=False,
        malformed_tool_args="Pydantic AI validates them and answers the model with a retry prompt",
    )


def _tool(harness_tool, rec):
    from pydantic_ai import Tool

    def call(ctx, **kwargs) -> str:
        if rec is not None:  # attributed to the agent Pydantic AI runs the tool for
            rec.tool_call(ctx.agent.name if ctx.agent else None, harness_tool.name, kwargs)
        return harness_tool(**kwargs)

    return Tool.from_schema(
        call,
        name=harness_tool.name,
        description=harness_tool.description,
        json_schema=harness_tool.parameters,
        takes_ctx=True,
        sequential=True,
    )


def _build(ctl: dict, tools: list, rec=None):
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = AsyncOpenAI(
        base_url=ctl["gateway_url"],
        api_key=ctl["token"],
        max_retries=kit.HTTP_CLIENT_MAX_RETRIES,
        timeout=kit.call_timeout(ctl),
    )
    model = OpenAIChatModel(ctl["model"], provider=OpenAIProvider(openai_client=client))
    return Agent(
        model,
        name=ctl["agent_name"],
        instructions=kit.system_prompt(ctl),
        tools=[_tool(t, rec) for t in tools],
        model_settings={"max_retries": kit.HTTP_CLIENT_MAX_RETRIES, "timeout": kit.call_timeout(ctl)},
    )


def run(ctl: dict, tools: list, rec) -> str | None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import RetryPromptPart
    from pydantic_ai.usage import UsageLimits

    limit = kit.turn_limit(ctl)
    kit.start_run(rec, ctl, limit, "model requests (UsageLimits.request_limit)", "framework")
    agent = _build(ctl, tools, rec)

    async def drive():
        async with agent.iter(ctl["prompt"], usage_limits=UsageLimits(request_limit=limit)) as run_:
            async for node in run_:
                if Agent.is_call_tools_node(node):
                    r = node.model_response
                    rec.model_call(agent.name, r.model_name, kit.usage(r.usage))
                elif Agent.is_model_request_node(node):
                    for part in node.request.parts:
                        if isinstance(part, RetryPromptPart):
                            kit.record_error(
                                rec, agent.name, f"{part.tool_name}: {part.model_response()}", kind="RetryPrompt"
                            )
        return run_.result.output

    with kit.recording_errors(rec, agent.name):
        out = asyncio.run(drive())
    return kit.final_message(rec, agent.name, None if out is None else str(out))
